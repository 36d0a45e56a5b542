"""Decoding audio (a file, or the bytes of a sample database's sample) into float samples at the feature
sample rate (soundfile + librosa; Opus through opus.py)."""
import io

import librosa
import numpy as np
import soundfile

from . import opus, sdb, tar_shards


class AudioError(ValueError):
    """An audio file that cannot be used; the message says what is wrong and how to fix it."""


def read_audio(path, sample_rate, normalize_sample_rate=True):
    """Mono float32 samples in [-1, 1] at `sample_rate`, resampled if the file's rate differs.
    `path` may also be a file object."""
    try:
        samples, file_rate = soundfile.read(path, dtype='float32', always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise AudioError('cannot decode audio: {} (expected a 16-bit PCM WAV file)'.format(error)) from None
    return _conform(samples, file_rate, sample_rate, normalize_sample_rate)


def decode_audio(audio_type, data, sample_rate, normalize_sample_rate=True):
    """read_audio() of a sample database's audio bytes: a WAV file, or DeepSpeech's Opus framing."""
    if audio_type != sdb.OPUS:
        return read_audio(io.BytesIO(data), sample_rate, normalize_sample_rate)
    try:
        pcm, file_rate, channels = opus.decode(data)
    except opus.OpusError as error:
        raise AudioError('cannot decode Opus audio: {}'.format(error)) from None
    samples = np.frombuffer(pcm, '<i2').reshape(-1, channels).astype(np.float32) / 32768.0
    return _conform(samples, file_rate, sample_rate, normalize_sample_rate)


def _conform(samples, file_rate, sample_rate, normalize_sample_rate):
    """[frames, channels] at `file_rate` -> mono [frames] at `sample_rate`, or AudioError."""
    if samples.shape[1] != 1:
        raise AudioError('{} channels, expected mono (convert with: sox in.wav -c 1 out.wav)'
                         .format(samples.shape[1]))
    samples = samples[:, 0]
    if file_rate != sample_rate:
        if not normalize_sample_rate:
            raise AudioError('sample rate {} Hz, expected {} Hz (resample the file, or drop '
                             '--nonormalize_sample_rate)'.format(file_rate, sample_rate))
        samples = librosa.resample(samples, orig_sr=file_rate, target_sr=sample_rate)
    return np.ascontiguousarray(samples, dtype=np.float32)


class RecordAudio:
    """The audio of sample records: a file of its own, read by `file_reader` (read_audio's signature), or
    a sample of a .sdb or a tar shard, read from the file opened on first use and kept open, buffered by
    `read_buffer` (--read_buffer). Not thread-safe: one per reader thread."""

    def __init__(self, read_buffer, file_reader=read_audio):
        self.read_buffer, self.file_reader, self.containers = read_buffer, file_reader, {}

    def _container(self, path):
        if path not in self.containers:
            opener = sdb.Database if sdb.is_sdb(path) else tar_shards.Shard
            self.containers[path] = opener(path, self.read_buffer)
        return self.containers[path]

    def raw(self, record):
        """(audio type, bytes) of the record's audio: a WAV file's bytes, or the sample's in its .sdb or shard."""
        if record.offset is None:
            with open(record.audio_path, 'rb') as audio_file:
                return sdb.WAV, audio_file.read()
        container = self._container(record.audio_path)
        if isinstance(container, sdb.Database):
            return container.audio_type, container.entry(record.offset).audio
        return sdb.WAV, container.read(record.offset, record.filesize)

    def samples(self, record, sample_rate, normalize_sample_rate=True):
        """read_audio() of the record's audio."""
        if record.offset is None:
            return self.file_reader(record.audio_path, sample_rate, normalize_sample_rate)
        return decode_audio(*self.raw(record), sample_rate, normalize_sample_rate)

    def close(self):
        for container in self.containers.values():
            container.close()
        self.containers = {}
