"""Single-process training as a user runs it: real speech, real subprocesses, real checkpoints."""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.suite import (OVERFIT_N_HIDDEN, ROOT, SMOKE_CSV, SMOKE_SINGLE_CSV, deepspeech_command,
                                 import_noise, overfit_single_utterance, run_as_user, run_command, run_deepspeech,
                                 start_step, tiny_model_flags)

pytestmark = pytest.mark.slow
N_HIDDEN = 32
STEPS_PER_EPOCH = 3       # three bundled utterances, batch size 1


def expected_variables(h, classes=29):
    """GUIDE §4: DeepSpeech 0.9's checkpoint variable names and shapes."""
    lstm = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell/'
    shapes = {'layer_1/weights': [494, h], 'layer_2/weights': [h, h], 'layer_3/weights': [h, h],
              'layer_5/weights': [h, h], 'layer_6/weights': [h, classes], 'layer_6/bias': [classes],
              lstm + 'kernel': [2 * h, 4 * h], lstm + 'bias': [4 * h]}
    shapes.update({'layer_{}/bias'.format(i): [h] for i in (1, 2, 3, 5)})
    variables = dict(shapes)
    for name, shape in shapes.items():
        variables[name + '/Adam'] = shape
        variables[name + '/Adam_1'] = shape
    variables.update({'global_step': [], 'learning_rate': [], 'beta1_power': [], 'beta2_power': []})
    return variables


def checkpoint_values(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope='module')
def first_run(tmp_path_factory):
    """Two epochs with validation at the default, constant learning rate, started as a user starts it
    (run_as_user): its directory and output, and a copy of its summaries (constant_rate_run) made before
    resumed_run's second run adds to them."""
    tmp_path = tmp_path_factory.mktemp('resume')
    output = run_as_user(deepspeech_command(*tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', SMOKE_CSV,
                                            '--dev_files', SMOKE_CSV, '--epochs', 2))
    shutil.copytree(str(tmp_path / 'summaries'), str(tmp_path / 'constant_rate' / 'summaries'))
    return tmp_path, output


@pytest.fixture(scope='module')
def resumed_run(first_run):
    """first_run, then a second run of one epoch that cannot move the weights (learning rate 0), so
    anything re-initialised would show."""
    tmp_path, first = first_run
    second = run_deepspeech(*tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', SMOKE_CSV, '--epochs', 1,
                            '--learning_rate', 0, '--force_initialize_learning_rate')
    return tmp_path / 'checkpoints', first, second.output


def test_overfit_one_utterance_decodes_exactly(tmp_path):
    """The run's overfit model (suite.overfit_single_utterance), tested as a user tests a checkpoint."""
    output_file = tmp_path / 'results.json'
    run_deepspeech('--n_hidden', OVERFIT_N_HIDDEN, '--checkpoint_dir', overfit_single_utterance()[0],
                   '--test_files', SMOKE_SINGLE_CSV, '--load_evaluate', 'last', '--test_output_file', output_file)
    [result] = json.loads(output_file.read_text())
    assert result['res'] == result['src'], result
    assert result['wer'] == 0.0 and result['cer'] == 0.0


def test_resume_continues_global_step_and_epochs_without_reinitialising(resumed_run):
    checkpoints, first, second = resumed_run
    assert 'Finished training epoch 1 ' in first
    assert start_step(second) == 2 * STEPS_PER_EPOCH
    assert 'Finished training epoch 2 ' in second and 'epoch 0 ' not in second
    before = checkpoint_values(str(checkpoints / 'train-{}'.format(2 * STEPS_PER_EPOCH)))
    after = checkpoint_values(str(checkpoints / 'train-{}'.format(3 * STEPS_PER_EPOCH)))
    assert after['global_step'] == 3 * STEPS_PER_EPOCH
    for name in ('layer_1/weights', 'layer_6/bias', 'layer_3/weights/Adam_1'):
        np.testing.assert_allclose(after[name.replace('/Adam_1', '')], before[name.replace('/Adam_1', '')])
    # Adam's step counters went on from the first run, they did not restart at beta
    np.testing.assert_allclose(after['beta1_power'], before['beta1_power'] * 0.9 ** STEPS_PER_EPOCH, rtol=1e-5)


