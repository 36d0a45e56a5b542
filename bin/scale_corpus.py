#!/usr/bin/env python3
"""The corpora of bin/benchmark_scale.py: 10k to 1M samples as a CSV, one .sdb and tar shards, made once
under a work folder and reused (generating 1M samples takes minutes; measuring must not redo it).

    python bin/scale_corpus.py --work_dir /work/scale-corpus --sizes 10000,100000,1000000

Every sample is one of a pool of a few thousand single spoken words (espeak-ng through
bin/make_speech_corpus.py, silence trimmed so a clip is ~0.2-0.5 s: a 1M .sdb is ~10 GB, not ~30), under
a unique name. Layout under the work folder, nested so the big corpus contains the small ones:
  pool/            the clips (w<n>.wav) and pool.csv (file, transcript)
  wavs/<k>/        s<i>.wav: hard links to pool clips (1M names cost inodes, not audio bytes)
  train-<n>.csv    the first n of those links
  train-<n>.sdb    n samples, WAV inside, written directly from the pool's bytes
  shards/          shard-<k>.tar of --shard_size samples each (sample i in shard i // shard_size), plus
                   tail-<n>.tar for the n % shard_size samples a corpus of n has after its full shards
  dev.csv          a tiny dev set (the trainer wants one; it is not measured)
Every file is written under a temporary name and renamed when complete: an interrupted run leaves no
half corpus that a later run would take as done.
"""
import argparse
import csv
import os
import random
import sys
import wave

import numpy as np

BIN = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BIN)
sys.path.insert(0, BIN)
sys.path.insert(0, os.path.join(ROOT, 'training'))
import make_speech_corpus  # noqa: E402
from deepspeech_training.data import convert, sdb  # noqa: E402
from deepspeech_training.data.samples import CSV_COLUMNS  # noqa: E402
from deepspeech_training.util.atomic import atomic_write  # noqa: E402

SPEEDS = (200, 260)             # words per minute: fast speech keeps a clip short
KEEP_S = 0.03                   # silence kept each side of the trimmed word
LINKS_PER_FOLDER = 10000
DEV_SAMPLES = 8
SOURCES = ('csv', 'sdb', 'tar')


def trim(path, out_path):
    """Write `path` without its leading and trailing silence (beyond KEEP_S) to `out_path`; returns seconds."""
    with wave.open(path, 'rb') as wav:
        rate, pcm = wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), dtype='<i2')
    loud = np.flatnonzero(np.abs(pcm.astype(np.int32)) > 0.02 * np.abs(pcm.astype(np.int32)).max())
    keep = int(KEEP_S * rate)
    pcm = pcm[max(0, loud[0] - keep):loud[-1] + keep]
    with atomic_write(out_path, 'wb') as out, wave.open(out, 'wb') as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm.tobytes())
    return len(pcm) / rate


def make_pool(pool_dir, voices, jobs):
    """The pool's clips: each vocabulary word by every voice at each of SPEEDS; returns [(path, word)].
    Synthesised once (make_speech_corpus reuses its raw WAVs; pool.csv marks the pool complete)."""
    listing = os.path.join(pool_dir, 'pool.csv')
    if not os.path.exists(listing):
        from concurrent.futures import ThreadPoolExecutor
        raw = os.path.join(pool_dir, 'raw')
        os.makedirs(raw, exist_ok=True)
        rng = random.Random(0)
        plan = [(word, voice, speed, rng.randint(30, 70)) for word in make_speech_corpus.VOCABULARY
                for voice in voices for speed in SPEEDS]

        def clip(number):
            text, voice, speed, pitch = plan[number]
            source = os.path.join(raw, make_speech_corpus.wav_name(*plan[number]))
            make_speech_corpus.synthesise(text, voice, speed, pitch, source)
            return trim(source, os.path.join(pool_dir, 'w{:05d}.wav'.format(number)))
        with ThreadPoolExecutor(max_workers=jobs) as pool:     # the work is in subprocesses
            seconds = list(pool.map(clip, range(len(plan))))
        with atomic_write(listing, 'w', newline='') as out:
            csv.writer(out).writerows(('w{:05d}.wav'.format(n), plan[n][0]) for n in range(len(plan)))
        print('pool: {} clips, {:.2f}-{:.2f} s (mean {:.2f})'.format(len(plan), min(seconds), max(seconds),
                                                                   sum(seconds) / len(seconds)), flush=True)
    with open(listing, newline='') as rows:
        return [(os.path.join(pool_dir, name), word) for name, word in csv.reader(rows)]


