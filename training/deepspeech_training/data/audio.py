"""Decoding audio files into float samples at the feature sample rate (soundfile + librosa)."""
import librosa
import numpy as np
import soundfile


class AudioError(ValueError):
    """An audio file that cannot be used; the message says what is wrong and how to fix it."""


def read_audio(path, sample_rate, normalize_sample_rate=True):
    """Mono float32 samples in [-1, 1] at `sample_rate`, resampled if the file's rate differs."""
    try:
        samples, file_rate = soundfile.read(path, dtype='float32', always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise AudioError('cannot decode audio: {} (expected a 16-bit PCM WAV file)'.format(error)) from None
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

