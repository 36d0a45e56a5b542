#!/usr/bin/env python3
"""Import TIMIT (LDC93S1) as DeepSpeech CSVs.

DATA_DIR holds TIMIT/, or LDC's TIMIT-LDC93S1.tgz, extracted into TIMIT/ as DeepSpeech did (an LDC
licence is needed; nothing is downloaded): TIMIT/{TRAIN,TEST}/<dialect>/<speaker>/<sentence>.WAV
(NIST SPHERE) with <sentence>.TXT ("<first sample> <last sample> <sentence>"); lower-case names work
too. As DeepSpeech's import_timit.py did, every sentence becomes <sentence>_rif.wav beside its .WAV, and
TIMIT/timit_train.csv, timit_test.csv and timit_all.csv (both) list them; the two SA sentences every
speaker read are left out (repeated by all speakers, they would skew the WER) unless --keep_sa. A rerun
converts only what is new.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

ARCHIVE = 'TIMIT-LDC93S1.tgz'
SUFFIX = '_rif.wav'


def parse_args(argv=None):
    parser = importers.make_parser(__doc__, 'data_dir', 'folder holding the extracted TIMIT/', max_duration=0)
    parser.add_argument('--keep_sa', action='store_true',
                        help='keep the SA sentences, read by every speaker (DeepSpeech leaves them out)')
    return parser.parse_args(argv)


def find_sets(timit):
    """{'train': folder, 'test': folder}, whatever the case of the names; also one level down, where an
    archive holding TIMIT/ itself was extracted into TIMIT/."""
    inner = [os.path.join(timit, name) for name in ('TIMIT', 'timit') if os.path.isdir(os.path.join(timit, name))]
    if inner:
        return find_sets(inner[0])
    sets = {name.lower(): os.path.join(timit, name) for name in os.listdir(timit)
            if name.lower() in ('train', 'test') and os.path.isdir(os.path.join(timit, name))}
    if len(sets) < 2:
        raise importers.CorpusError('{} has no TRAIN/ and TEST/ folders; give the folder holding TIMIT/ '
                                    'extracted from {}'.format(timit, ARCHIVE))
    return sets


def read_split(timit, folder, name, keep_sa):
    split = importers.Split(os.path.join(timit, 'timit_{}.csv'.format(name)))
    for parent, subfolders, files in os.walk(folder):
        subfolders.sort()
        for audio in sorted(files):
            stem, extension = os.path.splitext(audio)
            if extension.lower() != '.wav' or audio.endswith(SUFFIX):
                continue
            if stem.upper().startswith('SA') and not keep_sa:
                continue
            where = os.path.relpath(os.path.join(parent, audio), timit)
            texts = [os.path.join(parent, stem + ext) for ext in ('.TXT', '.txt')]
            text = next((path for path in texts if os.path.isfile(path)), None)
            if text is None:
                split.dropped.drop(importers.NO_TRANSCRIPT, where, 'expected {}.TXT'.format(stem))
                continue
            words = ' '.join(importers.read_text(text, encoding='latin-1')).split()[2:]
            split.utterances.append(importers.Utterance(
                os.path.join(parent, audio), os.path.join(parent, stem + SUFFIX), ' '.join(words), where))
    return split


def main(argv=None):
    args = parse_args(argv)
    timit = next((os.path.join(args.data_dir, name) for name in ('TIMIT', 'timit')
                  if os.path.isdir(os.path.join(args.data_dir, name))), os.path.join(args.data_dir, 'TIMIT'))
    if not os.path.isdir(timit) and os.path.isfile(os.path.join(args.data_dir, ARCHIVE)):
        os.makedirs(timit)  # as DeepSpeech did: the archive's contents go into TIMIT/
        importers.extract_archive(os.path.join(args.data_dir, ARCHIVE), timit)
    importers.require_folder(timit, 'TIMIT extracted from {}'.format(ARCHIVE),
                             'TIMIT is licensed by LDC (https://catalog.ldc.upenn.edu/LDC93S1): extract your '
                             'copy there (mkdir {0} && tar xzf {1} -C {0}) and run again'.format(timit, ARCHIVE))
    sets = find_sets(timit)
    splits = [read_split(timit, sets[name], name, args.keep_sa) for name in ('train', 'test')]
    importers.import_splits(splits, args)
    importers.write_splits(splits)
    all_csv, rows = os.path.join(timit, 'timit_all.csv'), [row for split in splits for row in split.rows]
    importers.write_csv(all_csv, rows)
    print('{}: {} samples'.format(all_csv, len(rows)))


if __name__ == '__main__':
    importers.run_script(main)
