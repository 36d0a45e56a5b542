"""Loading the KenLM scorer package for beam search, checked first in a child process.

ds_ctcdecoder aborts the whole process (an uncaught C++ exception) on a scorer whose KenLM part is
truncated or damaged, so the package is opened once in a throw-away child before this process
touches it: a bad file becomes a clear error at start, not a crash hours into a run.
"""
import os
import subprocess
import sys

from ds_ctcdecoder import Scorer

from .text import load_alphabet


class ScorerError(ValueError):
    pass


def _open(path, alpha, beta, alphabet):
    try:
        return Scorer(alpha, beta, path, alphabet)
    except ValueError as error:
        raise ScorerError('cannot load scorer {}: {} (expected a scorer package made by '
                          'bin/generate_scorer_package.py)'.format(path, error)) from None


def check_scorer(path, alphabet_path, bytes_output_mode):
    """Open the package in a child process; raise ScorerError if it crashes, fails or does not match."""
    training_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.run([sys.executable, '-m', 'deepspeech_training.util.scorer', path, alphabet_path,
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
    return _open(path, alpha, beta, load_alphabet(alphabet_path, bytes_output_mode))


def _child(path, alphabet_path, bytes_output_mode):
    try:
        scorer = _open(path, 1.0, 1.0, load_alphabet(alphabet_path, bytes_output_mode))
    except (ScorerError, ValueError) as error:
        print(error)
        sys.exit(1)
    print('order', scorer.get_max_order(), 'utf8', scorer.is_utf8_mode())


if __name__ == '__main__':
    _child(sys.argv[1], sys.argv[2], sys.argv[3] == '1')
