"""Language-model tooling end to end: a corpus made here -> data/lm/generate_lm.py -> lm.binary and
vocabulary -> bin/generate_scorer_package.py -> a .scorer that our decoder (scorer.py, beam_search.py)
and DeepSpeech 0.9.3's own (ds_ctcdecoder, in its Python 3.9 environment beside the released clients)
load and beam-search with, to the same transcripts. Also how broken scorer files are reported.

The scripts run as subprocesses, as a user runs them. Tests that need KenLM's tools skip when
bin/build_kenlm.sh has not built them into this environment; those that need DeepSpeech's decoder skip
saying what is missing when bin/setup.sh --clients found no Python 3.9."""
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.suite import ALPHABET, ROOT, ds_ctcdecoder_output
from deepspeech_training.beam_search import BeamSearch
from deepspeech_training.scorer import Scorer, ScorerError, check_scorer
from deepspeech_training.util.alphabet import UTF8Alphabet

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
    each frame spread thinly over the other labels, each a little differently: beam search breaks exact
    ties by where its hypotheses lie in memory."""
    blank = alphabet.GetSize()
    rows = []
    for frame in spec:
        row = 1e-3 * (1 + np.random.RandomState(len(rows)).uniform(0, 0.1, blank + 1))
        for char, p in frame.items():
            row[blank if char is None else alphabet.EncodeSingle(char)] = p
        rows.append(row / row.sum())
    return np.array(rows).tolist()


def decode(alphabet, probs, scorer=None, beam_width=32):
    return BeamSearch(alphabet, beam_width, scorer=scorer).decode(np.array(probs))


def check(path, alphabet_path=ALPHABET, bytes_output_mode=False):
    """check_scorer's verdict on a file: 'ok' or its error message."""
    try:
        check_scorer(str(path), alphabet_path, bytes_output_mode)
        return 'ok'
    except ScorerError as error:
        return str(error)


@needs_kenlm
def test_generate_lm_writes_binary_and_vocabulary(lm_files):
    assert lm_files['lm'].stat().st_size > 0
    # Lower-cased, every corpus word (fewer than --top_k of them), most frequent first.
    assert set(lm_files['vocab'].read_text(encoding='utf-8').split()) == set(CORPUS_WORDS)
    assert lm_files['scorer'].stat().st_size > lm_files['lm'].stat().st_size


@needs_kenlm
def test_scorer_loads_with_its_defaults(lm_files, alphabet):
    scorer = Scorer(str(lm_files['scorer']), None, None, alphabet)
    # alpha and beta are stored as float32 values, as DeepSpeech's C++ tool stores them.
    assert scorer.alpha == pytest.approx(ALPHA, abs=1e-6) and scorer.beta == pytest.approx(BETA, abs=1e-6)
    assert not scorer.utf8_mode
    assert sorted(alphabet.Decode(s[:-1]) for s in scorer.spellings) == sorted(set(CORPUS_WORDS))
    # Given alpha and beta override the package's.
    assert Scorer(str(lm_files['scorer']), 0.5, 2.0, alphabet).alpha == 0.5


@needs_kenlm
def test_beam_search_prefers_a_vocabulary_word(lm_files, alphabet):
    # 'kat' is acoustically more likely than 'cat', but only 'cat' is a word of the LM.
    probs = frames(alphabet, [{'t': .9}, {'h': .9}, {'e': .9}, {' ': .9}, {'k': .5, 'c': .4}, {None: .9},
                              {'a': .9}, {None: .9}, {'t': .9}, {None: .9}])
    assert decode(alphabet, probs) == 'the kat'
    assert decode(alphabet, probs, Scorer(str(lm_files['scorer']), ALPHA, BETA, alphabet)) == 'the cat'


@needs_kenlm
def test_package_gives_deepspeechs_own_transcripts(lm_files, alphabet, tmp_path):
    """DeepSpeech 0.9.3's decoder loads the package with its defaults and, on noisy CTC outputs of the
    corpus' sentences, beam-searches to the very transcripts ours does, with the scorer and without."""
    rng, words = np.random.default_rng(0), random.Random(0)
    utterances = []
    for _ in range(40):
        rows = []
        for label in alphabet.Encode(' '.join(words.choice(CORPUS_WORDS) for _ in range(words.randint(2, 6)))):
            for _ in range(words.randint(1, 3)):   # the label, then blanks, over noise
                rows.append(rng.gamma(0.3, size=alphabet.GetSize() + 1))
                rows[-1][label] += rng.uniform(0.5, 4) * rows[-1].sum()
            for _ in range(words.randint(0, 2)):
                rows.append(rng.gamma(0.3, size=alphabet.GetSize() + 1))
                rows[-1][-1] += rng.uniform(1, 5) * rows[-1].sum()
        utterances.append(np.array([row / row.sum() for row in rows]))
    np.savez(tmp_path / 'probs.npz', *utterances)
    output = ds_ctcdecoder_output(
        'import numpy as np\n'
        'a = d.Alphabet(sys.argv[2]); s = d.Scorer(); assert s.init(sys.argv[3].encode(), a) == 0\n'
        'print(round(s.alpha, 4), round(s.beta, 4), s.get_max_order(), s.is_utf8_mode())\n'
        'probs = np.load(sys.argv[1])\n'
        'for scorer in (s, None):\n'
        '    for i in range(len(probs.files)):\n'
        '        print(d.ctc_beam_search_decoder(probs["arr_%d" % i].tolist(), a, 100, scorer=scorer)[0][1])\n',
        tmp_path / 'probs.npz', ALPHABET, lm_files['scorer']).splitlines()
    assert output[0] == '{} {} 3 False'.format(round(ALPHA, 4), round(BETA, 4))
    scorer = Scorer(str(lm_files['scorer']), ALPHA, BETA, alphabet)
    ours = [decode(alphabet, probs, scorer, 100) for probs in utterances]
    ours += [decode(alphabet, probs, None, 100) for probs in utterances]
    assert output[1:] == ours
    assert ours[:40] != ours[40:]     # the scorer made a difference


