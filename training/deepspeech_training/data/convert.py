"""Writing sample sets for bin/data_set_tool.py: audio converted between WAV and DeepSpeech's Opus
framing, and the two targets, a sample database (.sdb) and a CSV with a folder of WAV files.

Both targets are written under temporary names and renamed when complete, so a failed or interrupted
conversion leaves no half-written target behind.
"""
import contextlib
import csv
import io
import os
import shutil
import wave

import soundfile

from . import opus, sdb
from .samples import CSV_COLUMNS
from ..util.atomic import atomic_write


class ConvertError(ValueError):
    """A sample that passed the checks but cannot be converted; names its source and row."""


def to_pcm(audio_type, data):
    """(16-bit PCM bytes, rate, channels) of a WAV file's bytes or of framed Opus."""
    if audio_type == sdb.OPUS:
        return opus.decode(data)
    samples, rate = soundfile.read(io.BytesIO(data), dtype='int16', always_2d=True)
    return samples.tobytes(), rate, samples.shape[1]


def wav_bytes(pcm, rate, channels):
    """A 16-bit PCM WAV file (Python's wave module, as DeepSpeech's write_wav)."""
    out = io.BytesIO()
    with wave.open(out, 'wb') as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(opus.SAMPLE_WIDTH)
        wav.setframerate(rate)
        wav.writeframes(pcm)
    return out.getvalue()


def convert(audio_type, data, target_type, bitrate=None):
    """`data` (of `audio_type`) as `target_type`; unchanged when the types agree, as DeepSpeech keeps it."""
    if audio_type == target_type:
        return data
    pcm, rate, channels = to_pcm(audio_type, data)
    if target_type == sdb.OPUS:
        return opus.encode(pcm, rate, channels, bitrate)
    return wav_bytes(pcm, rate, channels)


@contextlib.contextmanager
def sdb_target(path, audio_type, labeled, buffering):
    """add(audio bytes of `audio_type`, transcript) for each sample, into the sample database `path`."""
    with atomic_write(path, 'wb', buffering=buffering) as file:
        writer = sdb.Writer(file, audio_type, labeled)
        yield writer.add
        writer.finish()


@contextlib.contextmanager
def csv_target(path, labeled, absolute_paths=False):
    """add(WAV bytes, transcript) for each sample: a CSV `path` listing WAV files in the folder named after
    it (`x.csv` -> `x/sample00000000.wav`, DeepSpeech's CSVWriter layout), relative to the CSV's folder
    unless `absolute_paths`. The folder must not exist yet."""
    base = os.path.dirname(os.path.abspath(path))
    stem = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.join(base, stem)
    if os.path.exists(folder):
        raise FileExistsError('{} already exists: the WAV files of {} go there (remove it, or choose another '
                              'target name)'.format(folder, path))
    partial = folder + '.partial'
    shutil.rmtree(partial, ignore_errors=True)     # left by a conversion that was killed
    os.makedirs(partial)
    try:
        with atomic_write(path, 'w', encoding='utf-8', newline='') as csv_file:
            writer = csv.writer(csv_file)
            writer.writerow(CSV_COLUMNS if labeled else CSV_COLUMNS[:2])
            count = [0]

            def add(data, transcript=None):
                name = 'sample{:08d}.wav'.format(count[0])
                count[0] += 1
                with open(os.path.join(partial, name), 'wb') as wav_file:
                    wav_file.write(data)
                listed = os.path.join(folder, name) if absolute_paths else os.path.join(stem, name)
                writer.writerow([listed, len(data)] + ([transcript] if labeled else []))
            yield add
            os.rename(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
