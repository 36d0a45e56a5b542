"""Make a DeepSpeech 0.9 scorer package (.scorer) from a KenLM binary LM and its vocabulary.

DeepSpeech 0.9's generate_scorer_package (C++), in Python. The package is the lm.binary followed by
what DeepSpeech's Scorer::save_dictionary appends: a header and the word dictionary, an OpenFST ConstFst
written aligned (lm/package_format.py). DeepSpeech 0.9's decoders and clients load it as is.

The dictionary is the minimal deterministic acceptor of the words' label sequences, the same automaton
the C++ tool gets from OpenFST's Determinize and Minimize. The written package is loaded back with this
project's scorer (scorer.py) before this tool reports success.

As in DeepSpeech 0.9, vocabulary words with characters outside the alphabet are left out of the
dictionary (the beam search then never produces them); unlike it, they are named in a warning.

Usage:
    python bin/generate_scorer_package.py --alphabet data/alphabet.txt --lm lm/lm.binary \\
        --vocab lm/vocab-500000.txt --package kenlm.scorer --default_alpha 0.93 --default_beta 1.18
"""
import argparse
import collections
import os
import shutil
import struct
import sys

from ..scorer import Scorer, ScorerError
from ..util.text import load_alphabet
from .package_format import (FST_ALIGN, FST_ALIGNED_VERSION, FST_FLAG_IS_ALIGNED, FST_MAGIC, HEADER_FORMAT,
                             SCORER_FILE_VERSION, SCORER_MAGIC, has_package_header, is_kenlm_binary)

# DeepSpeech 0.9.3's release scorer values (tuned with lm_optimizer.py for its English model).
DEFAULT_ALPHA = 0.931289039105002
DEFAULT_BETA = 1.1834137581510284

WEIGHT_ONE, WEIGHT_ZERO = 0.0, float('inf')  # tropical semiring
# Property bits (fst/properties.h) that hold for every dictionary built here.
K_EXPANDED = 0x1
K_ALWAYS = (K_EXPANDED
            | 0x0000000000010000   # kAcceptor
            | 0x0000000000040000   # kIDeterministic
            | 0x0000000000100000   # kODeterministic
            | 0x0000000000800000   # kNoEpsilons
            | 0x0000000002000000   # kNoIEpsilons
            | 0x0000000008000000   # kNoOEpsilons
            | 0x0000000010000000   # kILabelSorted
            | 0x0000000040000000   # kOLabelSorted
            | 0x0000000200000000   # kUnweighted
            | 0x0000000800000000   # kAcyclic
            | 0x0000002000000000   # kInitialAcyclic
            | 0x0000010000000000   # kAccessible
            | 0x0000040000000000   # kCoAccessible
            | 0x0000800000000000)  # kUnweightedCycles
K_TOP_SORTED, K_NOT_TOP_SORTED = 0x0000004000000000, 0x0000008000000000
K_STRING, K_NOT_STRING = 0x0000100000000000, 0x0000200000000000

SPECIAL_TOKENS = (b'<s>', b'<unk>', b'</s>')  # never words of the dictionary (Scorer::fill_dictionary)


class PackageError(Exception):
    """A problem with the inputs; the message names the file and the fix."""


def parse_bool(text):
    """--force_bytes_output_mode takes a value like boost::program_options' bool does."""
    value = text.strip().lower()
    if value in ('1', 'true', 'yes', 'on'):
        return True
    if value in ('0', 'false', 'no', 'off'):
        return False
    raise argparse.ArgumentTypeError('expected true or false, got {!r}'.format(text))


def read_vocabulary(path):
    """The vocabulary's unique words, split on ASCII whitespace as the C++ tool's `fin >> word` does."""
    try:
        with open(path, 'rb') as vocab_file:
            raw_words = set(vocab_file.read().split())
    except OSError as error:
        raise PackageError('cannot read vocabulary file {}: {}'.format(path, error.strerror))
    words = set()
    for raw in raw_words:
        try:
            words.add(raw.decode('utf-8'))
        except UnicodeDecodeError:
            raise PackageError('vocabulary file {} is not UTF-8 (word {!r}); re-encode it as UTF-8'
                               .format(path, raw))
    if not words:
        raise PackageError('vocabulary file {} has no words; make one with data/lm/generate_lm.py'.format(path))
    return words


