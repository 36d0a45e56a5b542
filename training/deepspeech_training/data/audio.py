"""Decoding audio (a file, or the bytes of a sample database's sample) into float samples at the feature
sample rate (soundfile + librosa; Opus through opus.py), and how many feature frames they make."""
import io
import threading

import librosa
import numpy as np
import soundfile

from . import byte_ranges, opus, sdb, tar_shards


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


def frame_count(n_samples, config):
    """Number of MFCC frames AudioSpectrogram makes of `n_samples` audio samples."""
    if n_samples < config.audio_window_samples:
        return 0
    return 1 + (n_samples - config.audio_window_samples) // config.audio_step_samples


class RecordAudio:
    """The audio of sample records: a file of its own, read by `file_reader` (read_audio's signature), or
    a sample of a .sdb or a tar shard, read from the container opened on first use and kept open.
    `load()` reads a batch's samples ahead, in ascending offset order and merged into reads of up to
    `read_buffer` (--read_buffer) bytes. Containers are shared by threads; `load()`ed bytes are not:
    one RecordAudio per reader thread that loads."""

    def __init__(self, read_buffer, file_reader=read_audio):
        self.read_buffer, self.file_reader, self.containers, self.loaded = read_buffer, file_reader, {}, {}
        self.lock = threading.Lock()

    def _container(self, path):
        with self.lock:
            if path not in self.containers:
                self.containers[path] = sdb.Database(path) if sdb.is_sdb(path) else tar_shards.Shard(path)
            return self.containers[path]

    def load(self, records):
        """Read the audio of the contained `records` (a batch) now, for raw() and samples() to use."""
        by_container = {}
        for record in records:
            if record.offset is not None and record.length is not None:
                by_container.setdefault(record.audio_path, []).append((record.offset, record.length))
        for path, ranges in by_container.items():
            found = byte_ranges.read_ranges(self._container(path).source, ranges, self.read_buffer)
            self.loaded.update(((path, offset), data) for offset, data in found.items())

    def raw(self, record):
        """(audio type, bytes) of the record's audio: a WAV file's bytes, or the sample's in its .sdb or shard."""
        if record.offset is None:
            with open(record.audio_path, 'rb') as audio_file:
                return sdb.WAV, audio_file.read()
        container = self._container(record.audio_path)
        data = self.loaded.pop(record.audio_key, None)
        if isinstance(container, sdb.Database):
            return container.audio_type, container.entry(record.offset, data=data).audio
        return sdb.WAV, container.read(record.offset, record.filesize, data)

    def audio_file(self, record):
        """(audio type, a file object of the contained record's audio that reads only what is read of it)."""
        container = self._container(record.audio_path)
        if isinstance(container, sdb.Database):
            return container.audio_type, container.audio_file(record.offset)
        return sdb.WAV, container.audio_file(record.offset, record.filesize)

    def samples(self, record, sample_rate, normalize_sample_rate=True):
        """read_audio() of the record's audio."""
        if record.offset is None:
            return self.file_reader(record.audio_path, sample_rate, normalize_sample_rate)
        return decode_audio(*self.raw(record), sample_rate, normalize_sample_rate)

    def close(self):
        for container in self.containers.values():
            container.close()
        self.containers, self.loaded = {}, {}
