"""Language-model tooling end to end: a corpus made here -> data/lm/generate_lm.py -> lm.binary and
vocabulary -> bin/generate_scorer_package.py -> a .scorer that ds_ctcdecoder loads and beam-searches
with. Also pins how ds_ctcdecoder treats broken scorer files, which --scorer_path validation relies on.

The scripts run as subprocesses, as a user runs them. Tests that need KenLM's tools skip when
bin/build_kenlm.sh has not built them into this environment."""
import os
import random
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest
from ds_ctcdecoder import Scorer, UTF8Alphabet, ctc_beam_search_decoder

from conftest import ALPHABET, ROOT

GENERATE_LM = os.path.join(ROOT, 'data', 'lm', 'generate_lm.py')
GENERATE_PACKAGE = os.path.join(ROOT, 'bin', 'generate_scorer_package.py')
KENLM_BIN = os.path.join(sys.prefix, 'kenlm', 'bin')
CORPUS_WORDS = ('the cat sat on a mat dog ran to big red house hello world good morning '
                'my friend saw fish in river').split()
ALPHA, BETA = 0.75, 1.85

needs_kenlm = pytest.mark.skipif(
    not all(os.access(os.path.join(KENLM_BIN, t), os.X_OK) for t in ('lmplz', 'filter', 'build_binary')),
    reason='KenLM tools not built in {}: run bin/build_kenlm.sh'.format(KENLM_BIN))


