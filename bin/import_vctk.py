#!/usr/bin/env python3
"""Import the CSTR VCTK Corpus (release 0.80, VCTK-Corpus.zip) as DeepSpeech CSVs.

DATA_DIR holds the extracted VCTK-Corpus/: wav48/<speaker>/<speaker>_<n>.wav (48 kHz) and
txt/<speaker>/<speaker>_<n>.txt. Every recording becomes VCTK-Corpus/wav16/<speaker>/<speaker>_<n>.wav
(the 48 kHz originals are kept, where DeepSpeech's import_vctk.py overwrote them) and, as there,
DATA_DIR/vctk_full.csv lists them all and a shuffle seeded 1454 puts the first --train_size in
vctk_train.csv, the next --dev_size in vctk_dev.csv and the rest in vctk_test.csv. Recordings without a
transcript (speaker p315) are dropped. A rerun converts only what is new.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

CORPUS = 'VCTK-Corpus'
URL = 'https://datashare.is.ed.ac.uk/bitstream/handle/10283/2651/VCTK-Corpus.zip'
SEED = 1454


def parse_args(argv=None):
    parser = importers.make_parser(__doc__, 'data_dir', 'folder holding the extracted VCTK-Corpus/', max_duration=10.0)
    parser.add_argument('--train_size', type=int, default=37000,
                        help='samples for vctk_train.csv (default: %(default)s, as DeepSpeech)')
    parser.add_argument('--dev_size', type=int, default=3200,
                        help='samples for vctk_dev.csv, the rest going to vctk_test.csv (default: %(default)s)')
    return parser.parse_args(argv)


def read_split(data_dir, corpus):
    split = importers.Split(os.path.join(data_dir, 'vctk_full.csv'))
    wav48 = importers.require_folder(os.path.join(corpus, 'wav48'), "VCTK's wav48/<speaker>/*.wav",
                                     'extract VCTK-Corpus.zip (release 0.80) into {}'.format(data_dir))
    for speaker in sorted(os.listdir(wav48)):
        if not os.path.isdir(os.path.join(wav48, speaker)):
            continue
        for audio in sorted(os.listdir(os.path.join(wav48, speaker))):
            stem, extension = os.path.splitext(audio)
            if extension.lower() != '.wav':
                continue
            where = os.path.join('wav48', speaker, audio)
            text = os.path.join(corpus, 'txt', speaker, stem + '.txt')
            if not os.path.isfile(text):
                split.dropped.drop(importers.NO_TRANSCRIPT, where, 'expected {}'.format(os.path.relpath(text, corpus)))
                continue
            split.utterances.append(importers.Utterance(
                os.path.join(wav48, speaker, audio), os.path.join(corpus, 'wav16', speaker, audio),
                ' '.join(importers.read_text(text)), where))
    return split


def main(argv=None):
    args = parse_args(argv)
    corpus = importers.require_folder(
        os.path.join(args.data_dir, CORPUS), 'the extracted VCTK corpus',
        'download {} (no network access is attempted), unzip it in {} and run again'.format(URL, args.data_dir))
    split = read_split(args.data_dir, corpus)
    importers.import_splits([split], args)
    importers.write_splits([split])
    rows = list(split.rows)
    random.Random(SEED).shuffle(rows)
    cuts = {'train': rows[:args.train_size], 'dev': rows[args.train_size:args.train_size + args.dev_size],
            'test': rows[args.train_size + args.dev_size:]}
    for name, part in cuts.items():
        csv_path = os.path.join(args.data_dir, 'vctk_{}.csv'.format(name))
        importers.write_csv(csv_path, part)
        print('{}: {} samples'.format(csv_path, len(part)))


if __name__ == '__main__':
    importers.run_script(main)
