"""bin/average_checkpoints.py (deepspeech_training/checkpoint_averaging.py): the mean of a run's last K
checkpoints holds the exact mean of their weights and the newest's optimizer and loop state; it loads in
test (--load_evaluate best and last) and export, and the export runs in the released deepspeech 0.9.3
client. The unit tests write small checkpoints of their own; the others train tiny models."""
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.suite import (OVERFIT_N_HIDDEN, ROOT, SMOKE_CSV, overfit_single_utterance, run_command,
                                 run_deepspeech, tiny_model_flags)
from deepspeech_training.checkpoint_averaging import AveragingError, average_checkpoints, write_checkpoint

AVERAGE = [sys.executable, os.path.join(ROOT, 'bin', 'average_checkpoints.py')]
N_HIDDEN = 16
LSTM = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell/'
# DeepSpeech 0.9's model weights (GUIDE section 4): what is averaged; everything else is the newest's
WEIGHTS = {'layer_{}/{}'.format(layer, kind) for layer in (1, 2, 3, 5, 6) for kind in ('weights', 'bias')} | {
    LSTM + 'kernel', LSTM + 'bias'}


def mean(arrays):
    """The exact mean of float32 arrays, rounded once to float32."""
    return np.mean(np.stack(arrays).astype(np.float64), axis=0).astype(np.float32)


def write_steps(directory, variables, steps=(1, 2, 3)):
    """train-<step> checkpoints in `directory` of `variables` ({name: function(step) -> array})."""
    os.makedirs(str(directory), exist_ok=True)
    for step in steps:
        write_checkpoint({name: value(step) for name, value in variables.items()},
                         os.path.join(str(directory), 'train-{}'.format(step)))


