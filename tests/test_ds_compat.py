"""A DeepSpeech 0.9 user's training scripts, run against this checkout: the log lines they grep (its CI's
resume check), --checkpoint_secs 0, --metrics_files, and evaluate.py (also `python -m
deepspeech_training.evaluate`) on a checkpoint of another alphabet. Real processes, a tiny model."""
import json
import os
import re
import shutil
import sys

import pytest
import tensorflow as tf

from tests.helpers.suite import (ALPHABET, CSV_HEADER, ROOT, SMOKE_CSV, SMOKE_DIR, SMOKE_SINGLE_CSV, run_command,
                                 run_deepspeech, tiny_model_flags)

EPOCHS = 2
STEPS_PER_EPOCH = 3       # the three bundled utterances, batch size 1
EVALUATE = os.path.join(ROOT, 'evaluate.py')


def train_command(tmp_path, dev_csv, *more):
    """DeepSpeech's CI training run (bin/run-tc-ldc93s1_checkpoint.sh) on the bundled speech, tiny model."""
    return (*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--dev_files', dev_csv, '--epochs', EPOCHS,
            '--checkpoint_secs', 0, '--max_to_keep', 10, '--beam_width', 1, *more)


def dev_lines(output):
    """The lines that say what the dev set decided: its losses and the best_dev saves (the checkpoint's name
    without its folder)."""
    return [re.sub(r'to: .*/', 'to: ', line)
            for line in re.findall(r'(?:Finished validating epoch|Saved new best validating model).*', output)]


@pytest.fixture(scope='module')
def dev_csv(tmp_path_factory):
    """The dev set: the bundled utterance of the highest loss (so the others make a better metrics set)."""
    csv = tmp_path_factory.mktemp('dev') / 'the_cat_sat.csv'
    wav = os.path.join(SMOKE_DIR, 'the_cat_sat.wav')
    csv.write_text(CSV_HEADER + '\n{},{},the cat sat\n'.format(wav, os.path.getsize(wav)))
    return csv


@pytest.fixture(scope='module')
def trained(tmp_path_factory, dev_csv):
    """(folder, output) of a fresh run of train_command."""
    tmp_path = tmp_path_factory.mktemp('trained')
    return tmp_path, run_deepspeech(*train_command(tmp_path, dev_csv)).output


def test_a_fresh_run_logs_deepspeechs_lines(trained, dev_csv):
    """DeepSpeech 0.9's own words, each on an `I ` line, in its order of events."""
    _, output = trained
    expected = ['I Could not find most recent checkpoint.', 'I Could not find best validating checkpoint.',
                'I Initializing all variables.', 'I STARTING Optimization', 'I Finished training epoch 0 - loss: ',
                'I Finished validating epoch 0 on {} - loss: '.format(dev_csv),
                'I Saved new best validating model with loss ', 'I FINISHED optimization in ']
    positions = [output.find(line) for line in expected]
    assert -1 not in positions and positions == sorted(positions), output


def test_checkpoint_secs_0_saves_at_each_epoch_end_only(trained):
    """DeepSpeech 0.9 accepted --checkpoint_secs 0 and then made no timed saves (`checkpoint_secs > 0 and ...`):
    the train checkpoints are those of the epoch ends, none between."""
    folder, _ = trained
    state = tf.train.get_checkpoint_state(str(folder / 'checkpoints'))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == \
        ['train-{}'.format(STEPS_PER_EPOCH * (epoch + 1)) for epoch in range(EPOCHS)]


def test_resume_and_test_log_deepspeechs_loading_lines(trained, dev_csv, tmp_path):
    """The CI resume check: the same command again, with --test_files, greps `Loading best validating checkpoint
    from` (the test's load; ours resumes training from the most recent, and says so in DeepSpeech's words)."""
    folder, _ = trained
    shutil.copytree(str(folder / 'checkpoints'), str(tmp_path / 'checkpoints'))
    output = run_deepspeech(*train_command(tmp_path, dev_csv, '--epochs', 1, '--test_files', SMOKE_SINGLE_CSV,
                                           '--load_evaluate', 'best')).output
    checkpoints = tmp_path / 'checkpoints'
    last = checkpoints / 'train-{}'.format(EPOCHS * STEPS_PER_EPOCH)
    assert 'I Loading most recent checkpoint from {}\n'.format(last) in output
    assert 'Initializing all variables' not in output
    assert re.search(r'I Loading best validating checkpoint from {}-\d+\n'.format(re.escape(str(checkpoints / 'best_dev'))),
                     output), output
    assert 'I Testing model on {}'.format(SMOKE_SINGLE_CSV) in output


