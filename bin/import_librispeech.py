#!/usr/bin/env python3
"""Import LibriSpeech subsets as DeepSpeech CSVs.

ROOT is the extracted LibriSpeech folder: <subset>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt
listing "<utterance id> <TRANSCRIPT>" per line, next to <utterance id>.flac. As DeepSpeech's
import_librivox.py did, each subset becomes ROOT/<subset>-wav/<utterance id>.wav and
ROOT/librivox-<subset>.csv (e.g. librivox-train-clean-100.csv), with wav file names relative to ROOT.
Every subset found is imported unless --subsets names some. A rerun converts only what is new.
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

TRANSCRIPTS = os.path.join('*', '*', '*.trans.txt')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('root', help='the LibriSpeech folder, holding e.g. train-clean-100/ and dev-clean/')
    parser.add_argument('--subsets', help='comma-separated subsets to import (default: all found in ROOT)')
    importers.add_arguments(parser, max_duration=0)
    return parser.parse_args(argv)


def find_subsets(root, wanted):
    """The subset folders of `root` to import: those holding speaker/chapter/*.trans.txt files."""
    found = sorted(name for name in os.listdir(root)
                   if next(glob.iglob(os.path.join(root, name, TRANSCRIPTS)), None))
    if not found:
        raise importers.CorpusError('no <subset>/<speaker>/<chapter>/*.trans.txt under {}; give the extracted '
                                    'LibriSpeech folder (the one holding e.g. dev-clean/)'.format(root))
    if not wanted:
        return found
    subsets = [name.strip() for name in wanted.split(',') if name.strip()]
    unknown = [name for name in subsets if name not in found]
    if unknown:
        raise importers.CorpusError('--subsets {} not found in {}; it has: {}'.format(
            ', '.join(unknown), root, ', '.join(found)))
    return subsets


def read_split(root, subset):
    """A Split for one subset, from its transcript files."""
    split = importers.Split(os.path.join(root, 'librivox-{}.csv'.format(subset)))
    wav_dir = os.path.join(root, subset + '-wav')
    for trans_path in sorted(glob.glob(os.path.join(root, subset, TRANSCRIPTS))):
        with open(trans_path, encoding='utf-8') as trans_file:
            for line_number, line in enumerate(trans_file, start=1):
                if not line.strip():
                    continue
                utterance_id, _, transcript = line.strip().partition(' ')
                where = '{} line {} ({})'.format(os.path.relpath(trans_path, root), line_number, utterance_id)
                flac = os.path.join(os.path.dirname(trans_path), utterance_id + '.flac')
                split.utterances.append(importers.Utterance(
                    flac, os.path.join(wav_dir, utterance_id + '.wav'), transcript, where))
    return split


def main(argv=None):
    args = parse_args(argv)
    if not os.path.isdir(args.root):
        raise importers.CorpusError('{} is not a folder; give the extracted LibriSpeech folder'.format(args.root))
    splits = [read_split(args.root, subset) for subset in find_subsets(args.root, args.subsets)]
    importers.import_splits(splits, args)
    importers.write_splits(splits)


if __name__ == '__main__':
    importers.run_script(main)
