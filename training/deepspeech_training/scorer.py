"""Loading a DeepSpeech 0.9 KenLM scorer package for beam search, checked first in a child process.

The package (lm/package_format.py) gives flashlight-text's decoder its two parts: the KenLM model, which
flashlight's KenLM opens from the package file as it is (KenLM stops reading where its model ends), and
the vocabulary, whose spellings become the lexicon trie that keeps the beam inside it, as DeepSpeech's
dictionary FST did. KenLM may crash the process (not raise) on a truncated or damaged model, so the
package is opened once in a throw-away child before this process touches it: a bad file becomes a clear
error at start, not a crash hours into a run.
"""
import os
import subprocess
import sys

from flashlight.lib.text.decoder import Trie
from flashlight.lib.text.decoder.kenlm import KenLM
from flashlight.lib.text.dictionary import Dictionary

from .lm.package_format import PackageFormatError, read_package
from .util.alphabet import UTF8Alphabet
from .util.text import load_alphabet


class ScorerError(ValueError):
    pass


class Scorer:
    """A package loaded for decoding: `lm` (flashlight's KenLM over the package's words), `trie` (their
    spellings in alphabet labels, each ending in the word's index), `alpha` (weight of the natural-log
    LM probability, as DeepSpeech's) and `beta` (bonus per word)."""

    def __init__(self, path, alpha, beta, alphabet, alphabet_path='the alphabet'):
        self.alphabet, self.alphabet_path = alphabet, alphabet_path
        try:
            contents = read_package(path)
        except (OSError, PackageFormatError) as error:
            raise ScorerError('cannot load scorer {}: {} (expected a scorer package made by '
                              'bin/generate_scorer_package.py)'.format(path, error)) from None
        self.path, self.utf8_mode = path, contents.utf8_mode
        if self.utf8_mode != isinstance(alphabet, UTF8Alphabet):
            raise ScorerError('scorer {} was made for {} but this model predicts {} (see --bytes_output_mode and '
                              'generate_scorer_package.py --force_bytes_output_mode)'.format(
                                  path, *(('UTF-8 bytes', 'alphabet labels') if self.utf8_mode else
                                          ('alphabet labels', 'UTF-8 bytes'))))
        if not self.utf8_mode:
            check_spellings(path, contents.spellings, alphabet, alphabet_path)
        self.default_alpha, self.default_beta = contents.alpha, contents.beta
        self.alpha = contents.alpha if alpha is None else alpha
        self.beta = contents.beta if beta is None else beta
        self.words = Dictionary()
        self.trie = Trie(alphabet.GetSize() + 1, alphabet.GetSpaceLabel())
        for index, spelling in enumerate(contents.spellings):
            self.words.add_entry(word_text(alphabet, spelling, contents.utf8_mode), index)
            self.trie.insert(list(spelling), index, 0.0)
            if self.utf8_mode:
                # Words (code points) follow each other without a separator, and flashlight's decoder returns to
                # the trie's root when a word ends, from where the CTC repeat of its last byte is impossible;
                # a second spelling with that byte doubled ends the word on the repeat instead.
                self.trie.insert(list(spelling) + [spelling[-1]], index, 0.0)
        self.spellings = contents.spellings
        try:
            self.lm = KenLM(path, self.words)
        except RuntimeError as error:     # KenLM's exceptions; their text runs over several lines
            raise ScorerError('cannot load scorer {}: its KenLM model is damaged or not a KenLM binary ({}); '
                              'rebuild it with data/lm/generate_lm.py and bin/generate_scorer_package.py'
                              .format(path, ' '.join(str(error).split()))) from None


    def __reduce__(self):
        """Loaded again from its file where it is unpickled (a decoding worker)."""
        return Scorer, (self.path, self.alpha, self.beta, self.alphabet, self.alphabet_path)


def word_text(alphabet, spelling, utf8_mode):
    """The word KenLM knows for a spelling: its characters, without the space that ends it."""
    return alphabet.Decode(spelling if utf8_mode else spelling[:-1])


def check_spellings(path, spellings, alphabet, alphabet_path):
    """A package made with another alphabet spells words with labels this one lacks, or ends them
    with another label than this alphabet's space."""
    if not spellings:
        return
    labels = {label for spelling in spellings for label in spelling}
    word_ends = {spelling[-1] for spelling in spellings}
    space = alphabet.GetSpaceLabel()
    if max(labels) >= alphabet.GetSize() or word_ends - {space}:
        raise ScorerError('scorer {} was made with another alphabet: its words use labels up to {} and end with '
                          'label(s) {}, but {} has {} labels with the space at {} (rebuild the scorer with '
                          'bin/generate_scorer_package.py --alphabet {})'.format(
                              path, max(labels), sorted(word_ends), alphabet_path,
                              alphabet.GetSize(), space, alphabet_path))


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
        raise ScorerError((child.stdout.strip().splitlines() or ['scorer {} failed to load'.format(path)])[-1])


def load_scorer(path, alpha, beta, alphabet_path, bytes_output_mode):
    """The Scorer of the package at `path` (alpha/beta None: the package's defaults), checked."""
    check_scorer(path, alphabet_path, bytes_output_mode)
    return Scorer(path, alpha, beta, load_alphabet(alphabet_path, bytes_output_mode), alphabet_path)


def _child(path, alphabet_path, bytes_output_mode):
    try:
        scorer = Scorer(path, None, None, load_alphabet(alphabet_path, bytes_output_mode), alphabet_path)
        state = scorer.lm.start(False)
        for index in range(min(3, len(scorer.spellings))):    # reads the model's n-gram tables
            state, _ = scorer.lm.score(state, index)
    except ValueError as error:
        print(error)
        sys.exit(1)
    print('words', len(scorer.spellings), 'utf8', scorer.utf8_mode)


if __name__ == '__main__':
    _child(sys.argv[1], sys.argv[2], sys.argv[3] == '1')