def test_metrics_files_report_a_loss_per_file_and_leave_best_dev_to_the_dev_set(trained, dev_csv, tmp_path):
    """DeepSpeech 0.9's --metrics_files: after each validation a loss per file, in its line; the run's dev
    losses and best_dev saves are those of the same run without them (a metrics set that does better than
    the dev set changes nothing), and best_dev's recorded loss is the dev set's."""
    folder, plain = trained
    better = SMOKE_SINGLE_CSV     # good morning: a lower loss than the dev set's
    output = run_deepspeech(*train_command(tmp_path, dev_csv, '--metrics_files',
                                           '{},{}'.format(SMOKE_CSV, better))).output
    for epoch in range(EPOCHS):
        for source in (SMOKE_CSV, better):
            assert re.search(r'I Metrics for epoch {} on {} - loss: \d+\.\d+\n'.format(epoch, re.escape(source)),
                             output), output
    assert dev_lines(output) == dev_lines(plain)
    record = json.loads((tmp_path / 'checkpoints' / 'best_dev_loss.json').read_text())
    assert record == json.loads((folder / 'checkpoints' / 'best_dev_loss.json').read_text())
    best_metrics = float(re.findall(r'Metrics for epoch \d+ on {} - loss: (\S+)'.format(re.escape(better)),
                                    output)[-1])
    assert best_metrics < record['dev_loss']


@pytest.fixture(scope='module')
def other_alphabet(tmp_path_factory):
    """(alphabet file, checkpoint folder): a model trained 1 epoch on an alphabet of the bundled transcripts'
    letters alone, in another order than DeepSpeech's (14 labels, not 28)."""
    tmp_path = tmp_path_factory.mktemp('alphabet')
    alphabet = tmp_path / 'alphabet.txt'
    alphabet.write_text('# the bundled transcripts\' letters\n \nt\nh\ne\nc\na\ns\ng\no\nd\nm\nr\nn\ni\nl\nw\n')
    run_deepspeech(*tiny_model_flags(tmp_path), '--alphabet_config_path', alphabet, '--train_files', SMOKE_CSV,
                   '--epochs', 1)
    return alphabet, tmp_path / 'checkpoints'


def evaluate_flags(alphabet, checkpoints):
    """DeepSpeech's evaluate.py command line after a transfer-learning run to another alphabet."""
    return ['--test_files', SMOKE_CSV, '--load_checkpoint_dir', checkpoints, '--alphabet_config_path', alphabet,
            '--n_hidden', 32, '--test_batch_size', 1, '--beam_width', 1, '--noshow_progressbar']


def check_tested(output, checkpoints):
    """What evaluate.py prints of a checkpoint without best_dev: DeepSpeech's loading lines, then its report."""
    assert 'I Could not find best validating checkpoint.\nI Loading most recent checkpoint from {}'.format(
        checkpoints / 'train-{}'.format(STEPS_PER_EPOCH)) in output, output
    assert re.search(r'Test on {} - WER: [\d.]+, CER: [\d.]+, loss: [\d.]+'.format(re.escape(SMOKE_CSV)), output)
    assert 'STARTING Optimization' not in output


def test_evaluate_py_tests_a_checkpoint_of_another_alphabet(other_alphabet):
    """With the run's alphabet it tests; with DeepSpeech's English one the output layer does not fit."""
    alphabet, checkpoints = other_alphabet
    check_tested(run_command([sys.executable, '-u', EVALUATE] + evaluate_flags(alphabet, checkpoints)).output,
                 checkpoints)
    english = run_command([sys.executable, EVALUATE] + evaluate_flags(ALPHABET, checkpoints), check=False)
    assert english.returncode == 1 and 'layer_6/weights [32, 17] vs [32, 29]' in english.output, english.output


def test_python_m_deepspeech_training_evaluate_does_the_same(other_alphabet):
    alphabet, checkpoints = other_alphabet
    run = run_command([sys.executable, '-m', 'deepspeech_training.evaluate'] + evaluate_flags(alphabet, checkpoints),
                      env={'PYTHONPATH': os.path.join(ROOT, 'training')})
    check_tested(run.output, checkpoints)


