#!/usr/bin/env python3
"""Build a sample set (a sample database .sdb, WebDataset tar shards, or a CSV with its WAV files) from CSV,
.sdb and tar shard sources.

DeepSpeech 0.9's tool of the same name and options: `data_set_tool.py SOURCES... TARGET`. The samples
keep the order of their sources. They are checked as training checks them (transcripts against the
alphabet, audio readable, mono, long enough for the transcript) before anything is written, and the
target appears only when complete. Each .sdb or tar shard written gets its container index beside it,
`<target>.index` (data/container_index.py: every sample's offset, size, transcript and audio header, so
training reads them in a few reads instead of a few per sample); `--index_only` writes it for
containers that exist.

    $PY bin/data_set_tool.py my/train.csv my/train.sdb                     # Opus inside (DeepSpeech's default)
    $PY bin/data_set_tool.py --audio_type wav my/train.csv my/train.sdb    # lossless
    $PY bin/data_set_tool.py my/train.sdb my/unpacked.csv                  # back to CSV + my/unpacked/*.wav
    $PY bin/data_set_tool.py my/train.csv 'my/train-{000..009}.tar'        # 10 WebDataset shards (WAV)
    $PY bin/data_set_tool.py --index_only my/cv.sdb 'my/shard-*.tar'       # the .index of existing containers
"""
import argparse
import contextlib
import dataclasses
import os
import sys
from multiprocessing import Pool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.entry import quiet_tensorflow  # noqa: E402
quiet_tensorflow('2')
from deepspeech_training.config import settings_from_args  # noqa: E402
from deepspeech_training.data import container_index, convert, sdb, tar_shards  # noqa: E402
from deepspeech_training.data.audio import RecordAudio  # noqa: E402
from deepspeech_training.data.byte_ranges import DEFAULT_READ_BUFFER  # noqa: E402
from deepspeech_training.data.samples import DataError, read_records  # noqa: E402
from deepspeech_training.data.validation import validate_sets  # noqa: E402
from deepspeech_training.distributed import Single  # noqa: E402
from deepspeech_training.flags import parse_size  # noqa: E402
from deepspeech_training.util.logging import Progress, log_error, log_info  # noqa: E402
from deepspeech_training.util.text import load_alphabet  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUDIO_TYPES = {'opus': sdb.OPUS, 'wav': sdb.WAV}


def parse_args(argv=None):
    usage = '%(prog)s [options] SOURCES... TARGET\n       %(prog)s --index_only CONTAINERS...'
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0], usage=usage)
    parser.add_argument('paths', nargs='+', metavar='SOURCES... TARGET',
                        help='the sources: CSV files, .sdb files, tar shards (paths or patterns); then the target: '
                             'the .sdb or .csv file to write (a .csv gets its WAV files in the folder of its name), '
                             'or tar shards: x.tar, or x-{000..009}.tar for ten. With --index_only: the containers')
    parser.add_argument('--index_only', '--index-only', action='store_true',
                        help='write no target: write the container index (<container>.index) of each .sdb file and '
                             'tar shard given (paths or patterns)')
    # DeepSpeech 0.9 spells these with dashes; this project's flags use underscores: both work.
    parser.add_argument('--audio_type', '--audio-type', default='opus', choices=sorted(AUDIO_TYPES),
                        help='audio inside a target .sdb (default opus, as DeepSpeech; wav is lossless)')
    parser.add_argument('--bitrate', type=int, help='Opus bitrate in bit/s (default: libopus chooses)')
    parser.add_argument('--workers', type=int, default=None, help='conversion processes (default: one per core)')
    parser.add_argument('--unlabeled', action='store_true',
                        help='audio only, transcripts ignored (e.g. noise for --augment overlay)')
    parser.add_argument('--absolute_paths', '--absolute-paths', action='store_true',
                        help='list absolute WAV paths in a target CSV (default: relative to the CSV)')
    parser.add_argument('--alphabet_config_path', default=os.path.join(ROOT, 'data', 'alphabet.txt'),
                        help='the alphabet transcripts are checked against')
    parser.add_argument('--read_buffer', type=parse_size, default=DEFAULT_READ_BUFFER,
                        help='buffer for reading and writing .sdb files, e.g. 1MB (default)')
    args = parser.parse_args(argv)
    if args.index_only:
        args.containers = tar_shards.expand_all(args.paths)
        not_containers = [p for p in args.containers if not (sdb.is_sdb(p) or tar_shards.is_tar(p))]
        if not_containers:
            parser.error('--index_only: {} is not a .sdb file or tar shard'.format(not_containers[0]))
        return args
    if len(args.paths) < 2:
        parser.error('give the sources and then the target (SOURCES... TARGET), or --index_only CONTAINERS...')
    args.sources, args.target = args.paths[:-1], args.paths[-1]
    if os.path.splitext(args.target)[1].lower() not in ('.sdb', '.csv', '.tar'):
        parser.error('the target must be a .sdb, .csv or .tar file (or x-{{000..009}}.tar: ten shards), not {}'
                     .format(args.target))
    if tar_shards.is_tar(args.target) and args.unlabeled:
        parser.error('--unlabeled: a tar shard holds each sample as <key>.wav + <key>.txt; write a .sdb or .csv')
    if args.workers is not None and args.workers < 1:
        parser.error('--workers must be at least 1')
    return args


