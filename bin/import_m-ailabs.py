#!/usr/bin/env python3
"""Import one language of the M-AILABS Speech Dataset as DeepSpeech CSVs.

TARGET_DIR holds <language>.tgz (e.g. de_DE.tgz), which is extracted into TARGET_DIR/<language>/ unless
that folder exists already, or the extracted folder itself: <language>/by_book/<gender>/<speaker>/<book>/
(or by_book/mix/<book>/) with metadata.csv ("<id>|<text>|<normalised text>") and wavs/<id>.wav. As
DeepSpeech's import_m-ailabs.py did, the WAVs are used where they are (converted in place to 16 kHz mono
16-bit should one not be), and of the samples kept, in order, every tenth from the first goes to
<language>/<language>_test.csv, every tenth from the second to <language>_dev.csv and the others to
<language>_train.csv, with file names relative to <language>/.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

URL = 'https://data.solak.de/data/Training/stt_tts/{}.tgz'


def parse_args(argv=None):
    parser = importers.make_parser(__doc__, 'target_dir', 'folder holding <language>.tgz or the extracted '
                                   '<language>/', max_duration=15.0, alphabet_flags=('--alphabet', '--filter_alphabet'))
    parser.add_argument('--language', required=True, help='the language to import, e.g. de_DE, en_US, fr_FR')
    parser.add_argument('--skiplist', default='',
                        help='comma-separated books or speakers to leave out (any part of the metadata.csv path)')
    return parser.parse_args(argv)


def language_folder(target_dir, language):
    """TARGET_DIR/<language>, extracted from <language>.tgz when needed."""
    folder = os.path.join(target_dir, language)
    archive = folder + '.tgz'
    if not os.path.isdir(folder) and os.path.isfile(archive):
        os.makedirs(folder)
        importers.extract_archive(archive, folder)
    return importers.require_folder(folder, 'M-AILABS {} (by_book/.../metadata.csv)'.format(language),
                                    'download {} into {} (it is extracted there) and run again'.format(
                                        URL.format(language), target_dir))


def read_split(folder, language, skiplist):
    split = importers.Split(os.path.join(folder, '{}_all.csv'.format(language)))
    skip = [part.strip() for part in skiplist.split(',') if part.strip()]
    books = sorted(glob.glob(os.path.join(folder, '**', 'metadata.csv'), recursive=True))
    if not books:
        raise importers.CorpusError('no metadata.csv under {}; the archive may be incomplete: extract {}.tgz '
                                    'again'.format(folder, language))
    for metadata in books:
        if any(part in metadata for part in skip):
            continue
        for number, line in enumerate(importers.read_text(metadata), start=1):
            fields = line.split('|')
            if len(fields) < 2:
                continue
            wav = os.path.join(os.path.dirname(metadata), 'wavs', fields[0] + '.wav')
            where = '{} line {}'.format(os.path.relpath(metadata, folder), number)
            split.utterances.append(importers.Utterance(wav, wav, fields[2] if len(fields) > 2 else fields[1],
                                                        where))
    return split


def main(argv=None):
    args = parse_args(argv)
    folder = language_folder(args.target_dir, args.language)
    split = read_split(folder, args.language, args.skiplist)
    importers.import_splits([split], args)
    importers.print_summary(folder, split.rows, split.dropped)
    parts = {'test': split.rows[0::10], 'dev': split.rows[1::10],
             'train': [row for i, row in enumerate(split.rows) if i % 10 > 1]}
    for name, rows in parts.items():
        csv_path = os.path.join(folder, '{}_{}.csv'.format(args.language, name))
        importers.write_csv(csv_path, rows)
        print('{}: {} samples'.format(csv_path, len(rows)))


if __name__ == '__main__':
    importers.run_script(main)
