#!/usr/bin/env python3
"""Time the validation pass (data/validation.py) per 1,000 samples: soundfile.info against the RIFF walk of
data/headers.py, serial vs thread pools vs a process pool, and the whole pass without and with the header cache.

    python -m benchmarks.validation /tmp/vcorpus/train.csv /tmp/vcorpus/dev.csv /tmp/vcorpus/test.csv

(make a corpus with: python -m benchmarks.make_speech_corpus --out_dir /tmp/vcorpus --count 1000). Each
configuration runs --repeats times on a warm page cache, and once more "cold": the files' pages are
evicted first with posix_fadvise(DONTNEED), which is closer to a first pass over a large or remote corpus.
Prints a table: configuration, ms per 1,000 samples (warm best-of, cold), ratio to the first row; the last
rows are the whole pass as main() runs it (default thread pool, plus the per-sample checks), without a
header cache and with one filled by the pass before (a second run of the same corpus).
"""
import argparse
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import soundfile

from benchmarks.common import ALPHABET
from deepspeech_training.config import settings_from_args
from deepspeech_training.distributed import Single
from deepspeech_training.data import headers, validation
from deepspeech_training.util import logging
from deepspeech_training.data.samples import read_sources
from deepspeech_training.util.text import load_alphabet


def evict(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_chunk(chunk):
    return [(path, headers.read_header(path)) for path in chunk]


def process_pool(paths, workers):
    chunks = [paths[i:i + validation.CHUNK] for i in range(0, len(paths), validation.CHUNK)]
    headers = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for result in pool.map(read_chunk, chunks):
            headers.update(result)
    return headers


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('csv', nargs='+')
    parser.add_argument('--alphabet', default=ALPHABET)
    parser.add_argument('--repeats', type=int, default=5)
    args = parser.parse_args()
    logging.configure(show_progressbar=False)
    records = read_sources(args.csv, load_alphabet(args.alphabet))
    paths = sorted({r.audio_path for r in records})
    cores = os.cpu_count() or 1
    configurations = [('soundfile.info', lambda: [soundfile.info(p) for p in paths]),
                      ('serial', lambda: [headers.read_header(p) for p in paths])]
    for workers in sorted({2, cores, 2 * cores, 4 * cores, validation.MAX_WORKERS}):
        configurations.append(('threads x{}'.format(workers),
                               lambda w=workers: validation._pooled(headers.read_header, paths, w)))
    configurations.append(('processes x{}'.format(cores), lambda: process_pool(paths, cores)))
    config = settings_from_args(['--alphabet_config_path', args.alphabet]).model    # the training defaults
    configurations.append(('whole pass', lambda: validation.validate_sets([('all', records)], config, Single())))
    cache_dir = tempfile.mkdtemp(prefix='header_cache')
    configurations.append(('pass, cached', lambda: validation.validate_sets([('all', records)], config, Single(),
                                                                            cache_dir=cache_dir)))
    print('{} samples, {} files, {} core(s)'.format(len(records), len(paths), cores))
    print('{:<16} {:>18} {:>18} {:>8}'.format('configuration', 'warm ms/1000', 'cold ms/1000', 'ratio'))
    baseline = None
    for name, run in configurations:
        run()   # warm-up (and the pool's start-up is part of what a real pass pays: it is included below)
        warm = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            run()
            warm.append(time.perf_counter() - started)
        evict(paths)
        started = time.perf_counter()
        run()
        cold = time.perf_counter() - started
        per_1000 = min(warm) * 1000.0 / len(paths) * 1000.0
        baseline = baseline or per_1000
        print('{:<16} {:>18.1f} {:>18.1f} {:>8.2f}'.format(name, per_1000, cold * 1e6 / len(paths),
                                                          per_1000 / baseline))


if __name__ == '__main__':
    main()
