#!/usr/bin/env python3
"""Import TED-LIUM (release 2, or release 3's legacy split) as DeepSpeech CSVs.

DATA_DIR holds the release: TEDLIUM_release2/ (extracted from TEDLIUM_release2.tar.gz if only that is
there), or TEDLIUM_release-3/ (from TEDLIUM_release-3.tgz) whose legacy/ folder has the same layout; a
release folder itself is accepted too.
Each of its train/, dev/ and test/ holds sph/<talk>.sph (16 kHz NIST SPHERE) and stm/<talk>.stm, one
line per segment: "<talk> <channel> <speaker> <start> <end> <labels> <transcript>". As DeepSpeech's
import_ted.py did, every segment becomes <set>/wav/<talk>-<start>-<end>.wav and DATA_DIR/ted-train.csv,
ted-dev.csv and ted-test.csv list them; segments marked ignore_time_segment_in_scoring are skipped.
Unlike it, the .sph files are kept. A rerun converts only what is new.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

SETS = ('train', 'dev', 'test')
RELEASES = ('TEDLIUM_release2', os.path.join('TEDLIUM_release-3', 'legacy'))
ARCHIVES = (('TEDLIUM_release2', 'TEDLIUM_release2.tar.gz'), ('TEDLIUM_release-3', 'TEDLIUM_release-3.tgz'))
URL = 'http://www.openslr.org/resources/19/TEDLIUM_release2.tar.gz (or /51/TEDLIUM_release-3.tgz)'
IGNORED = 'ignore_time_segment_in_scoring'
UNKNOWN_WORD = 'unknown word <unk>'


PARSER = importers.make_parser(__doc__, 'data_dir', 'folder holding the extracted TEDLIUM_release2/ or '
                               'TEDLIUM_release-3/', max_duration=0)


def find_release(data_dir):
    """The folder holding train/, dev/ and test/ with their stm/ folders; a downloaded archive is
    extracted first, as DeepSpeech did."""
    for release, archive in ARCHIVES:
        if not os.path.isdir(os.path.join(data_dir, release)) and os.path.isfile(os.path.join(data_dir, archive)):
            importers.extract_archive(os.path.join(data_dir, archive), data_dir)
    for candidate in ('',) + RELEASES:
        folder = os.path.join(data_dir, candidate)
        if all(os.path.isdir(os.path.join(folder, name, 'stm')) for name in SETS):
            return folder
    raise importers.CorpusError(
        'no TEDLIUM_release2/{{train,dev,test}}/stm in {}: download {}, extract it there '
        '(tar xzf) and run again'.format(data_dir, URL))


def contractions(text):
    """TED-LIUM tokenises contractions apart ("it 's", "we 've"): join them back as spoken."""
    return re.sub(r" '(?=\w)", "'", text)


def read_split(args, name):
    release = find_release(args.data_dir)
    split = importers.Split(os.path.join(args.data_dir, 'ted-{}.csv'.format(name)))
    for stm_path in sorted(glob.glob(os.path.join(release, name, 'stm', '*.stm'))):
        talk = os.path.splitext(os.path.basename(stm_path))[0]
        sph = os.path.join(release, name, 'sph', talk + '.sph')
        for number, line in enumerate(importers.read_text(stm_path), start=1):
            fields = line.split(None, 6)
            if not fields or line.startswith(';;'):
                continue
            where = '{} line {}'.format(os.path.relpath(stm_path, release), number)
            try:
                start, end = float(fields[3]), float(fields[4])
            except (IndexError, ValueError):
                raise importers.CorpusError('{}: expected "<talk> <channel> <speaker> <start> <end> <labels> '
                                            '<transcript>"'.format(where)) from None
            transcript = fields[6] if len(fields) > 6 else ''
            if transcript.strip() == IGNORED:
                continue
            if '<unk>' in transcript.split():
                split.dropped.drop(UNKNOWN_WORD, where, transcript)
                continue
            wav = os.path.join(release, name, 'wav', '{}-{}-{}.wav'.format(talk, fields[3], fields[4]))
            split.utterances.append(importers.Utterance(sph, wav, contractions(transcript), where, start, end))
    return split


if __name__ == '__main__':
    importers.run_importer(PARSER, read_split, SETS)