def read(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_model_weights_are_averaged_and_optimizer_and_loop_state_come_from_the_newest(tmp_path):
    """Every kind of variable a checkpoint of ours, or a release one trained with cuDNN, holds."""
    random = np.random.RandomState(0)
    weights = {step: random.standard_normal((3, 5)).astype(np.float32) for step in (1, 2, 3)}
    variables = {
        'layer_1/weights': lambda step: weights[step],
        'layer_1/LayerNorm/gamma': lambda step: np.full(5, step / 3, np.float32),
        'layer_1/weights/Adam': lambda step: weights[step] * 2, 'layer_1/weights/Adam_1': lambda step: weights[step] ** 2,
        'cudnn_lstm/opaque_kernel/Adam': lambda step: np.full(7, step, np.float32),
        'beta1_power': lambda step: np.float32(0.9 ** step), 'beta2_power': lambda step: np.float32(0.999 ** step),
        'learning_rate': lambda step: np.float32(0.001 * step), 'global_step': lambda step: np.int64(step * 10),
        'epoch_position': lambda step: np.array([step, 0, 4], np.int64),
        'epoch_loss': lambda step: np.array([step * 1.5, 4.0], np.float64),
        'some_counter': lambda step: np.int32(step)}
    write_steps(tmp_path / 'run', variables)
    prefix, inputs = average_checkpoints(str(tmp_path / 'run'), str(tmp_path / 'mean'), 2)
    assert [os.path.basename(p) for p in inputs] == ['train-2', 'train-3'] and prefix.endswith('best_dev-30')
    values = read(prefix)
    assert set(values) == set(variables)
    averaged = {'layer_1/weights', 'layer_1/LayerNorm/gamma'}
    for name, value in values.items():
        expected = mean([variables[name](2), variables[name](3)]) if name in averaged else variables[name](3)
        assert value.dtype == np.asarray(expected).dtype and np.array_equal(value, expected), name


def test_fewer_checkpoints_than_asked_is_an_error_saying_how_many_there_are(tmp_path):
    write_steps(tmp_path / 'run', {'layer_1/bias': lambda step: np.zeros(2, np.float32)})
    with pytest.raises(AveragingError, match=r'^3 train checkpoint\(s\) in .*run, 4 asked to average'):
        average_checkpoints(str(tmp_path / 'run'), str(tmp_path / 'mean'), 4)
    with pytest.raises(AveragingError, match=r'^0 best_dev checkpoint\(s\)'):
        average_checkpoints(str(tmp_path / 'run'), str(tmp_path / 'mean'), 1, kind='best_dev')
    assert not (tmp_path / 'mean').exists()


def test_checkpoints_of_other_shapes_or_variables_are_refused_naming_the_differences(tmp_path):
    write_steps(tmp_path / 'run', {'layer_1/bias': lambda step: np.zeros(2 if step < 3 else 4, np.float32)})
    with pytest.raises(AveragingError, match=r'train-2 and .*train-3 hold different variables \(layer_1/bias '
                                             r'\(\[2\], .float32.\) vs \(\[4\], .float32.\)\)'):
        average_checkpoints(str(tmp_path / 'run'), str(tmp_path / 'mean'), 2)
    write_checkpoint({'layer_1/bias': np.zeros(2, np.float32)}, str(tmp_path / 'other' / 'train-1'))
    write_checkpoint({'layer_1/bias': np.zeros(2, np.float32), 'layer_2/bias': np.zeros(2, np.float32)},
                     str(tmp_path / 'other' / 'train-2'))
    with pytest.raises(AveragingError, match=r'layer_2/bias absent vs'):
        average_checkpoints(str(tmp_path / 'other'), str(tmp_path / 'mean'), 2)


def test_the_output_folder_must_not_be_the_runs_own(tmp_path):
    write_steps(tmp_path / 'run', {'layer_1/bias': lambda step: np.zeros(2, np.float32)})
    with pytest.raises(AveragingError, match='must not be the checkpoint folder'):
        average_checkpoints(str(tmp_path / 'run'), str(tmp_path / 'run' / '.'), 2)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A tiny model trained 3 epochs on the three bundled utterances, one a step: train-3, -6 and -9."""
    tmp_path = tmp_path_factory.mktemp('trained')
    run_deepspeech(*tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', SMOKE_CSV, '--train_batch_size', 1,
                   '--epochs', 3)
    return tmp_path / 'checkpoints'


@pytest.fixture(scope='module')
def averaged(trained, tmp_path_factory):
    """bin/average_checkpoints.py's mean of the three: its folder and output."""
    out_dir = tmp_path_factory.mktemp('averaged')
    return out_dir, run_command(AVERAGE + ['--checkpoint_dir', trained, '--last', 3, '--out_dir', out_dir]).output


@pytest.mark.slow
def test_mean_of_a_trained_models_checkpoints_is_the_exact_mean_of_its_weights(trained, averaged):
    inputs = [read(trained / 'train-{}'.format(step)) for step in (3, 6, 9)]
    values = read(averaged[0] / 'best_dev-9')
    assert set(values) == set(inputs[-1]) and WEIGHTS < set(values)
    for name, value in values.items():
        if name in WEIGHTS:
            assert np.array_equal(value, mean([checkpoint[name] for checkpoint in inputs])), name
            assert not np.array_equal(value, inputs[-1][name]), name    # it did learn: the mean is another model
        else:
            assert np.array_equal(value, inputs[-1][name]), name
    assert 'best_dev-9: the mean of train-3, train-6, train-9' in averaged[1]


@pytest.mark.slow
def test_output_is_one_best_dev_checkpoint_that_both_state_files_name(trained, averaged):
    out_dir = averaged[0]
    assert sorted(os.listdir(str(out_dir))) == ['best_dev-9.data-00000-of-00001', 'best_dev-9.index',
                                                'best_dev_checkpoint', 'checkpoint', 'flags.txt']
    for state_file in ('checkpoint', 'best_dev_checkpoint'):     # relative: the folder can be moved
        assert (out_dir / state_file).read_text() == ('model_checkpoint_path: "best_dev-9"\n'
                                                      'all_model_checkpoint_paths: "best_dev-9"\n')
    assert (out_dir / 'flags.txt').read_text() == (trained / 'flags.txt').read_text()


@pytest.mark.slow
@pytest.mark.parametrize('method, message', [('best', 'Loading best validating checkpoint from'),
                                             ('last', 'Loading most recent checkpoint from')])
def test_mean_loads_for_test_by_either_load_method(averaged, method, message):
    run = run_deepspeech('--n_hidden', N_HIDDEN, '--checkpoint_dir', averaged[0], '--load_evaluate', method,
                         '--test_files', SMOKE_CSV)
    assert '{} {}'.format(message, averaged[0] / 'best_dev-9') in run.output
    assert 'Test on {} - WER:'.format(SMOKE_CSV) in run.output


@pytest.mark.slow
def test_the_tool_exits_with_the_error_when_there_are_too_few_checkpoints(trained, tmp_path):
    run = run_command(AVERAGE + ['--checkpoint_dir', trained, '--last', 4, '--out_dir', tmp_path], check=False)
    assert run.returncode == 1
    assert run.output.strip().splitlines()[-1] == ('average_checkpoints: 3 train checkpoint(s) in {}, 4 asked to '
                                                   'average (a run keeps the last --max_to_keep train checkpoints, '
                                                   'default 5, and one best_dev)'.format(trained))


@pytest.mark.slow
def test_mean_of_the_overfit_models_last_checkpoints_exports_and_transcribes_in_the_released_client(tmp_path):
    from test_export import GREEDY, WAV, run_client_command
    checkpoints, _ = overfit_single_utterance()
    run_command(AVERAGE + ['--checkpoint_dir', checkpoints, '--last', 5, '--out_dir', tmp_path / 'averaged'])
    run_deepspeech('--n_hidden', OVERFIT_N_HIDDEN, '--checkpoint_dir', tmp_path / 'averaged', '--export_dir',
                   tmp_path / 'export')
    output = run_client_command('deepspeech', tmp_path / 'export' / 'output_graph.pb', WAV, *GREEDY)
    assert output.strip().splitlines()[-2] == 'good morning'     # the last line is the inference time