def test_evaluate_py_only_tests_and_needs_test_files(other_alphabet, tmp_path):
    """DeepSpeech's evaluate.py: without --test_files its message and a failure; the flags of other tasks do
    nothing here (a warning names them)."""
    alphabet, checkpoints = other_alphabet
    run = run_command([sys.executable, EVALUATE, '--alphabet_config_path', alphabet], check=False)
    assert run.returncode != 0
    assert 'You need to specify what files to use for evaluation via the --test_files flag.' in run.output
    flags = evaluate_flags(alphabet, checkpoints) + ['--train_files', SMOKE_CSV, '--export_dir', tmp_path / 'export']
    output = run_command([sys.executable, EVALUATE] + flags).output
    assert 'W evaluate.py only tests: ignoring --train_files, --export_dir' in output
    assert 'Test on' in output and 'STARTING Optimization' not in output and not (tmp_path / 'export').exists()


# Every flag of DeepSpeech 0.9.3's training/deepspeech_training/util/flags.py.
DEEPSPEECH_FLAGS = '''alphabet_config_path audio_sample_rate augment automatic_mixed_precision beam_width beta1 beta2
    bytes_output_mode cache_for_epochs checkpoint_dir checkpoint_secs cutoff_prob cutoff_top_n dev_batch_size
    dev_files drop_source_layers dropout_rate dropout_rate2 dropout_rate3 dropout_rate4 dropout_rate5
    dropout_rate6 early_stop epochs epsilon es_epochs es_min_delta export_author_id export_batch_size
    export_beam_width export_contact_info export_description export_dir export_file_name export_language
    export_license export_max_ds_version export_min_ds_version export_model_name export_model_version
    export_tflite export_zip feature_cache feature_win_len feature_win_step force_initialize_learning_rate
    inter_op_parallelism_threads intra_op_parallelism_threads layer_norm learning_rate limit_dev limit_test
    limit_train lm_alpha lm_alpha_max lm_beta lm_beta_max load_checkpoint_dir load_cudnn load_evaluate load_train
    log_level log_placement max_to_keep metrics_files n_hidden n_steps n_trials one_shot_infer plateau_epochs
    plateau_reduction random_seed read_buffer reduce_lr_on_plateau relu_clip remove_export report_count
    reverse_dev reverse_test reverse_train save_checkpoint_dir scorer scorer_path show_progressbar summary_dir
    test_batch_size test_files test_output_file train_batch_size train_cudnn train_files use_allow_growth'''.split()


def documented_as_missing():
    """The flags doc/TRAINING.rst lists under "DeepSpeech's flags that are not here"."""
    with open(os.path.join(ROOT, 'doc', 'TRAINING.rst'), encoding='utf-8') as doc:
        text = doc.read()
    section = text.split("DeepSpeech's flags that are not here", 1)[1].split('Ours only', 1)[0]
    return set(re.findall(r'``--(\w+)``', section))


def test_every_deepspeech_flag_is_ours_or_documented_as_missing():
    """DeepSpeech.py defines each DeepSpeech 0.9 flag, or the training guide says why not (lm_optimizer.py's
    own flags are defined there)."""
    from absl import flags
    from deepspeech_training.flags import create_flags
    create_flags()
    ours = set(flags.FLAGS)
    missing = documented_as_missing()
    assert missing and not missing & ours
    assert [name for name in DEEPSPEECH_FLAGS if name not in ours | missing] == []


def test_log_level_hides_our_lines_as_deepspeech_did_but_not_the_report(capsys):
    """--log_level 2: no infos, warnings still; 3: errors only; the test report shows at any level."""
    from deepspeech_training.util import logging
    try:
        for level, shown in ((1, ['I info', 'W warning', 'E error']), (2, ['W warning', 'E error']), (3, ['E error'])):
            logging.configure(show_progressbar=False, log_level=level)
            logging.log_info('info')
            logging.log_warn('warning')
            logging.log_error('error')
            logging.log_report('report')
            out, err = capsys.readouterr()
            assert out.splitlines() == [line for line in shown if line[0] == 'I'] + ['I report']
            assert err.splitlines() == [line for line in shown if line[0] != 'I']
    finally:
        logging.configure()
