"""bin/check_characters.py: the alphabet of a set of CSVs, and where their rare characters are."""
import os
import sys

from tests.helpers.suite import CSV_HEADER, ROOT, run_command
from deepspeech_training.util.text import load_alphabet, transcript_to_labels

TOOL = os.path.join(ROOT, 'bin', 'check_characters.py')
ROWS = ['grüße aus köln', 'schöne grüße', 'straße # eins', 'café\ufb01ne']   # \ufb01: the "fi" ligature


def write_csv(path, transcripts):
    path.write_text(CSV_HEADER + '\n' + ''.join(
        'a{}.wav,100,{}\n'.format(i, t) for i, t in enumerate(transcripts)), encoding='utf-8')
    return str(path)


def test_alphabet_of_the_csvs_encodes_every_transcript(tmp_path):
    csvs = [write_csv(tmp_path / 'a.csv', ROWS[:2]), write_csv(tmp_path / 'b.csv', ROWS[2:])]
    out = run_command([sys.executable, TOOL, '-csv', ','.join(csvs), '-alpha']).output
    (tmp_path / 'alphabet.txt').write_text(out, encoding='utf-8')
    alphabet = load_alphabet(str(tmp_path / 'alphabet.txt'))
    for text in ROWS[:3] + ['caféfine']:       # the ligature became its letters (NFKC)
        assert len(transcript_to_labels(alphabet, text)) == len(text)
    assert alphabet.GetSize() == len(set(''.join(ROWS[:3]) + 'caféfine'))


def test_report_counts_characters_and_lists_the_rows_of_rare_ones(tmp_path):
    csv_path = write_csv(tmp_path / 'a.csv', ROWS)
    out = run_command([sys.executable, TOOL, '-csv', csv_path, '--rare_count', 1]).output
    assert "4  'ü' U+00FC LATIN SMALL LETTER U WITH DIAERESIS" not in out     # 'ü' is used twice
    assert "2  'ü' U+00FC LATIN SMALL LETTER U WITH DIAERESIS" in out
    assert "'#' U+0023 NUMBER SIGN: {} line 4".format(csv_path) in out
