"""Beam search with a real KenLM scorer built from the training transcripts of a generated corpus."""
import json
import os
import re
import sys

import pytest

from tests.helpers.suite import (ALPHABET, CSV_HEADER, ROOT, SMOKE_CSV, make_corpus, make_scorer, run_command,
                                 run_deepspeech, tiny_model_flags)

pytestmark = pytest.mark.slow
N_HIDDEN = 128


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A corpus, a scorer from its train transcripts (plus its word list), and an acoustic model
    trained just long enough to make errors a language model can fix."""
    tmp_path = tmp_path_factory.mktemp('decoding')
    corpus, lm = tmp_path / 'corpus', tmp_path / 'lm'
    lm.mkdir()
    make_corpus(corpus, 150, 5)
    (lm / 'text.txt').write_text((corpus / 'train_sentences.txt').read_text() +
                                 (corpus / 'vocabulary.txt').read_text())
    scorer = make_scorer(lm / 'text.txt', lm)
    run_deepspeech(*tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', corpus / 'train.csv', '--epochs', 40,
                   '--train_batch_size', 8, '--learning_rate', 0.002)
    return tmp_path, corpus, scorer


def measure_wer(trained, *scorer_flags):
    tmp_path, corpus, _ = trained
    output = tmp_path / 'results.json'
    run_deepspeech('--n_hidden', N_HIDDEN, '--checkpoint_dir', tmp_path / 'checkpoints', '--load_evaluate', 'last',
                   '--test_files', corpus / 'test.csv', '--test_batch_size', 8, '--beam_width', 256,
                   '--test_output_file', output, *scorer_flags)
    results = json.loads(output.read_text())
    return sum(r['word_distance'] for r in results) / sum(r['word_length'] for r in results)


def test_scorer_lowers_wer_on_held_out_sentences(trained):
    without = measure_wer(trained)
    with_scorer = measure_wer(trained, '--scorer_path', trained[2])
    print('test WER without scorer {:.3f}, with scorer {:.3f}'.format(without, with_scorer))
    assert without > 0, 'the acoustic model alone makes no errors: nothing for the scorer to fix'
    assert with_scorer < without


def test_random_bytes_scorer_fails_at_start(tmp_path):
    """A bad scorer as a user meets it: exit 1 with the reason, before anything is written. The other bad
    scorers below are loaded in process: they raise the same ScorerError, which ends a run this way."""
    scorer = tmp_path / 'random.scorer'
    scorer.write_bytes(os.urandom(4096))
    run = run_deepspeech(*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--scorer', scorer, check=False)
    assert run.returncode == 1, run.output[-2000:]
    assert not (tmp_path / 'checkpoints').exists()
    assert 'cannot load scorer {}: it does not start with a KenLM binary model'.format(scorer) in run.output


def scorer_error(scorer):
    """The ScorerError's message of loading `scorer` as a run of the default alphabet does (at its start)."""
    from deepspeech_training.scorer import ScorerError, load_scorer
    with pytest.raises(ScorerError) as error:
        load_scorer(str(scorer), None, None, ALPHABET, False)
    return str(error.value)


def test_truncated_scorer_fails_at_start_without_crashing(trained, tmp_path):
    scorer = tmp_path / 'truncated.scorer'
    scorer.write_bytes(trained[2].read_bytes()[:trained[2].stat().st_size // 3])
    message = scorer_error(scorer)
    assert 'scorer {} is damaged'.format(scorer) in message or 'cannot load scorer {}'.format(scorer) in message


def test_scorer_for_bytes_output_fails_with_a_character_alphabet(trained, tmp_path):
    _, _, lm = trained[0], trained[1], trained[2].parent
    scorer = tmp_path / 'bytes.scorer'
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'generate_scorer_package.py'), '--alphabet',
                 os.path.join(ROOT, 'data', 'alphabet.txt'), '--lm', lm / 'lm.binary', '--vocab', lm / 'vocab-500.txt',
                 '--package', scorer, '--force_bytes_output_mode', 'true'])
    assert 'was made for UTF-8 bytes but this model predicts alphabet labels' in scorer_error(scorer)


def test_lm_optimizer_reports_the_best_alpha_and_beta(trained):
    tmp_path, corpus, scorer = trained
    run = run_command([sys.executable, os.path.join(ROOT, 'lm_optimizer.py'), '--test_files', corpus / 'dev.csv',
                       '--n_hidden', N_HIDDEN, '--checkpoint_dir', tmp_path / 'checkpoints', '--load_evaluate', 'last',
                       '--scorer_path', scorer, '--n_trials', 3, '--beam_width', 32, '--noshow_progressbar',
                       '--alphabet_config_path', os.path.join(ROOT, 'data', 'alphabet.txt')])
    alpha, beta, wer = re.search(r'Best params: lm_alpha=([0-9.]+) and lm_beta=([0-9.]+) with WER=([0-9.]+)',
                                 run.output).groups()
    assert re.search(r'Acoustic model: [0-9.]+ s once; beam search: [0-9.]+ s a trial', run.output)
    # Its trials decode the acoustic outputs kept from one pass: the same WER a test run gets with them.
    test = run_deepspeech('--test_files', corpus / 'dev.csv', '--n_hidden', N_HIDDEN, '--checkpoint_dir',
                          tmp_path / 'checkpoints', '--load_evaluate', 'last', '--scorer_path', scorer,
                          '--beam_width', 32, '--lm_alpha', alpha, '--lm_beta', beta)
    assert float(re.search(r'Test on .* - WER: ([0-9.]+)', test.output).group(1)) == pytest.approx(float(wer), abs=1e-6)


def test_bytes_output_mode_trains_and_decodes_with_a_bytes_scorer(trained, tmp_path):
    """UTF-8 mode end to end: a transcript no alphabet file lists, a scorer made for bytes."""
    lm = trained[2].parent
    scorer = tmp_path / 'bytes.scorer'
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'generate_scorer_package.py'), '--alphabet',
                 os.path.join(ROOT, 'data', 'alphabet.txt'), '--lm', lm / 'lm.binary', '--vocab', lm / 'vocab-500.txt',
                 '--package', scorer, '--force_bytes_output_mode', 'true'])
    csv_path = tmp_path / 'utf8.csv'
    wav = os.path.join(ROOT, 'data', 'smoke_test', 'good_morning.wav')
    csv_path.write_text(CSV_HEADER + '\n{},{},bonjour café\n'.format(wav, os.path.getsize(wav)),
                        encoding='utf-8')
    output = tmp_path / 'results.json'
    run_deepspeech(*tiny_model_flags(tmp_path), '--bytes_output_mode', '--train_files', csv_path, '--epochs', 2,
                   '--test_files', csv_path, '--scorer_path', scorer, '--beam_width', 16, '--test_output_file', output)
    [result] = json.loads(output.read_text(encoding='utf-8'))
    assert result['src'] == 'bonjour café'
    assert isinstance(result['res'], str)


def test_scorer_made_with_another_alphabet_fails_at_start(trained, tmp_path):
    lm = trained[2].parent
    other_alphabet = tmp_path / 'space_last.txt'
    other_alphabet.write_text(''.join(c + '\n' for c in "abcdefghijklmnopqrstuvwxyz' "))
    scorer = tmp_path / 'other.scorer'
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'generate_scorer_package.py'), '--alphabet', other_alphabet,
                 '--lm', lm / 'lm.binary', '--vocab', lm / 'vocab-500.txt', '--package', scorer])
    output = scorer_error(scorer)
    assert 'scorer {} was made with another alphabet'.format(scorer) in output
    assert 'has 28 labels with the space at 0' in output
