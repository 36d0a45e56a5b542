"""DeepSpeech 0.9's scorer package format, read and written here (generate_scorer_package.py writes it).

A package is the KenLM binary LM, then Scorer::save_dictionary's header (int32 magic 'TRIE', int32
version 6, bool UTF-8 mode, float64 default alpha, float64 default beta), then the vocabulary as an
OpenFST 1.6.7 ConstFst<StdArc, uint32> written aligned to 16 file bytes, whose labels are alphabet
labels + 1 (0 is epsilon). In character mode every word is its characters followed by the space; in
UTF-8 (bytes output) mode its UTF-8 bytes.
"""
import mmap
import struct
from dataclasses import dataclass

import numpy as np

SCORER_MAGIC = 0x54524945  # the C++ multi-character constant 'TRIE'
SCORER_FILE_VERSION = 6
HEADER_FORMAT = '<ii?dd'
HEADER = struct.pack('<ii', SCORER_MAGIC, SCORER_FILE_VERSION)
HEADER_SIZE = struct.calcsize(HEADER_FORMAT)

FST_MAGIC = 2125659606
FST_ALIGNED_VERSION = 1
FST_FLAG_IS_ALIGNED = 0x4
FST_ALIGN = 16
FST_HEADER_FORMAT = '<iiQqqq'   # version, flags, properties, start, states, arcs
STATE = np.dtype([('final', '<f4'), ('first_arc', '<u4'), ('arcs', '<u4'), ('in_eps', '<u4'), ('out_eps', '<u4')])
ARC = np.dtype([('ilabel', '<i4'), ('olabel', '<i4'), ('weight', '<f4'), ('next', '<i4')])
KENLM_MAGIC = b'mmap lm http://kheafield.com/code'


class PackageFormatError(ValueError):
    pass


@dataclass
class PackageContents:
    """What a package says besides its LM: its mode, default alpha/beta, and its words, each as the
    tuple of alphabet labels that spells it (the trailing space included in character mode)."""
    utf8_mode: bool
    alpha: float
    beta: float
    spellings: list


def _header_start(data):
    """The header is the last 'TRIE' v6 followed, after the header, by an FST."""
    start = data.rfind(HEADER)
    fst_magic = struct.pack('<i', FST_MAGIC)
    while start >= 0 and data[start + HEADER_SIZE:start + HEADER_SIZE + 4] != fst_magic:
        start = data.rfind(HEADER, 0, start)
    return start


def is_kenlm_binary(path):
    with open(path, 'rb') as file:
        return file.read(len(KENLM_MAGIC)) == KENLM_MAGIC


def has_package_header(path):
    with open(path, 'rb') as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _header_start(data) >= 0


def read_package(path):
    """PackageContents of the package at `path`; PackageFormatError if it has no header or dictionary."""
    with open(path, 'rb') as package:
        if not is_kenlm_binary(path):
            raise PackageFormatError('it does not start with a KenLM binary model')
        with mmap.mmap(package.fileno(), 0, access=mmap.ACCESS_READ) as data:
            start = _header_start(data)
            if start < 0:
                raise PackageFormatError('it has no vocabulary dictionary (a bare KenLM model, or a package cut short)')
            _, _, utf8_mode, alpha, beta = struct.unpack_from(HEADER_FORMAT, data, start)
            position = start + HEADER_SIZE + 4
            for _ in range(2):   # the fst type and arc type strings
                position += 4 + struct.unpack_from('<i', data, position)[0]
            _, _, _, first, n_states, n_arcs = struct.unpack_from(FST_HEADER_FORMAT, data, position)
            position += struct.calcsize(FST_HEADER_FORMAT)
            position += -position % FST_ALIGN
            end = position + n_states * STATE.itemsize
            end += -end % FST_ALIGN
            if end + n_arcs * ARC.itemsize > len(data):
                raise PackageFormatError('its dictionary is truncated')
            states = np.frombuffer(data, STATE, n_states, position).copy()
            arcs = np.frombuffer(data, ARC, n_arcs, end).copy()
    return PackageContents(bool(utf8_mode), alpha, beta, spellings(states, arcs, first))


def spellings(states, arcs, start):
    """Every accepted label sequence of the acyclic FST, breadth first over all paths at once (numpy:
    a 500,000-word dictionary is a few million path steps), minus 1 per label (alphabet labels)."""
    final = np.isfinite(states['final'])
    node_state = np.array([start], np.int64)          # the frontier: one node per path prefix
    parents, labels, word_nodes = [np.array([-1])], [np.array([0])], []
    offset = 0                                        # index of the frontier's first node
    while len(node_state):
        counts = states['arcs'][node_state].astype(np.int64)
        parent = np.repeat(np.arange(offset, offset + len(node_state)), counts)
        first = np.repeat(states['first_arc'][node_state].astype(np.int64), counts)
        within = np.arange(len(parent)) - np.repeat(np.cumsum(counts) - counts, counts)
        taken = arcs[first + within]
        offset += len(node_state)
        node_state = taken['next'].astype(np.int64)
        parents.append(parent)
        labels.append(taken['ilabel'] - 1)
        word_nodes.append(offset + np.flatnonzero(final[node_state]))
    parents, labels = np.concatenate(parents), np.concatenate(labels)
    words = []
    for node in np.concatenate(word_nodes).tolist():
        spelling = []
        while node > 0:
            spelling.append(int(labels[node]))
            node = parents[node]
        words.append(tuple(reversed(spelling)))
    return words
