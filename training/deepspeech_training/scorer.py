"""Loading the KenLM scorer package for beam search, checked first in a child process.

ds_ctcdecoder aborts the whole process (an uncaught C++ exception) on a scorer whose KenLM part is
truncated or damaged, so the package is opened once in a throw-away child before this process
touches it: a bad file becomes a clear error at start, not a crash hours into a run.
"""
import mmap
import os
import struct
import subprocess
import sys

import numpy as np
from ds_ctcdecoder import Scorer, UTF8Alphabet

from .util.text import load_alphabet


class ScorerError(ValueError):
    pass


def _open(path, alpha, beta, alphabet):
    try:
        return Scorer(alpha, beta, path, alphabet)
    except ValueError as error:
        raise ScorerError('cannot load scorer {}: {} (expected a scorer package made by '
                          'bin/generate_scorer_package.py)'.format(path, error)) from None


# DeepSpeech 0.9's package: the KenLM binary, then this header ('TRIE', version 6, UTF-8 mode, alpha,
# beta), then the word dictionary as an aligned OpenFST ConstFst whose labels are alphabet labels + 1.
HEADER = struct.pack('<ii', 0x54524945, 6)
HEADER_SIZE = 25
FST_MAGIC = struct.pack('<i', 2125659606)
STATE = np.dtype([('final', '<f4'), ('first_arc', '<u4'), ('arcs', '<u4'), ('in_eps', '<u4'), ('out_eps', '<u4')])
ARC = np.dtype([('ilabel', '<i4'), ('olabel', '<i4'), ('weight', '<f4'), ('next', '<i4')])


def dictionary_labels(path):
    """(every label of the package's dictionary, the labels that end a word), read from the file:
    ds_ctcdecoder has no way to tell which alphabet a package was made with. None if not found."""
    with open(path, 'rb') as package, mmap.mmap(package.fileno(), 0, access=mmap.ACCESS_READ) as data:
        start = data.rfind(HEADER)
        while start >= 0 and data[start + HEADER_SIZE:start + HEADER_SIZE + 4] != FST_MAGIC:
            start = data.rfind(HEADER, 0, start)
        if start < 0:
            return None
        position = start + HEADER_SIZE + 4
        for _ in range(2):   # the fst type and arc type strings
            position += 4 + struct.unpack_from('<i', data, position)[0]
        _, _, _, _, n_states, n_arcs = struct.unpack_from('<iiQqqq', data, position)
        position += 40
        position += -position % 16
        states = np.frombuffer(data, STATE, n_states, position).copy()
        position += n_states * STATE.itemsize
        position += -position % 16
        arcs = np.frombuffer(data, ARC, n_arcs, position).copy()
    finals = np.flatnonzero(np.isfinite(states['final']))
    return set(np.unique(arcs['ilabel']).tolist()), set(np.unique(arcs['ilabel'][np.isin(arcs['next'], finals)]).tolist())


def check_dictionary(path, alphabet, alphabet_path):
    """A package made with another alphabet spells words with labels this one lacks, or ends them
    with another label than this alphabet's space."""
    found = dictionary_labels(path)
    if found is None or isinstance(alphabet, UTF8Alphabet):
        return
    labels, word_ends = found
    space = alphabet.GetSpaceLabel() + 1
    if max(labels) > alphabet.GetSize() or word_ends - {space}:
        raise ScorerError('scorer {} was made with another alphabet: its words use labels up to {} and end with '
                          'label(s) {}, but {} has {} labels with the space at {} (rebuild the scorer with '
                          'bin/generate_scorer_package.py --alphabet {})'.format(
                              path, max(labels) - 1, sorted(w - 1 for w in word_ends), alphabet_path,
                              alphabet.GetSize(), space - 1, alphabet_path))


def check_scorer(path, alphabet_path, bytes_output_mode):
    """Open the package in a child process; raise ScorerError if it crashes, fails or does not match."""
    training_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))    # the folder holding the package
    child = subprocess.run([sys.executable, '-m', __name__, path, alphabet_path,
                            str(int(bytes_output_mode))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, env=dict(os.environ, PYTHONPATH=training_dir))
    if child.returncode < 0:
        raise ScorerError('scorer {} is damaged: opening it crashed the decoder (signal {}); rebuild it with '
                          'data/lm/generate_lm.py and bin/generate_scorer_package.py'.format(path, -child.returncode))
    if child.returncode != 0:
        raise ScorerError(child.stdout.strip().splitlines()[-1])
    utf8_mode = child.stdout.split()[-1] == 'True'
    if utf8_mode != bytes_output_mode:
        raise ScorerError('scorer {} was made for {} but this model predicts {} (see --bytes_output_mode and '
                          'generate_scorer_package.py --force_bytes_output_mode)'.format(
                              path, *(('UTF-8 bytes', 'alphabet labels') if utf8_mode else
                                      ('alphabet labels', 'UTF-8 bytes'))))


def load_scorer(path, alpha, beta, alphabet_path, bytes_output_mode):
    check_scorer(path, alphabet_path, bytes_output_mode)
    alphabet = load_alphabet(alphabet_path, bytes_output_mode)
    check_dictionary(path, alphabet, alphabet_path)
    return _open(path, alpha, beta, alphabet)


def _child(path, alphabet_path, bytes_output_mode):
    try:
        scorer = _open(path, 1.0, 1.0, load_alphabet(alphabet_path, bytes_output_mode))
    except (ScorerError, ValueError) as error:
        print(error)
        sys.exit(1)
    print('order', scorer.get_max_order(), 'utf8', scorer.is_utf8_mode())


if __name__ == '__main__':
    _child(sys.argv[1], sys.argv[2], sys.argv[3] == '1')
