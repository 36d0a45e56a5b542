#!/usr/bin/env python3
"""Import a Common Voice release (one language) as DeepSpeech CSVs.

TSV_DIR is the language folder of a release (e.g. cv-corpus-X/en): train.tsv, dev.tsv, test.tsv and
validated.tsv with their clips/*.mp3. Like DeepSpeech's import_cv2.py, each clip becomes clips/<name>.wav
and each TSV present becomes clips/<name>.csv (train.csv, dev.csv, test.csv, validated.csv), with wav
file names relative to clips/. Rows are dropped when their votes are too few, their sentence cannot be
spelled with the alphabet, or their audio is unreadable, too long or too short for the sentence.
A rerun converts only the clips not converted yet.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

SPLITS = ('train', 'dev', 'test', 'validated')
REQUIRED_COLUMNS = ('path', 'sentence', 'up_votes', 'down_votes')
TOO_FEW_VOTES = 'too few votes'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('tsv_dir', help='folder with train.tsv, dev.tsv, test.tsv, validated.tsv')
    parser.add_argument('--audio_dir', help='folder of the mp3 clips, where the wavs and CSVs go '
                                            '(default: TSV_DIR/clips)')
    parser.add_argument('--min_votes', type=int, default=2,
                        help='keep a clip only with at least this many up votes, and more up than down votes '
                             "(default: %(default)s, Common Voice's own rule for validated clips)")
    importers.add_arguments(parser, max_duration=10.0, alphabet_flags=('--alphabet', '--filter_alphabet'))
    return parser.parse_args(argv)


def read_split(tsv_path, audio_dir, min_votes):
    """A Split for one TSV, its clips with too few votes already dropped."""
    name = os.path.basename(tsv_path)
    split = importers.Split(os.path.join(audio_dir, os.path.splitext(name)[0] + '.csv'))
    with open(tsv_path, encoding='utf-8', newline='') as tsv_file:
        # Sentences contain unbalanced quotes: Common Voice TSVs are not quoted, so read them verbatim.
        reader = csv.DictReader(tsv_file, delimiter='\t', quoting=csv.QUOTE_NONE)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise importers.CorpusError('{}: no column {} in the header; is this a Common Voice TSV?'
                                        .format(tsv_path, ', '.join(missing)))
        for row in reader:
            clip, sentence, up, down = parse_row(row, tsv_path, reader.line_num)
            where = '{} line {} ({})'.format(name, reader.line_num, clip)
            if up < min_votes or up <= down:
                split.dropped.drop(TOO_FEW_VOTES, where, '{} up, {} down; --min_votes is {}'.format(
                    up, down, min_votes))
                continue
            mp3 = os.path.join(audio_dir, clip)
            split.utterances.append(importers.Utterance(mp3, os.path.splitext(mp3)[0] + '.wav', sentence, where))
    return split


def parse_row(row, tsv_path, line):
    """(clip file name, sentence, up votes, down votes); a malformed row means a damaged TSV, which
    stops the import rather than being dropped like a bad clip."""
    try:
        clip, sentence = row['path'], row['sentence']
        up, down = int(row['up_votes']), int(row['down_votes'])
    except (TypeError, ValueError):
        raise importers.CorpusError('{}: line {}: expected tab-separated fields with integer up_votes and '
                                    'down_votes; the file may be truncated (extract the release again)'
                                    .format(tsv_path, line)) from None
    # Early releases name clips without their extension, as import_cv2.py knew.
    return (clip if os.path.splitext(clip)[1] else clip + '.mp3'), sentence, up, down


def main(argv=None):
    args = parse_args(argv)
    audio_dir = args.audio_dir or os.path.join(args.tsv_dir, 'clips')
    if not os.path.isdir(audio_dir):
        raise importers.CorpusError('clips folder {} not found; give the release folder that holds clips/, '
                                    'or --audio_dir'.format(audio_dir))
    tsvs = [os.path.join(args.tsv_dir, name + '.tsv') for name in SPLITS]
    tsvs = [path for path in tsvs if os.path.isfile(path)]
    if not tsvs:
        raise importers.CorpusError('none of {} found in {}; give the language folder of a Common Voice '
                                    'release'.format(', '.join(n + '.tsv' for n in SPLITS), args.tsv_dir))
    splits = [read_split(path, audio_dir, args.min_votes) for path in tsvs]
    importers.import_splits(splits, args)
    importers.write_splits(splits)


if __name__ == '__main__':
    importers.run_script(main)
