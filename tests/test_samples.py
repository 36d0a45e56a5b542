import os

import pytest

from deepspeech_training.data.samples import DataError, read_sources
from tests.helpers.suite import CSV_HEADER


def write_csv(path, rows, header=CSV_HEADER):
    path.write_text('\n'.join([header] + rows) + '\n', encoding='utf-8')
    return str(path)


def test_paths_are_relative_to_the_csv_and_samples_sorted_by_size(tmp_path, alphabet):
    csv_path = write_csv(tmp_path / 'a.csv', ['b.wav,300,long one', 'a.wav,100,short'])
    records = read_sources([csv_path], alphabet)
    assert [r.transcript for r in records] == ['short', 'long one']
    assert records[0].audio_path == os.path.join(str(tmp_path), 'a.wav')
    assert records[1].row == 2


def test_sources_merge_then_limit_and_reverse(tmp_path, alphabet):
    first = write_csv(tmp_path / 'a.csv', ['a.wav,100,a', 'c.wav,300,c'])
    second = write_csv(tmp_path / 'b.csv', ['b.wav,200,b'])
    assert [r.transcript for r in read_sources([first, second], alphabet)] == ['a', 'b', 'c']
    assert [r.transcript for r in read_sources([first, second], alphabet, limit=2, reverse=True)] == ['c', 'b']


def test_missing_column_is_named_with_the_expected_header(tmp_path, alphabet):
    csv_path = write_csv(tmp_path / 'bad.csv', ['a.wav,x'], header='wav_filename,transcript')
    with pytest.raises(DataError, match=r'bad.csv: line 1: missing column\(s\) wav_filesize'):
        read_sources([csv_path], alphabet)


def test_every_bad_row_is_reported_with_file_line_and_fix(tmp_path, alphabet):
    csv_path = write_csv(tmp_path / 'bad.csv', ['a.wav,12,fine', 'b.wav,big,text', 'c.wav,1,Bad!', 'd.wav,1'])
    with pytest.raises(DataError) as error:
        read_sources([csv_path], alphabet)
    message = str(error.value)
    assert '3 problem(s)' in message
    assert "line 3: b.wav: wav_filesize 'big' is not an integer" in message
    assert "line 4: c.wav: characters not in the alphabet: 'B' '!'" in message
    assert 'line 5: expected 3 fields' in message


def test_csv_that_is_not_utf8_is_reported(tmp_path, alphabet):
    path = tmp_path / 'latin1.csv'
    path.write_bytes((CSV_HEADER + '\na.wav,1,caf\xe9\n').encode('latin-1'))
    with pytest.raises(DataError, match='not valid UTF-8'):
        read_sources([str(path)], alphabet)

