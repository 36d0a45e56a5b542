#!/usr/bin/env python3
"""Import a folder tree of audio files with same-named .txt transcripts as DeepSpeech CSVs.

Every SOURCE_DIR/<path>.wav, .flac, .mp3 or .ogg with a SOURCE_DIR/<path>.txt beside it becomes
OUT_DIR/<path>.wav (16 kHz mono 16-bit), listed in OUT_DIR/all.csv; with --dev_fraction and/or
--test_fraction the samples go to OUT_DIR/train.csv, dev.csv and test.csv instead, split by
transcript so that no dev or test sentence is also a train sentence. A rerun converts only what is new.
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

AUDIO_EXTENSIONS = ('.wav', '.flac', '.mp3', '.ogg')
BAD_TRANSCRIPT = 'transcript file not UTF-8'
AMBIGUOUS = 'several audio files for one transcript'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('source_dir', help='folder tree of audio files and .txt transcripts')
    parser.add_argument('out_dir', help='where the wavs (same tree) and CSVs go; not SOURCE_DIR itself')
    parser.add_argument('--dev_fraction', type=fraction, default=0.0, help='share of transcripts for dev.csv')
    parser.add_argument('--test_fraction', type=fraction, default=0.0, help='share of transcripts for test.csv')
    parser.add_argument('--seed', type=int, default=0, help='seed of the train/dev/test split')
    importers.add_arguments(parser, max_duration=0)
    args = parser.parse_args(argv)
    if args.dev_fraction + args.test_fraction >= 1:
        parser.error('--dev_fraction plus --test_fraction must be below 1, leaving samples for train.csv')
    return args


def fraction(text):
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError('must be at least 0 and below 1, got {}'.format(text))
    return value


def find_audio(source_dir, out_dir):
    """{path without extension: [audio files]}, relative to source_dir; out_dir is skipped when it lies
    inside, so that a rerun does not import its own output."""
    found = {}
    for folder, subfolders, files in os.walk(source_dir):
        subfolders[:] = sorted(d for d in subfolders
                               if os.path.realpath(os.path.join(folder, d)) != os.path.realpath(out_dir))
        for name in files:
            stem, extension = os.path.splitext(name)
            if extension.lower() in AUDIO_EXTENSIONS:
                relative = os.path.relpath(os.path.join(folder, stem), source_dir)
                found.setdefault(relative, []).append(os.path.join(folder, name))
    return found


def read_split(source_dir, out_dir):
    """One Split for the whole tree; audio without a readable transcript is dropped here."""
    split = importers.Split(os.path.join(out_dir, 'all.csv'))
    for stem, audio_files in sorted(find_audio(source_dir, out_dir).items()):
        if len(audio_files) > 1:
            for path in sorted(audio_files):
                split.dropped.drop(AMBIGUOUS, os.path.relpath(path, source_dir),
                                   'rename all but one of {}.*'.format(stem))
            continue
        where = os.path.relpath(audio_files[0], source_dir)
        transcript_path = os.path.join(source_dir, stem + '.txt')
        try:
            with open(transcript_path, encoding='utf-8') as transcript_file:
                transcript = transcript_file.read()
        except FileNotFoundError:
            split.dropped.drop(importers.NO_TRANSCRIPT, where, 'expected {}'.format(stem + '.txt'))
            continue
        except UnicodeDecodeError as error:
            split.dropped.drop(BAD_TRANSCRIPT, where, '{}.txt: {} (re-encode it, e.g. iconv -t UTF-8)'.format(
                stem, error))
            continue
        split.utterances.append(importers.Utterance(
            audio_files[0], os.path.join(out_dir, stem + '.wav'), transcript, where))
    return split


def split_rows(rows, seed, dev_fraction, test_fraction):
    """{'train': rows, 'dev': rows, 'test': rows}, assigning whole transcripts, so that a sentence
    recorded twice cannot be in train and in dev or test; a non-zero fraction gets at least one."""
    transcripts = sorted({row.transcript for row in rows})
    random.Random(seed).shuffle(transcripts)
    n_test, n_dev = (max(1, round(len(transcripts) * f)) if f else 0 for f in (test_fraction, dev_fraction))
    if n_test + n_dev >= len(transcripts):
        raise importers.CorpusError('{} distinct transcripts were kept: too few for a train, dev and test split; '
                                    'lower --dev_fraction and --test_fraction'.format(len(transcripts)))
    assigned = {text: 'test' for text in transcripts[:n_test]}
    assigned.update({text: 'dev' for text in transcripts[n_test:n_test + n_dev]})
    return {name: [row for row in rows if assigned.get(row.transcript, 'train') == name]
            for name in ('train', 'dev', 'test')}


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.source_dir):
        raise importers.CorpusError('{} is not a folder'.format(args.source_dir))
    if os.path.realpath(args.source_dir) == os.path.realpath(args.out_dir):
        raise importers.CorpusError('OUT_DIR is SOURCE_DIR ({}): its .wav files would be overwritten by their '
                                    'conversions; give another OUT_DIR'.format(args.source_dir))
    split = read_split(args.source_dir, args.out_dir)
    importers.import_splits([split], args)
    if not (args.dev_fraction or args.test_fraction):
        importers.write_splits([split])
        return
    importers.print_summary(args.source_dir, split.rows, split.dropped)
    for name, rows in split_rows(split.rows, args.seed, args.dev_fraction, args.test_fraction).items():
        csv_path = os.path.join(args.out_dir, name + '.csv')
        importers.write_csv(csv_path, rows)
        print('{}: {} samples, {} transcripts'.format(csv_path, len(rows), len({row.transcript for row in rows})))


if __name__ == '__main__':
    importers.run_script(main)