@needs_kenlm
def test_dictionary_is_byte_for_byte_what_openfst_writes(lm_files, alphabet, tmp_path):
    """Write the dictionary with its property bits unknown, let DeepSpeech's decoder load it and OpenFST
    rewrite it (save_dictionary computes every property afresh): the result must be our package."""
    from deepspeech_training.lm import generate_scorer_package as tool
    sequences, _ = tool.word_labels(alphabet, tool.read_vocabulary(str(lm_files['vocab'])), False)
    finals, arcs = tool.minimal_acceptor(sequences)
    lm = lm_files['lm'].read_bytes()
    head = lm + tool.scorer_header(False, ALPHA, BETA)
    unknown = tmp_path / 'unknown.scorer'
    unknown.write_bytes(head + tool.serialize_fst(finals, arcs, len(head), properties=tool.K_EXPANDED))
    rewritten = tmp_path / 'rewritten.scorer'
    shutil.copy(lm_files['lm'], rewritten)
    ds_ctcdecoder_output('s = d.Scorer(); assert s.init(sys.argv[1].encode(), d.Alphabet(sys.argv[2])) == 0\n'
                         'assert s.save_dictionary(sys.argv[3].encode(), True)\n', unknown, ALPHABET, rewritten)
    assert rewritten.read_bytes() == lm_files['scorer'].read_bytes()


@needs_kenlm
def test_words_outside_the_alphabet_are_left_out_with_a_warning(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, ['cat', 'héllo', 'dog'])
    assert process.returncode == 0, process.output
    assert "WARNING: 1 vocabulary words have characters outside the alphabet" in process.output
    assert "'héllo'" in process.output
    assert check(package) == 'ok'


@needs_kenlm
def test_a_vocabulary_the_alphabet_cannot_spell_is_an_error(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, ['héllo', 'wörld'])
    assert process.returncode == 1
    assert 'can be spelt with the alphabet' in process.output and not package.exists()


@needs_kenlm
def test_bytes_output_mode_package(lm_files, tmp_path):
    process, package = make_package(lm_files, tmp_path, CORPUS_WORDS, '--force_bytes_output_mode', 'true')
    assert process.returncode == 0, process.output
    scorer = Scorer(str(package), None, None, UTF8Alphabet())
    assert scorer.utf8_mode and check(package, bytes_output_mode=True) == 'ok'
    assert sorted(bytes(label + 1 for label in spelling).decode() for spelling in scorer.spellings) == \
        sorted(set(CORPUS_WORDS))
    assert 'was made for UTF-8 bytes but this model predicts alphabet labels' in check(package)


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


def test_random_bytes_are_no_scorer(tmp_path):
    corrupt = tmp_path / 'corrupt.scorer'
    corrupt.write_bytes(np.random.RandomState(0).bytes(4096))
    assert check(corrupt) == ('cannot load scorer {}: it does not start with a KenLM binary model (expected a scorer '
                              'package made by bin/generate_scorer_package.py)'.format(corrupt))


@needs_kenlm
def test_damaged_or_cut_scorers_are_named_not_a_crash(lm_files, tmp_path):
    """KenLM raises (or could crash) on a damaged model: the package is tried in a child process first."""
    package = lm_files['scorer'].read_bytes()
    truncated = tmp_path / 'truncated.scorer'
    truncated.write_bytes(package[:lm_files['lm'].stat().st_size // 2])
    assert 'it has no vocabulary dictionary (a bare KenLM model, or a package cut short)' in check(truncated)
    damaged = tmp_path / 'damaged.scorer'
    damaged.write_bytes(package[:200] + np.random.RandomState(0).bytes(1000) + package[1200:])
    assert 'cannot load scorer {}: its KenLM model is damaged'.format(damaged) in check(damaged)
    assert check(lm_files['scorer']) == 'ok'


@needs_kenlm
def test_worker_processes_decode_as_this_one(lm_files, alphabet, monkeypatch):
    """A test set's beam search moves to a process per core when batches take long: the same transcripts,
    and the alpha and beta lm_optimizer sets between trials reach the workers."""
    from types import SimpleNamespace
    from deepspeech_training import decoding
    monkeypatch.setattr(decoding, 'POOL_AFTER_SECONDS', 0)
    monkeypatch.setattr(decoding, 'PROCESSES', 2)
    settings = SimpleNamespace(beam_width=32, cutoff_prob=1.0, cutoff_top_n=40)
    decoder = decoding.Decoder(alphabet, settings, Scorer(str(lm_files['scorer']), ALPHA, BETA, alphabet))
    probs = np.array([frames(alphabet, [{'t': .9}, {'h': .9}, {'e': .9}, {' ': .9}, {'k': .5, 'c': .4}, {None: .9},
                                        {'a': .9}, {None: .9}, {'t': .9}, {None: .9}])] * 3)
    lengths = [10, 10, 9]
    try:
        assert decoder.decode(probs, lengths) == ['the cat'] * 3 and decoder.pool is not None   # this process
        assert decoder.decode(probs, lengths) == ['the cat'] * 3     # the workers
        decoder.set_lm_weights(0.0, -30.0)     # a word costs more than the acoustics of 'the cat'
        expected = [decoder.beam_search.decode(p[:n]) for p, n in zip(probs, lengths)]
        assert decoder.decode(probs, lengths) == expected != ['the cat'] * 3
    finally:
        decoder.pool.close()