def make_alphabet(alphabet_path, bytes_output_mode):
    """The decoder's alphabet: UTF8Alphabet in bytes output mode (as DeepSpeech), else the file's."""
    if bytes_output_mode:
        return load_alphabet(None, bytes_output_mode=True)
    if alphabet_path is None:
        raise PackageError('no --alphabet given and not in bytes output mode: pass --alphabet '
                           'data/alphabet.txt (the one the acoustic model was trained with)')
    if not os.path.isfile(alphabet_path):
        raise PackageError('alphabet file {} does not exist'.format(alphabet_path))
    try:
        return load_alphabet(alphabet_path)
    except ValueError as error:
        raise PackageError(str(error))


def word_labels(alphabet, words, bytes_output_mode):
    """Each word as the dictionary's label sequence, and the words the alphabet cannot spell.

    Like Scorer::fill_dictionary: the dictionary label of alphabet label i is i + 1 (0 is epsilon);
    a word is split into UTF-8 bytes in bytes output mode, else into code points followed by the
    space, which ends every word."""
    char_map = {alphabet.label_bytes(label): i + 1 for i, label in enumerate(alphabet.labels)}
    space = alphabet.GetSpaceLabel() + 1
    sequences, unspellable = [], []
    for word in sorted(words):
        encoded = word.encode('utf-8')
        if encoded in SPECIAL_TOKENS:
            continue
        units = ([bytes([b]) for b in encoded] if bytes_output_mode
                 else [char.encode('utf-8') for char in word])
        if all(unit in char_map for unit in units):
            sequences.append([char_map[unit] for unit in units] + ([] if bytes_output_mode else [space]))
        else:
            unspellable.append(word)
    return sequences, unspellable


def minimal_acceptor(sequences):
    """The minimal deterministic acyclic automaton accepting exactly `sequences` (Daciuk et al.'s
    incremental construction over sorted input, so memory stays near the size of the result).

    Returns (finals, arcs): per state, whether it is final and its {label: next state}, numbered
    in topological order from the start state 0."""
    finals, arcs = [False], [{}]
    register = {}      # (final, sorted arcs) -> the one state with that right language
    unchecked = []     # (parent, label, child) along the last inserted sequence, not yet merged

    def merge_down_to(depth):
        while len(unchecked) > depth:
            parent, label, child = unchecked.pop()
            key = (finals[child], tuple(sorted(arcs[child].items())))
            if key in register:
                arcs[parent][label] = register[key]
                arcs[child] = None  # unreachable from now on; dropped when renumbering
            else:
                register[key] = child

    previous = ()
    for sequence in sorted(set(map(tuple, sequences))):
        common = 0
        while common < min(len(sequence), len(previous)) and sequence[common] == previous[common]:
            common += 1
        merge_down_to(common)
        state = unchecked[-1][2] if unchecked else 0
        for label in sequence[common:]:
            finals.append(False)
            arcs.append({})
            arcs[state][label] = len(arcs) - 1
            unchecked.append((state, label, len(arcs) - 1))
            state = len(arcs) - 1
        finals[state] = True
        previous = sequence
    merge_down_to(0)
    return renumber_topologically(finals, arcs)


def renumber_topologically(finals, arcs):
    """Keep the states reachable from state 0, renumbered so every arc goes forward (Kahn's
    algorithm), which makes the FST top-sorted as OpenFST computes it."""
    indegree = {0: 0}
    stack = [0]
    while stack:
        for target in arcs[stack.pop()].values():
            if target not in indegree:
                indegree[target] = 0
                stack.append(target)
            indegree[target] += 1
    order, queue = [], collections.deque([0])
    while queue:
        state = queue.popleft()
        order.append(state)
        for _, target in sorted(arcs[state].items()):
            indegree[target] -= 1
            if indegree[target] == 0:
                queue.append(target)
    new_id = {old: new for new, old in enumerate(order)}
    return ([finals[old] for old in order],
            [{label: new_id[target] for label, target in arcs[old].items()} for old in order])


