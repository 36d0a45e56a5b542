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
import tarfile
import wave

import soundfile

from . import opus, sdb, tar_shards
from .samples import CSV_COLUMNS
from ..util.atomic import atomic_write


class ConvertError(ValueError):
    """A sample that passed the checks but cannot be converted; names its source and row."""


class TargetError(ValueError):
    """A target that cannot be written as named; says how to name it."""


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


def sample_name(number):
    """DeepSpeech's CSVWriter names: sample00000000 ..."""
    return 'sample{:08d}'.format(number)


def shard_paths(target):
    """The shards a tar target names: itself, or each of a `{000..009}` range; TargetError for a glob."""
    if tar_shards.BRACES.search(target) is None and tar_shards.is_pattern(target):
        raise TargetError('{}: a target names its shards by a range such as train-{{000..009}}.tar, not by a '
                         'wildcard'.format(target))
    return tar_shards.expand(target)


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)            # mtime 0, owner root: the same samples give the same bytes
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


@contextlib.contextmanager
def tar_target(target, count):
    """add(WAV bytes, transcript) for each of `count` samples: WebDataset shards (`<key>.wav` + `<key>.txt`,
    keys sample00000000 ...), one file or a `{000..009}` range of them, the samples split in order into
    runs as equal as can be. Every shard is written under a temporary name, all renamed at the end."""
    paths = shard_paths(target)
    if len(paths) > count:
        raise TargetError('{}: {} shards for {} sample(s): name at most as many shards as samples'
                         .format(target, len(paths), count))
    with contextlib.ExitStack() as stack:
        tars = [stack.enter_context(tarfile.open(fileobj=stack.enter_context(atomic_write(path, 'wb')), mode='w'))
                for path in paths]
        number = [0]

        def add(data, transcript):
            tar = tars[number[0] * len(tars) // count]
            add_member(tar, sample_name(number[0]) + '.wav', data)
            add_member(tar, sample_name(number[0]) + '.txt', transcript.encode('utf-8'))
            number[0] += 1
        yield add


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
                name = sample_name(count[0]) + '.wav'
                count[0] += 1
                with open(os.path.join(partial, name), 'wb') as wav_file:
                    wav_file.write(data)
                listed = os.path.join(folder, name) if absolute_paths else os.path.join(stem, name)
                writer.writerow([listed, len(data)] + ([transcript] if labeled else []))
            yield add
            os.rename(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