def link_path(work_dir, number):
    return os.path.join(work_dir, 'wavs', '{:03d}'.format(number // LINKS_PER_FOLDER), 's{:07d}.wav'.format(number))


def write_csv(path, work_dir, pool, count):
    """A CSV of `count` samples, each a hard link (made here if missing) to its pool clip."""
    sizes = [os.path.getsize(p) for p, _ in pool]
    with atomic_write(path, 'w', newline='') as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for number in range(count):
            clip = number % len(pool)
            link = link_path(work_dir, number)
            if number % LINKS_PER_FOLDER == 0:
                os.makedirs(os.path.dirname(link), exist_ok=True)
            if not os.path.exists(link):
                os.link(pool[clip][0], link)
            writer.writerow([os.path.relpath(link, work_dir), sizes[clip], pool[clip][1]])


def pool_samples(pool, numbers):
    """(WAV bytes, transcript) of samples `numbers`, sample i being pool clip i % len(pool)."""
    audio = [open(p, 'rb').read() for p, _ in pool]
    return ((audio[n % len(pool)], pool[n % len(pool)][1]) for n in numbers)


def write_sdb(path, pool, count):
    """One sample database of `count` samples, WAV inside."""
    with convert.sdb_target(path, sdb.WAV, True, 1 << 22) as add:
        for audio, transcript in pool_samples(pool, range(count)):
            add(audio, transcript)


def write_shard(path, pool, numbers):
    """One WebDataset tar shard of samples `numbers`."""
    with convert.tar_target(path, len(numbers)) as add:
        for audio, transcript in pool_samples(pool, numbers):
            add(audio, transcript)


def shard_paths(work_dir, count, shard_size):
    """The shards of a corpus of `count` samples: the full shards it shares with bigger corpora, then its
    own tail, as (path, sample numbers)."""
    full = count // shard_size
    shards = [(os.path.join(work_dir, 'shards', 'shard-{:06d}.tar'.format(k)),
               range(k * shard_size, (k + 1) * shard_size)) for k in range(full)]
    if count % shard_size:
        shards.append((os.path.join(work_dir, 'shards', 'tail-{}.tar'.format(count)), range(full * shard_size, count)))
    return shards


def train_files(work_dir, source, count, shard_size):
    """What --train_files names for `source` of the corpus of `count` samples (a comma-separated list of
    shards for tar), relative to `work_dir` (the caller joins its own folder or URL)."""
    if source == 'tar':
        return [os.path.relpath(path, work_dir) for path, _ in shard_paths(work_dir, count, shard_size)]
    return ['train-{}.{}'.format(count, source)]


def make_corpus(work_dir, count, sources, pool, shard_size):
    """The corpus of `count` samples as each of `sources`, what is missing of it; returns {source: bytes on
    disk} (for csv: the CSV alone, its links add no audio bytes)."""
    os.makedirs(os.path.join(work_dir, 'shards'), exist_ok=True)
    for source in sources:
        if source == 'tar':
            for path, numbers in shard_paths(work_dir, count, shard_size):
                if not os.path.exists(path):
                    write_shard(path, pool, numbers)
            continue
        path = os.path.join(work_dir, train_files(work_dir, source, count, shard_size)[0])
        if os.path.exists(path):
            continue
        if source == 'csv':
            write_csv(path, work_dir, pool, count)
        else:
            write_sdb(path, pool, count)
    return {source: sum(os.path.getsize(os.path.join(work_dir, f))
                        for f in train_files(work_dir, source, count, shard_size)) for source in sources}


def make_all(work_dir, sizes, sources, shard_size=10000, voices=make_speech_corpus.DEFAULT_VOICES.split(','),
             jobs=os.cpu_count()):
    """Every corpus (smallest first) and dev.csv; returns ({size: {source: bytes}}, dev CSV path)."""
    os.makedirs(work_dir, exist_ok=True)
    pool = make_pool(os.path.join(work_dir, 'pool'), voices, jobs)
    dev = os.path.join(work_dir, 'dev.csv')
    if not os.path.exists(dev):
        make_speech_corpus.write_csv(dev, pool[:DEV_SAMPLES])
    disk = {}
    for count in sorted(sizes):
        disk[count] = make_corpus(work_dir, count, sources, pool, shard_size)
        print('corpus {}: {}'.format(count, ', '.join('{} {:.1f} MB'.format(s, b / 1e6)
                                                      for s, b in disk[count].items())), flush=True)
    return disk, dev


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--work_dir', default='/work/scale-corpus')
    parser.add_argument('--sizes', default='10000,100000,1000000')
    parser.add_argument('--sources', default=','.join(SOURCES))
    parser.add_argument('--shard_size', type=int, default=10000)
    args = parser.parse_args(argv)
    make_all(args.work_dir, [int(n) for n in args.sizes.split(',')], args.sources.split(','), args.shard_size)


if __name__ == '__main__':
    main()