def fst_properties(finals, arcs):
    """The property bits OpenFST's ComputeProperties finds for this dictionary (it stores them in
    the header), so a reader that trusts them gets the truth."""
    top_sorted = all(t > s for s, state_arcs in enumerate(arcs) for t in state_arcs.values())
    # A string FST: state 0 starts, each non-final state has one arc to the next, the last is final.
    string = all(len(state_arcs) == 1 and list(state_arcs.values())[0] == s + 1
                 for s, state_arcs in enumerate(arcs[:-1])) and finals[-1] and not any(finals[:-1])
    return (K_ALWAYS | (K_TOP_SORTED if top_sorted else K_NOT_TOP_SORTED)
            | (K_STRING if string else K_NOT_STRING))


def serialize_fst(finals, arcs, offset, properties=None):
    """The dictionary as OpenFST's ConstFst::WriteFst writes it with align=true, starting at
    absolute file position `offset` (alignment is to file positions, as the reader checks)."""
    if properties is None:
        properties = fst_properties(finals, arcs)

    def string(text):
        return struct.pack('<i', len(text)) + text

    num_arcs = sum(len(state_arcs) for state_arcs in arcs)
    out = bytearray(struct.pack('<i', FST_MAGIC) + string(b'const') + string(b'standard')
                    + struct.pack('<iiQqqq', FST_ALIGNED_VERSION, FST_FLAG_IS_ALIGNED, properties,
                                  0, len(arcs), num_arcs))

    def align():
        out.extend(b'\0' * (-(offset + len(out)) % FST_ALIGN))

    align()
    position = 0
    for final, state_arcs in zip(finals, arcs):
        # ConstState: final weight, first arc, arcs, input epsilons, output epsilons.
        out += struct.pack('<fIIII', WEIGHT_ONE if final else WEIGHT_ZERO, position, len(state_arcs), 0, 0)
        position += len(state_arcs)
    align()
    for state_arcs in arcs:
        for label, target in sorted(state_arcs.items()):
            out += struct.pack('<iifi', label, label, WEIGHT_ONE, target)  # StdArc: in, out, weight, next
    return bytes(out)


def scorer_header(bytes_output_mode, alpha, beta):
    """Scorer::save_dictionary's header. The C++ tool reads alpha and beta as floats before storing
    them as doubles, so they are rounded through float32 to write the very same bytes."""
    as_float = lambda value: struct.unpack('<f', struct.pack('<f', value))[0]
    return struct.pack(HEADER_FORMAT, SCORER_MAGIC, SCORER_FILE_VERSION, bytes_output_mode,
                       as_float(alpha), as_float(beta))


def check_lm(lm_path):
    """The LM must be a KenLM binary, not already a package. (DeepSpeech's tool also refused a binary
    with other data after the model, which its loader found from KenLM's internal offsets.)"""
    try:
        if not is_kenlm_binary(lm_path):
            raise PackageError('LM file {} is not a KenLM binary LM (make one with data/lm/generate_lm.py)'
                               .format(lm_path))
        if has_package_header(lm_path):
            raise PackageError('LM file {} is already a scorer package (pass the lm.binary it was made from)'
                               .format(lm_path))
    except OSError as error:
        raise PackageError('LM file {} cannot be read (check the path): {}'.format(lm_path, error.strerror))


def verify_package(package_path, alphabet, bytes_output_mode, words):
    """Load the package as the decoder does, so a bad package fails here and not at decoding time."""
    try:
        scorer = Scorer(package_path, None, None, alphabet)
    except ScorerError as error:
        raise PackageError('the written package does not load back: {}; please report this with the inputs '
                           'used'.format(error))
    if scorer.utf8_mode != bytes_output_mode or len(scorer.spellings) != words:
        raise PackageError('the written package {} loads back with {} words in {} mode instead of {}; please '
                           'report this with the inputs used'.format(package_path, len(scorer.spellings),
                                                                     'UTF-8' if scorer.utf8_mode else 'character',
                                                                     words))
    return scorer