def test_checkpoint_has_deepspeech_variable_names_and_shapes(resumed_run):
    checkpoints = resumed_run[0]
    reader = tf.train.load_checkpoint(str(checkpoints / 'train-{}'.format(2 * STEPS_PER_EPOCH)))
    # DeepSpeech 0.9's, and the epoch position and loss (DeepSpeech's loader ignores variables its graph lacks)
    assert reader.get_variable_to_shape_map() == dict(expected_variables(N_HIDDEN), epoch_position=[3], epoch_loss=[2])
    assert reader.get_variable_to_dtype_map()['global_step'] == tf.int64
    assert (checkpoints / 'flags.txt').read_text().count('--n_hidden=32') == 1
    assert glob.glob(str(checkpoints / 'best_dev-*.index'))
    assert (checkpoints / 'best_dev_checkpoint').exists()


def saved_step(checkpoints, state_file):
    path = tf.train.get_checkpoint_state(str(checkpoints), state_file).model_checkpoint_path
    return int(path.rsplit('-', 1)[1])


@pytest.mark.parametrize('method', ['best', 'last'])
def test_load_train_best_or_last_restores_that_checkpoint(resumed_run, tmp_path, method):
    checkpoints = resumed_run[0]
    best, last = saved_step(checkpoints, 'best_dev_checkpoint'), saved_step(checkpoints, 'checkpoint')
    assert best <= 2 * STEPS_PER_EPOCH < last == 3 * STEPS_PER_EPOCH   # only the first run validated
    run = run_deepspeech('--n_hidden', N_HIDDEN, '--train_files', SMOKE_CSV, '--epochs', 0,
                         '--load_checkpoint_dir', checkpoints, '--save_checkpoint_dir', tmp_path / 'out',
                         '--summary_dir', tmp_path / 'summaries', '--load_train', method)
    assert start_step(run.output) == (best if method == 'best' else last)


def test_missing_checkpoint_for_load_train_best_is_a_clear_error(tmp_path):
    run = run_deepspeech(*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--load_train', 'best',
                         check=False)
    assert run.returncode == 1
    assert 'no best checkpoint in' in run.output and '--load_train init' in run.output


def test_summaries_are_written_for_train_and_dev(resumed_run):
    summaries = resumed_run[0].parent / 'summaries'
    assert glob.glob(str(summaries / 'train' / 'events.out.tfevents.*'))
    assert glob.glob(str(summaries / 'dev' / 'events.out.tfevents.*'))


def test_main_job_script_trains_tests_and_reports(tmp_path):
    """README command 1, shortened: the bundled smoke run prints transcripts and WER/CER."""
    run = run_command([os.path.join(ROOT, 'bin', 'run_smoke_test.sh'), '--epochs', 3, '--n_hidden', 16],
                      env={'SMOKE_DIR': str(tmp_path)})
    assert 'Test on data/smoke_test/smoke_test.csv - WER:' in run.output
    assert run.output.count(' - res: "') >= 3
    assert len(json.loads((tmp_path / 'test_output.json').read_text())) == 3


