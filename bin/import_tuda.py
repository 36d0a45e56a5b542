#!/usr/bin/env python3
"""Import the German Distant Speech corpus (TUDA-De, package v2) as DeepSpeech CSVs.

BASE_DIR holds german-speechdata-package-v2.tar.gz, which is extracted there unless
german-speechdata-package-v2/ exists already. Its train/, dev/ and test/ hold <recording>.xml (with the
<cleaned_sentence>) and one <recording>_<microphone>.wav per microphone. As DeepSpeech's import_tuda.py
did, every microphone's WAV is a sample, used where it is (16 kHz mono 16-bit already; converted in place
should one not be), listed in BASE_DIR/tuda-v2-train.csv, tuda-v2-dev.csv and tuda-v2-test.csv with file
names relative to BASE_DIR; sentences are lower-cased and "co2" is spelled "c o zwei". Give a German
alphabet (with äöüß) with --alphabet, or the umlauts are folded to a, o, u and ß dropped as unknown.
"""
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.data import importers  # noqa: E402

PACKAGE = 'german-speechdata-package-v2'
URL = 'http://ltdata1.informatik.uni-hamburg.de/kaldi_tuda_de/{}.tar.gz'.format(PACKAGE)
NO_SENTENCE = 'no cleaned_sentence in the XML'


PARSER = importers.make_parser(__doc__, 'base_dir', 'folder holding {0}.tar.gz or the extracted {0}/'.format(
    PACKAGE), max_duration=10.0)


def package_folder(base_dir):
    folder = os.path.join(base_dir, PACKAGE)
    archive = folder + '.tar.gz'
    if not os.path.isdir(folder) and os.path.isfile(archive):
        importers.extract_archive(archive, base_dir)
    return importers.require_folder(folder, 'TUDA-De train/, dev/ and test/',
                                    'download {} into {} (it is extracted there) and run again'.format(URL, base_dir))


def sentence(xml_path):
    """The recording's cleaned sentence as DeepSpeech spelled it, or None."""
    try:
        found = ET.parse(xml_path).getroot().find('.//cleaned_sentence')
    except ET.ParseError as error:
        raise importers.CorpusError('{}: {}; extract the package again'.format(xml_path, error)) from None
    if found is None or not found.text:
        return None
    return found.text.lower().replace('co2', 'c o zwei')


def read_split(args, name):
    folder = package_folder(args.base_dir)
    split = importers.Split(os.path.join(args.base_dir, 'tuda-v2-{}.csv'.format(name)))
    set_dir = importers.require_folder(os.path.join(folder, name), 'the {} recordings'.format(name),
                                       'extract {}.tar.gz again'.format(PACKAGE))
    files = sorted(os.listdir(set_dir))
    wavs = {}
    for wav in files:
        if wav.endswith('.wav') and '_' in wav:
            wavs.setdefault(wav.split('_')[0], []).append(wav)
    for xml in files:
        recording, extension = os.path.splitext(xml)
        if extension != '.xml':
            continue
        text = sentence(os.path.join(set_dir, xml))
        for wav in wavs.get(recording, []):
            where = os.path.join(name, wav)
            if text is None:
                split.dropped.drop(NO_SENTENCE, where, xml)
                continue
            path = os.path.join(set_dir, wav)
            split.utterances.append(importers.Utterance(path, path, text, where))
    return split


if __name__ == '__main__':
    importers.run_importer(PARSER, read_split, ('train', 'dev', 'test'))
