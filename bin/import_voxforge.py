#!/usr/bin/env python3
"""Import VoxForge (English, 16 kHz 16-bit submissions) as DeepSpeech CSVs.

DATA_DIR/archive/ holds the downloaded submissions (*.tgz from the VoxForge 16kHz_16bit folder). As
DeepSpeech's import_voxforge.py did, they are extracted in name order, the first 1 % into DATA_DIR/test/,
the next 1 % into DATA_DIR/dev/ and the rest into DATA_DIR/train/ (an archive already extracted is left
alone; submissions extracted there by hand are read as well). Each submission's etc/PROMPTS lists
"<speaker>/mfc/<id> <SENTENCE>" for its wav/<id>.wav (used where it is) or flac/<id>.flac (converted to
wav/<id>.wav; DeepSpeech skipped these). DATA_DIR/voxforge-train.csv, voxforge-dev.csv and
voxforge-test.csv list the samples, with file names relative to DATA_DIR.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

URL = 'http://www.repository.voxforge1.org/downloads/SpeechCorpus/Trunk/Audio/Main/16kHz_16bit/'
SETS = ('train', 'dev', 'test')


PARSER = importers.make_parser(__doc__, 'data_dir', 'folder holding archive/*.tgz, or the extracted train/, '
                               'dev/, test/', max_duration=20.0)


def submissions(data_dir):
    """`data_dir`, once DATA_DIR/archive/*.tgz are extracted into test/, dev/ and train/ by DeepSpeech's
    rule (those extracted already are left alone)."""
    importers.require_folder(data_dir, 'VoxForge', 'create it')
    archives = sorted(glob.glob(os.path.join(data_dir, 'archive', '*.tgz')))
    share = len(archives) // 100
    for index, archive in enumerate(archives):
        name = 'test' if index < share else 'dev' if index < 2 * share else 'train'
        if not os.path.isdir(os.path.join(data_dir, name, os.path.basename(archive)[:-len('.tgz')])):
            importers.extract_archive(archive, os.path.join(data_dir, name))
    if not any(glob.glob(os.path.join(data_dir, name, '*', 'etc', 'PROMPTS')) for name in SETS):
        raise importers.CorpusError(
            'no VoxForge submissions in {0}: download the *.tgz files of {1} into {0}/archive/ '
            '(e.g. wget -r -nd -A tgz -P {0}/archive {1}) and run again'.format(data_dir, URL))
    return data_dir


def read_split(args, name):
    data_dir = submissions(args.data_dir)
    split = importers.Split(os.path.join(data_dir, 'voxforge-{}.csv'.format(name)))
    for prompts in sorted(glob.glob(os.path.join(data_dir, name, '*', 'etc', 'PROMPTS'))):
        submission = os.path.dirname(os.path.dirname(prompts))
        for number, line in enumerate(importers.read_text(prompts, encoding='latin-1'), start=1):
            path, _, text = line.strip().partition(' ')
            if not path:
                continue
            utterance_id = path.split('/')[-1]
            wav = os.path.join(submission, 'wav', utterance_id + '.wav')
            flac = os.path.join(submission, 'flac', utterance_id + '.flac')
            source = wav if os.path.isfile(wav) or not os.path.isfile(flac) else flac
            where = '{} line {}'.format(os.path.relpath(prompts, data_dir), number)
            split.utterances.append(importers.Utterance(source, wav, text, where))
    return split


if __name__ == '__main__':
    importers.run_importer(PARSER, read_split, SETS)