def test_transfer_learning_drops_the_output_layer_for_another_alphabet(resumed_run, tmp_path):
    source = resumed_run[0]
    flags = ['--n_hidden', N_HIDDEN, '--train_files', SMOKE_CSV, '--epochs', 1, '--bytes_output_mode',
             '--load_checkpoint_dir', source, '--save_checkpoint_dir', tmp_path / 'out', '--summary_dir',
             tmp_path / 'summaries', '--learning_rate', 0, '--force_initialize_learning_rate']
    mismatch = run_deepspeech(*flags, check=False)
    assert mismatch.returncode == 1 and 'layer_6/weights [32, 29] vs [32, 256]' in mismatch.output
    run = run_deepspeech(*flags, '--drop_source_layers', 1)
    assert 'Initialised 6 dropped variable(s)' in run.output
    target = checkpoint_values(tf.train.latest_checkpoint(str(tmp_path / 'out')))
    loaded = checkpoint_values(str(source / 'train-{}'.format(3 * STEPS_PER_EPOCH)))
    assert target['layer_6/weights'].shape == (N_HIDDEN, 256)
    np.testing.assert_array_equal(target['layer_1/weights'], loaded['layer_1/weights'])


def test_without_horovod_plain_training_works_and_horovod_says_how_to_install(tmp_path, monkeypatch):
    """Horovod is hidden by a module that fails to import, as if it were not installed; then, in this
    process, --horovod's start (distributed.init) with horovod.tensorflow hidden ends with the hint (a
    SystemExit: its message on stderr, exit code 1)."""
    (tmp_path / 'hidden' / 'horovod').mkdir(parents=True)
    (tmp_path / 'hidden' / 'horovod' / '__init__.py').write_text('raise ImportError("No module named horovod")\n')
    env = {'PYTHONPATH': str(tmp_path / 'hidden')}
    run = run_command(deepspeech_command(*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--epochs', 1),
                      env=env)
    assert 'Finished training epoch 0' in run.output
    from deepspeech_training import distributed
    monkeypatch.setitem(sys.modules, 'horovod.tensorflow', None)
    with pytest.raises(SystemExit, match='--horovod needs Horovod built against this TensorFlow: run bin/setup.sh'):
        distributed.init(True)


def test_unwritable_checkpoint_dir_is_an_error_at_start(tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a directory')
    run = run_deepspeech('--n_hidden', N_HIDDEN, '--train_files', SMOKE_CSV, '--checkpoint_dir', blocker / 'ckpt',
                         '--summary_dir', tmp_path / 'summaries', check=False)
    assert run.returncode == 1
    assert 'cannot write checkpoints to {}'.format(blocker / 'ckpt') in run.output
    assert 'Training from global step' not in run.output


def test_plot_summaries_draws_the_run(resumed_run, tmp_path):
    summaries = resumed_run[0].parent / 'summaries'
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'plot_summaries.py'), '--summary_dir', summaries,
                 '--output', tmp_path / 'run.png'])
    assert (tmp_path / 'run.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    from bin.plot_summaries import read_scalars
    train = read_scalars(str(summaries / 'train'))
    assert [step for step, _ in train['loss']] == [3, 6, 9]   # one point per epoch, over both runs


# ---------------------------------------------------------------------------------------------------------
# What a user sees of a run's output and summaries (issue 37: items 1, 8, 11)
@pytest.fixture(scope='module')
def constant_rate_run(first_run):
    """first_run's summaries (before the resumed run's) and output."""
    return first_run[0] / 'constant_rate' / 'summaries', first_run[1]


def test_a_run_prints_none_of_tensorflows_cuda_and_tensorrt_import_noise(constant_rate_run):
    """... nor do the other tools (transcribe.py's and lm_optimizer.py's: tests/test_flags.py's help runs)."""
    output = constant_rate_run[1]
    assert 'Finished training epoch 1 ' in output
    assert import_noise(output) == []
    summaries, plot = constant_rate_run[0], constant_rate_run[0].parent / 'quiet.png'
    for command in (['bin/data_set_tool.py', '--help'],
                    ['bin/plot_summaries.py', '--summary_dir', summaries, '--output', plot]):
        output = run_as_user([sys.executable, os.path.join(ROOT, command[0])] + command[1:])
        assert import_noise(output) == []
    assert output == 'wrote {}\n'.format(plot)     # plot_summaries says that alone


@pytest.mark.fast
def test_import_noise_filter_passes_every_other_line_on(tmp_path):
    """A stand-in tensorflow package writing the noise, a real error and a Python warning to stderr."""
    (tmp_path / 'tensorflow').mkdir()
    (tmp_path / 'tensorflow' / '__init__.py').write_text(
        'import os, sys\n'
        'os.write(2, b"E cuda_dnn.cc:9261] Unable to register cuDNN factory: Attempting to register factory for '
        'plugin cuDNN when one has already been registered\\n")\n'
        'os.write(2, b"E some_op.cc:1] a real error\\n")\n'
        'os.write(2, b"W py_utils.cc:38] TF-TRT Warning: Could not find TensorRT\\n")\n'
        'print("a Python warning", file=sys.stderr)\n')
    code = ('import sys; sys.path[:0] = [{!r}, {!r}]; from deepspeech_training import entry; '
            'entry.import_tensorflow_quietly(); print("after", file=sys.stderr)'
            .format(str(tmp_path), os.path.join(ROOT, 'training')))
    env = {name: value for name, value in os.environ.items() if name != 'TF_CPP_MIN_LOG_LEVEL'}
    run = subprocess.run([sys.executable, '-c', code], env=env, stderr=subprocess.PIPE, universal_newlines=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines() == ['E some_op.cc:1] a real error', 'a Python warning', 'after']
    run = subprocess.run([sys.executable, '-c', code], env=dict(env, TF_CPP_MIN_LOG_LEVEL='0'),
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert len(run.stderr.splitlines()) == 5     # a user asking for every line gets every line


def test_tensorboard_of_the_environment_serves_a_runs_summaries(constant_rate_run):
    """README: `$(dirname $PY)/tensorboard --logdir my/summaries` (TensorBoard comes with the environment)."""
    summaries = constant_rate_run[0]
    with socket.socket() as probe:
        probe.bind(('localhost', 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), 'tensorboard'), '--logdir',
                               str(summaries), '--host', 'localhost', '--port', str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, runs = time.time() + 90, None
        while time.time() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen('http://localhost:{}/data/runs'.format(port), timeout=5) as reply:
                    runs = json.loads(reply.read())
                if {'train', 'dev'} <= set(runs):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert server.poll() is None, server.communicate()[0].decode()[-3000:]
        assert {'train', 'dev'} <= set(runs or ())
        url = 'http://localhost:{}/data/plugin/scalars/scalars?run=train&tag=loss'.format(port)
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert [step for _, step, _ in json.loads(reply.read())] == [3, 6]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.communicate()


def visible_y_labels(axes):
    low, high = axes.get_ylim()
    return [label.get_text() for label in axes.get_yticklabels() + axes.get_yticklabels(minor=True)
            if label.get_text() and low <= label.get_position()[1] <= high]


def test_plot_labels_the_loss_axis_in_plain_numbers_and_names_a_constant_rate(constant_rate_run, tmp_path):
    from bin.plot_summaries import plot
    figure = plot(str(constant_rate_run[0]), str(tmp_path / 'run.png'))
    figure.canvas.draw()
    [losses] = figure.axes              # no empty learning-rate panel
    assert losses.get_title() == 'effective learning rate 0.001 throughout'
    labels = visible_y_labels(losses)
    assert len(labels) >= 4 and all(re.fullmatch(r'\d+(\.\d+)?', label) for label in labels), labels


def test_plot_keeps_the_learning_rate_panel_when_the_rate_changed(resumed_run, tmp_path):
    from bin.plot_summaries import plot
    figure = plot(str(resumed_run[0].parent / 'summaries'), str(tmp_path / 'run.png'))
    figure.canvas.draw()
    losses, rates = figure.axes        # 0.001, then 0 on the resumed run
    assert rates.get_ylabel() == 'effective learning rate'
    assert len(visible_y_labels(losses)) >= 4
