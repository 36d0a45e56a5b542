"""Transcript <-> label conversion with DeepSpeech's alphabets (util/alphabet.py), the same objects
training labels and beam-search decoding use, so the two never disagree about the label order. Every
transcript goes through `transcript_to_labels`, which checks first and raises a Python error that
callers can attach a file and row to.
"""
from .alphabet import Alphabet, UTF8Alphabet


class TranscriptError(ValueError):
    """A transcript that cannot be turned into labels; the message says why and how to fix it."""


def load_alphabet(path, bytes_output_mode=False):
    if bytes_output_mode:
        return UTF8Alphabet()
    try:
        return Alphabet(path)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError('cannot read alphabet file {}: {} (expected one label per line, # for comments)'
                         .format(path, error)) from None


def unknown_characters(alphabet, transcript):
    """Characters of `transcript` that `alphabet` has no label for, in order of first appearance."""
    if isinstance(alphabet, UTF8Alphabet):
        return []
    seen = []
    for char in transcript:
        if char not in seen and not alphabet.CanEncodeSingle(char):
            seen.append(char)
    return seen


def transcript_to_labels(alphabet, transcript):
    """Labels for `transcript`, or a TranscriptError naming the characters the alphabet lacks."""
    if not transcript:
        raise TranscriptError('empty transcript (a sample needs at least one character to learn from)')
    unknown = unknown_characters(alphabet, transcript)
    if unknown:
        raise TranscriptError('characters not in the alphabet: {} (normalise the transcript, or add them to '
                              'the alphabet file)'.format(' '.join(repr(c) for c in unknown)))
    return alphabet.Encode(transcript)


def labels_to_text(alphabet, labels):
    return alphabet.Decode([int(label) for label in labels])


def ctc_min_frames(labels):
    """Fewest feature frames CTC needs for these labels: one each, plus a blank between repeats."""
    repeats = sum(1 for a, b in zip(labels, labels[1:]) if a == b)
    return len(labels) + repeats