def create_package(alphabet_path, lm_path, vocab_path, package_path, force_bytes_output_mode,
                   default_alpha, default_beta):
    """Write the package; returns the scorer.Scorer it loads as."""
    words = read_vocabulary(vocab_path)
    looks_char_based = all(len(word) <= 1 for word in words)
    log('{} unique words read from vocabulary file {}.'.format(len(words), vocab_path))
    log('{} like a character based (Bytes Are All You Need) model.'
        .format('Looks' if looks_char_based else "Doesn't look"))
    bytes_output_mode = force_bytes_output_mode
    if bytes_output_mode is None:
        bytes_output_mode = looks_char_based
        log('--force_bytes_output_mode was not specified, using value inferred from vocabulary '
            'contents: {}'.format(str(bytes_output_mode).lower()))
    alphabet = make_alphabet(alphabet_path, bytes_output_mode)
    check_lm(lm_path)

    sequences, unspellable = word_labels(alphabet, words, bytes_output_mode)
    if unspellable:
        log('WARNING: {} vocabulary words have characters outside the alphabet {} and are left out '
            'of the dictionary, e.g. {}'.format(len(unspellable), alphabet_path,
                                                 ' '.join(repr(w) for w in unspellable[:10])))
    if not sequences:
        raise PackageError('no word of {} can be spelt with the alphabet {}: check that they belong together'
                           .format(vocab_path, alphabet_path))
    finals, arcs = minimal_acceptor(sequences)

    header = scorer_header(bytes_output_mode, default_alpha, default_beta)
    dictionary = serialize_fst(finals, arcs, offset=os.path.getsize(lm_path) + len(header))
    try:
        with open(lm_path, 'rb') as lm_file, open(package_path, 'wb') as package_file:
            shutil.copyfileobj(lm_file, package_file)  # LMs can be gigabytes: never held in memory
            package_file.write(header + dictionary)
    except OSError as error:
        raise PackageError('cannot write package {}: {}'.format(package_path, error.strerror))
    scorer = verify_package(package_path, alphabet, bytes_output_mode, len(sequences))
    log('Package created in {} ({} words, {} dictionary states).'.format(package_path, len(sequences), len(arcs)))
    return scorer


def log(message):
    print(message, file=sys.stderr)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='Make a DeepSpeech 0.9 scorer package from a KenLM binary '
                                                 'LM and its vocabulary (see doc/LM.rst).')
    parser.add_argument('--alphabet', help='Path of alphabet file to use for vocabulary construction. Words '
                        'with characters not in the alphabet will not be included in the vocabulary. '
                        'Optional if using bytes output mode.')
    parser.add_argument('--lm', required=True, help='Path of KenLM binary LM file. Must be built without '
                        'including the vocabulary (build_binary -v). See data/lm/generate_lm.py.')
    parser.add_argument('--vocab', required=True, help='Path of vocabulary file. Must contain words '
                        'separated by whitespace.')
    parser.add_argument('--package', required=True, help='Path to save scorer package.')
    parser.add_argument('--default_alpha', type=float, default=DEFAULT_ALPHA,
                        help='Default value of alpha hyperparameter, the LM weight (default: %(default)s, '
                             "DeepSpeech 0.9.3's English scorer).")
    parser.add_argument('--default_beta', type=float, default=DEFAULT_BETA,
                        help='Default value of beta hyperparameter, the word insertion bonus '
                             "(default: %(default)s, DeepSpeech 0.9.3's English scorer).")
    parser.add_argument('--force_bytes_output_mode', type=parse_bool, default=None,
                        help='true or false: force set or unset bytes output mode in the scorer package. '
                             'If not set, infers from the vocabulary (true when every word is one character).')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        create_package(args.alphabet, args.lm, args.vocab, args.package, args.force_bytes_output_mode,
                       args.default_alpha, args.default_beta)
    except PackageError as error:
        log('ERROR: {}'.format(error))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