def check_config(alphabet, read_buffer):
    """What validation needs of a training Config: the training flags' defaults (DeepSpeech's feature windows
    at 16 kHz), with this alphabet and read buffer."""
    return dataclasses.replace(settings_from_args([]).model, alphabet=alphabet, read_buffer=read_buffer)


_worker = {}


def start_worker(read_buffer, target_type, bitrate):
    _worker.update(audio=RecordAudio(read_buffer), target_type=target_type, bitrate=bitrate)


def converted(record):
    """The record's audio as the target wants it; errors name the source and row."""
    try:
        return convert.convert(*_worker['audio'].raw(record), _worker['target_type'], _worker['bitrate'])
    except (OSError, ValueError, RuntimeError) as error:    # OpusError, SdbError, libsndfile's errors
        raise convert.ConvertError('{}: cannot convert: {}'.format(record.where, error)) from None


def converted_samples(records, workers, start):
    """The records' audio converted, in their order: by `workers` processes (None: one per core), or in
    this one when `workers` is 1."""
    if workers == 1:
        start_worker(*start)
        yield from map(converted, records)
        return
    with Pool(workers, initializer=start_worker, initargs=start) as pool:     # terminated on leaving
        yield from pool.imap(converted, records, chunksize=8)


def write(args, records):
    target_is_sdb = sdb.is_sdb(args.target)
    target_type = AUDIO_TYPES[args.audio_type] if target_is_sdb else sdb.WAV
    labeled = not args.unlabeled
    if target_is_sdb:
        target = convert.sdb_target(args.target, target_type, labeled, args.read_buffer)
    elif tar_shards.is_tar(args.target):
        target = convert.tar_target(args.target, len(records))
    else:
        target = convert.csv_target(args.target, labeled, args.absolute_paths)
    progress = Progress('Writing {}'.format(args.target), len(records), unit='Samples', show_loss=False)
    start = (args.read_buffer, target_type, args.bitrate)
    with target as add, contextlib.closing(converted_samples(records, args.workers, start)) as samples:
        for done, (record, data) in enumerate(zip(records, samples), 1):
            add(data, record.transcript)
            progress.update(done)
    progress.finish()


def containers(target):
    """The .sdb file or tar shards a target names (none for a CSV)."""
    if sdb.is_sdb(target):
        return [target]
    return convert.shard_paths(target) if tar_shards.is_tar(target) else []


def write_indexes(paths):
    """The container index beside each of `paths` (written after its container is complete)."""
    for path in paths:
        index = container_index.write_sidecar(path)
        log_info('Wrote {}{} ({} sample(s))'.format(path, container_index.SIDECAR, len(index)))


def remove_indexes(paths):
    """Remove the indexes of containers about to be rewritten: an old one beside a new container would be
    caught by its fingerprint, but need not be read at all."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + container_index.SIDECAR)


def index_only(args):
    try:
        write_indexes(args.containers)
    except (OSError, sdb.SdbError, tar_shards.ShardError) as error:
        log_error(str(error))
        return 1
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.index_only:
        return index_only(args)
    alphabet = None if args.unlabeled else load_alphabet(args.alphabet_config_path)
    try:
        records = read_records(args.sources, alphabet)
        validate_sets([('sources', records)], check_config(alphabet, args.read_buffer), Single())
        targets = containers(args.target)
        remove_indexes(targets)
        write(args, records)
    except (DataError, FileExistsError, convert.ConvertError, convert.TargetError) as error:
        log_error(str(error))
        return 1
    log_info('Wrote {} sample(s) to {}'.format(len(records), args.target))
    write_indexes(targets)
    return 0


if __name__ == '__main__':
    sys.exit(main())