def run(*command, check=True):
    """Run a script with this interpreter; output (stdout and stderr) goes in .output."""
    process = subprocess.run([sys.executable] + [str(c) for c in command], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
    process.output = process.stdout
    if check and process.returncode != 0:
        raise AssertionError('{} failed ({}):\n{}'.format(command[0], process.returncode, process.output))
    return process


def make_package(lm_files, tmp_path, vocab_words, *extra):
    """A scorer package of the test LM with the given vocabulary; the process and the package path."""
    vocab = tmp_path / 'vocab.txt'
    vocab.write_text('\n'.join(vocab_words) + '\n', encoding='utf-8')
    package = tmp_path / 'test.scorer'
    process = run(GENERATE_PACKAGE, '--alphabet', ALPHABET, '--lm', lm_files['lm'], '--vocab', vocab,
                  '--package', package, *extra, check=False)
    return process, package


@pytest.fixture(scope='module')
def lm_files(tmp_path_factory):
    """lm.binary, vocab-500.txt and kenlm.scorer built from 200 generated sentences."""
    out = tmp_path_factory.mktemp('lm')
    rng = random.Random(1)
    corpus = out / 'corpus.txt'
    corpus.write_text(''.join(' '.join(rng.choice(CORPUS_WORDS) for _ in range(rng.randint(3, 8))).capitalize()
                              + '\n' for _ in range(200)), encoding='utf-8')
    # Small generated corpora have no singletons, so Kneser-Ney needs --discount_fallback.
    run(GENERATE_LM, '--input_txt', corpus, '--output_dir', out, '--top_k', 500, '--arpa_order', 3,
        '--max_arpa_memory', '64M', '--discount_fallback')
    files = {'lm': out / 'lm.binary', 'vocab': out / 'vocab-500.txt', 'scorer': out / 'kenlm.scorer'}
    run(GENERATE_PACKAGE, '--alphabet', ALPHABET, '--lm', files['lm'], '--vocab', files['vocab'],
        '--package', files['scorer'], '--default_alpha', ALPHA, '--default_beta', BETA)
    return files


def frames(alphabet, spec):
    """CTC probabilities from per-frame {character: probability} (None is the blank), the rest of
    each frame spread thinly over the other labels."""
    blank = alphabet.GetSize()
    rows = []
    for frame in spec:
        row = np.full(blank + 1, 1e-3)
        for char, p in frame.items():
            row[blank if char is None else alphabet.EncodeSingle(char)] = p
        rows.append(row / row.sum())
    return np.array(rows).tolist()


def decode(alphabet, probs, scorer=None):
    return ctc_beam_search_decoder(probs, alphabet, 32, scorer=scorer)[0][1]


def load_in_subprocess(path, alphabet_path=ALPHABET):
    """Load a scorer in a fresh process: some broken files abort the process instead of raising."""
    program = ('import sys, ds_ctcdecoder as d\n'
               'try:\n'
               '    d.Scorer(1.0, 1.0, sys.argv[1], d.Alphabet(sys.argv[2]))\n'
               '    print("loaded")\n'
               'except ValueError as error:\n'
               '    print("ValueError:", error)\n')
    return subprocess.run([sys.executable, '-c', program, str(path), alphabet_path], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=60)


@needs_kenlm
def test_generate_lm_writes_binary_and_vocabulary(lm_files):
    assert lm_files['lm'].stat().st_size > 0
    # Lower-cased, every corpus word (fewer than --top_k of them), most frequent first.
    assert set(lm_files['vocab'].read_text(encoding='utf-8').split()) == set(CORPUS_WORDS)
    assert lm_files['scorer'].stat().st_size > lm_files['lm'].stat().st_size


@needs_kenlm
def test_scorer_loads_with_its_defaults(lm_files, alphabet):
    scorer = Scorer()
    assert scorer.init(str(lm_files['scorer']).encode('utf-8'), alphabet) == 0
    # alpha and beta are stored as float32 values, as DeepSpeech's C++ tool stores them.
    assert scorer.alpha == pytest.approx(ALPHA, abs=1e-6) and scorer.beta == pytest.approx(BETA, abs=1e-6)
    assert scorer.get_max_order() == 3 and not scorer.is_utf8_mode()
    # The constructor's alpha and beta override the package's.
    assert Scorer(0.5, 2.0, str(lm_files['scorer']), alphabet).alpha == pytest.approx(0.5)


@needs_kenlm
def test_beam_search_prefers_a_vocabulary_word(lm_files, alphabet):
    # 'kat' is acoustically more likely than 'cat', but only 'cat' is a word of the LM.
    probs = frames(alphabet, [{'t': .9}, {'h': .9}, {'e': .9}, {' ': .9}, {'k': .5, 'c': .4}, {None: .9},
                              {'a': .9}, {None: .9}, {'t': .9}, {None: .9}])
    assert decode(alphabet, probs) == 'the kat'
    scorer = Scorer(ALPHA, BETA, str(lm_files['scorer']), alphabet)
    assert decode(alphabet, probs, scorer) == 'the cat'


@needs_kenlm
def test_dictionary_is_byte_for_byte_what_openfst_writes(lm_files, alphabet, tmp_path):
    """Write the dictionary with its property bits unknown, let ds_ctcdecoder load it and OpenFST
    rewrite it (save_dictionary computes every property afresh): the result must be our package."""
    from deepspeech_training.lm import generate_scorer_package as tool
    sequences, _ = tool.word_labels(alphabet, tool.read_vocabulary(str(lm_files['vocab'])), False)
    finals, arcs = tool.minimal_acceptor(sequences)
    lm = lm_files['lm'].read_bytes()
    head = lm + tool.scorer_header(False, ALPHA, BETA)
    unknown = tmp_path / 'unknown.scorer'
    unknown.write_bytes(head + tool.serialize_fst(finals, arcs, len(head), properties=tool.K_EXPANDED))
    scorer = Scorer()
    assert scorer.init(str(unknown).encode('utf-8'), alphabet) == 0
    rewritten = tmp_path / 'rewritten.scorer'
    shutil.copy(lm_files['lm'], rewritten)
    assert scorer.save_dictionary(str(rewritten).encode('utf-8'), True)
    assert rewritten.read_bytes() == lm_files['scorer'].read_bytes()


@needs_kenlm
def test_words_outside_the_alphabet_are_left_out_with_a_warning(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, ['cat', 'héllo', 'dog'])
    assert process.returncode == 0, process.output
    assert "WARNING: 1 vocabulary words have characters outside the alphabet" in process.output
    assert "'héllo'" in process.output
    assert load_in_subprocess(package).stdout.strip() == 'loaded'


@needs_kenlm
def test_a_vocabulary_the_alphabet_cannot_spell_is_an_error(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, ['héllo', 'wörld'])
    assert process.returncode == 1
    assert 'can be spelt with the alphabet' in process.output and not package.exists()


@needs_kenlm
def test_bytes_output_mode_package(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, CORPUS_WORDS, '--force_bytes_output_mode', 'true')
    assert process.returncode == 0, process.output
    scorer = Scorer()
    assert scorer.init(str(package).encode('utf-8'), UTF8Alphabet()) == 0 and scorer.is_utf8_mode()


@needs_kenlm
def test_package_needs_a_kenlm_binary(lm_files, tmp_path):
    vocab = lm_files['vocab']
    for lm, message in ((vocab, 'is not a KenLM binary LM'), (lm_files['scorer'], 'is already a scorer package')):
        process = run(GENERATE_PACKAGE, '--alphabet', ALPHABET, '--lm', lm, '--vocab', vocab,
                      '--package', tmp_path / 'x.scorer', check=False)
        assert process.returncode == 1 and message in process.output, process.output


def test_generate_lm_without_kenlm_says_how_to_build_it(tmp_path):
    corpus = tmp_path / 'corpus.txt'
    corpus.write_text('hello world\n')
    process = run(GENERATE_LM, '--input_txt', corpus, '--output_dir', tmp_path, '--kenlm_bins', tmp_path,
                  check=False)
    assert process.returncode == 2 and 'run bin/build_kenlm.sh' in process.output


def test_corrupt_scorer_raises_instead_of_crashing(tmp_path):
    corrupt = tmp_path / 'corrupt.scorer'
    corrupt.write_bytes(np.random.RandomState(0).bytes(4096))
    process = load_in_subprocess(corrupt)
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == 'ValueError: Scorer initialization failed with error code 0x2006'


@needs_kenlm
def test_truncated_scorer_aborts_the_process(lm_files, tmp_path):
    """KenLM throws a C++ exception that ds_ctcdecoder does not catch, so the process aborts: a
    scorer must be validated in a subprocess before loading it in the training process."""
    truncated = tmp_path / 'truncated.scorer'
    truncated.write_bytes(lm_files['scorer'].read_bytes()[:lm_files['lm'].stat().st_size // 2])
    process = load_in_subprocess(truncated)
    assert process.returncode == -signal.SIGABRT, (process.stdout, process.stderr)
