import struct

import pytest

from tests.helpers.suite import ds_ctcdecoder_output
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
    # DeepSpeech's Encode() aborts the process on these; we must raise instead.
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


def test_alphabet_files_read_as_deepspeech_reads_them(tmp_path):
    """Comments, an escaped '#', empty lines, CRLF endings and a multi-byte label: the same labels and the
    same encoding as DeepSpeech 0.9.3's own Alphabet, and a serialisation its clients read back."""
    path = tmp_path / 'alphabet.txt'
    path.write_bytes('# a comment\r\n \r\na\n\\#\n\nb\né\n#x\nc'.encode('utf-8'))
    alphabet = load_alphabet(str(path))
    text = 'a b#é c'
    serialized = alphabet.Serialize()
    size, = struct.unpack_from('<H', serialized)
    pairs, offset = {}, 2
    for _ in range(size):
        label, length = struct.unpack_from('<HH', serialized, offset)
        pairs[label] = serialized[offset + 4:offset + 4 + length].decode('utf-8')
        offset += 4 + length
    assert pairs == dict(enumerate(alphabet.labels)) and offset == len(serialized)
    ours = [alphabet.GetSize(), alphabet.GetSpaceLabel(), alphabet.Encode(text), alphabet.Decode(alphabet.Encode(text))]
    theirs = ds_ctcdecoder_output(
        'a = d.Alphabet(sys.argv[1]); b = d.Alphabet(sys.argv[1])\n'
        'assert b.Deserialize(bytes.fromhex(sys.argv[3]), len(sys.argv[3]) // 2) == 0\n'
        'print([a.GetSize(), a.GetSpaceLabel(), a.Encode(sys.argv[2]), a.Decode(a.Encode(sys.argv[2]))])\n'
        'print(b.GetSize(), [b.DecodeSingle(i) for i in range(b.GetSize())])\n', path, text, serialized.hex())
    assert theirs.splitlines() == [repr(ours), '{} {!r}'.format(size, alphabet.labels)]
    assert alphabet.labels == [' ', 'a', '#', 'b', 'é', 'c']
