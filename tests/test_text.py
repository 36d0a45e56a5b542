import pytest

from deepspeech_training.util.text import (TranscriptError, ctc_min_frames, labels_to_text, load_alphabet,
                                           transcript_to_labels)


def test_english_alphabet_has_space_first_and_28_labels(alphabet):
    assert alphabet.GetSize() == 28
    assert transcript_to_labels(alphabet, ' a') == [0, 1]
    assert transcript_to_labels(alphabet, "z'") == [26, 27]


def test_labels_round_trip(alphabet):
    text = "don't stop me now"
    assert labels_to_text(alphabet, transcript_to_labels(alphabet, text)) == text


def test_unknown_characters_are_listed_not_a_crash(alphabet):
    # ds_ctcdecoder's Encode() aborts the process on these; we must raise instead.
    with pytest.raises(TranscriptError, match=r"'H'.*'!'"):
        transcript_to_labels(alphabet, 'Hello!')


def test_empty_transcript_is_rejected(alphabet):
    with pytest.raises(TranscriptError, match='empty transcript'):
        transcript_to_labels(alphabet, '')


def test_missing_alphabet_file_names_it(tmp_path):
    with pytest.raises(ValueError, match='cannot read alphabet file'):
        load_alphabet(str(tmp_path / 'none.txt'))


def test_utf8_mode_encodes_any_text():
    alphabet = load_alphabet('', bytes_output_mode=True)
    assert labels_to_text(alphabet, transcript_to_labels(alphabet, 'héllo')) == 'héllo'


def test_ctc_needs_a_blank_between_repeated_labels():
    assert ctc_min_frames([1, 2, 3]) == 3
    assert ctc_min_frames([1, 1, 2, 2, 2]) == 8
