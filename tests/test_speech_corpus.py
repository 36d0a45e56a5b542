"""The bundled smoke-test data and benchmarks/make_speech_corpus.py, which synthesises speech corpora."""
import csv
import os
import shutil
import subprocess
import sys
import wave

import pytest

from tests.helpers.suite import ROOT, SMOKE_DIR

HEADER = ['wav_filename', 'wav_filesize', 'transcript']

needs_tts = pytest.mark.skipif(shutil.which('espeak-ng') is None or shutil.which('sox') is None,
                               reason='espeak-ng and sox are not installed (apt-get install espeak-ng sox)')


def alphabet_labels():
    """The labels of data/alphabet.txt, in order (comment lines skipped, '\\#' unescaped)."""
    with open(os.path.join(ROOT, 'data', 'alphabet.txt'), encoding='utf-8') as alphabet_file:
        lines = alphabet_file.read().split('\n')[:-1]
    return [line[1:] if line.startswith('\\#') else line for line in lines if not line.startswith('#')]


def read_csv(path):
    """(header, rows as dicts) of a DeepSpeech CSV."""
    with open(path, newline='', encoding='utf-8') as csv_file:
        reader = csv.DictReader(csv_file)
        return reader.fieldnames, list(reader)


def check_csv(path, alphabet):
    """Assert a CSV is a valid DeepSpeech CSV of 16 kHz mono 16-bit wavs; returns (rows, durations)."""
    header, rows = read_csv(path)
    assert header == HEADER
    assert rows, '{} lists no files'.format(path)
    durations = []
    for row in rows:
        wav_path = os.path.join(os.path.dirname(path), row['wav_filename'])
        assert os.path.isfile(wav_path)
        assert int(row['wav_filesize']) == os.path.getsize(wav_path)
        with wave.open(wav_path, 'rb') as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
            durations.append(wav.getnframes() / wav.getframerate())
        transcript = row['transcript']
        assert transcript and transcript == transcript.strip()
        assert set(transcript) <= alphabet, 'characters outside the alphabet in {!r}'.format(transcript)
    return rows, durations


def run_corpus_script(out_dir, count):
    """Run the script as a user would: (exit code, output)."""
    result = subprocess.run([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', str(out_dir), '--count', str(count),
                             '--seed', '1', '--jobs', '4'], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    return result.returncode, result.stdout


def make_corpus(out_dir, count=12):
    """Run the script as a user would; returns its output."""
    exit_code, output = run_corpus_script(out_dir, count)
    assert exit_code == 0, output
    return output


def test_alphabet_is_deepspeech_english():
    labels = alphabet_labels()
    assert labels == [' '] + [chr(c) for c in range(ord('a'), ord('z') + 1)] + ["'"]


def test_bundled_smoke_data():
    alphabet = set(alphabet_labels())
    rows, durations = check_csv(os.path.join(SMOKE_DIR, 'smoke_test.csv'), alphabet)
    assert len(rows) == 3
    assert all(1.0 <= seconds <= 2.5 for seconds in durations), durations
    single, _ = check_csv(os.path.join(SMOKE_DIR, 'smoke_test_single.csv'), alphabet)
    assert single == rows[:1]


@needs_tts
def test_generated_corpus_split_and_reuse(tmp_path):
    output = make_corpus(tmp_path)
    assert '12 synthesised, 0 reused' in output
    alphabet = set(alphabet_labels())
    sentences, wavs = {}, {}
    for split in ('train', 'dev', 'test'):
        rows, _ = check_csv(str(tmp_path / (split + '.csv')), alphabet)
        sentences[split] = {row['transcript'] for row in rows}
        wavs.update((row['wav_filename'], row['transcript']) for row in rows)
    assert len(wavs) == 12
    assert not sentences['test'] & sentences['train']
    assert not sentences['dev'] & sentences['train']
    with open(str(tmp_path / 'train_sentences.txt'), encoding='utf-8') as text_file:
        assert set(text_file.read().splitlines()) == sentences['train']
    assert (tmp_path / 'vocabulary.txt').stat().st_size > 0

    csvs = {name: (tmp_path / name).read_bytes() for name in ('train.csv', 'dev.csv', 'test.csv')}
    mtimes = {name: (tmp_path / name).stat().st_mtime_ns for name in wavs}
    output = make_corpus(tmp_path)
    assert '0 synthesised, 12 reused' in output
    assert {name: (tmp_path / name).stat().st_mtime_ns for name in wavs} == mtimes
    assert {name: (tmp_path / name).read_bytes() for name in csvs} == csvs

    # Other options into the same folder stop before any CSV is rewritten, naming the fix.
    exit_code, output = run_corpus_script(tmp_path, 10)
    assert exit_code != 0
    assert 'holds a corpus made with count 12' in output and '--utterances 12' in output, output
    assert {name: (tmp_path / name).read_bytes() for name in csvs} == csvs
