"""--ema_decay (deepspeech_training/ema.py): the average follows each update by TensorFlow's formula, a
resumed run continues it (or restarts it from the loaded weights when there is none of that step),
training and its checkpoints are those of a run without the flag, the `ema/` folder tests like any
checkpoint folder, and a run with the flag tests and exports the average. Tiny models on the three bundled utterances, all three in one batch: one step an epoch."""
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.suite import SMOKE_CSV, run_deepspeech, run_horovod, settings_from_args, tiny_model_flags

N_HIDDEN = 16
DECAY = 0.5
LSTM = 'cudnn_lstm/rnn/multi_rnn_cell/cell_0/cudnn_compatible_lstm_cell/'
# DeepSpeech 0.9's model weights (GUIDE section 4): what is averaged; everything else is the train checkpoint's
WEIGHTS = {'layer_{}/{}'.format(layer, kind) for layer in (1, 2, 3, 5, 6) for kind in ('weights', 'bias')} | {
    LSTM + 'kernel', LSTM + 'bias'}


def read(prefix):
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def train(checkpoints, *flags):
    """One epoch (one step) into `checkpoints`, resuming from what is there; the run's output."""
    return run_deepspeech('--n_hidden', N_HIDDEN, '--dropout_rate', 0, '--checkpoint_dir', checkpoints,
                          '--summary_dir', checkpoints.parent / 'summaries', '--train_files', SMOKE_CSV,
                          '--train_batch_size', 3, '--epochs', 1, *flags).output


def averaged(previous, weights, step):
    """TensorFlow's update of `previous` towards `weights` at global step `step` (num_updates), in float32:
    average -= (average - weights) x (1 - min(decay, (1 + step) / (10 + step)))."""
    decay = min(np.float32(DECAY), np.float32(1 + step) / np.float32(10 + step))
    return previous - (previous - weights) * (np.float32(1) - decay)


@pytest.fixture(scope='module')
def first(tmp_path_factory):
    """One step with --ema_decay: its checkpoint folder."""
    checkpoints = tmp_path_factory.mktemp('first') / 'checkpoints'
    train(checkpoints, '--ema_decay', DECAY)
    return checkpoints


def resumed(first, tmp_path, keep_average=True):
    """A copy of `first` trained one more step with --ema_decay (without `first`'s average unless
    `keep_average`): (its folder, the run's output)."""
    checkpoints = tmp_path / 'checkpoints'
    shutil.copytree(str(first), str(checkpoints))
    if not keep_average:
        shutil.rmtree(str(checkpoints / 'ema'))
    return checkpoints, train(checkpoints, '--ema_decay', DECAY)


def test_the_average_is_its_own_checkpoint_of_the_weights_averages_and_the_train_checkpoints_other_variables(first):
    average, trained = read(first / 'ema' / 'best_dev-1'), read(first / 'train-1')
    assert set(average) == set(trained) and WEIGHTS < set(average)
    for name, value in average.items():
        assert np.array_equal(value, trained[name]) != (name in WEIGHTS), name
    for state_file in ('checkpoint', 'best_dev_checkpoint'):
        assert (first / 'ema' / state_file).read_text() == ('model_checkpoint_path: "best_dev-1"\n'
                                                            'all_model_checkpoint_paths: "best_dev-1"\n')
    assert (first / 'ema' / 'flags.txt').read_text() == (first / 'flags.txt').read_text()


def test_a_resumed_run_continues_the_average_by_the_exact_update(first, tmp_path):
    checkpoints, output = resumed(first, tmp_path)
    assert 'Restored the weight average (--ema_decay) of step 1 from {}'.format(
        checkpoints / 'ema' / 'best_dev-1') in output
    before, weights, average = (read(first / 'ema' / 'best_dev-1'), read(checkpoints / 'train-2'),
                                read(checkpoints / 'ema' / 'best_dev-2'))
    for name in WEIGHTS:
        np.testing.assert_allclose(average[name], averaged(before[name], weights[name], 2), rtol=1e-6, atol=1e-7,
                                   err_msg=name)
    assert not (checkpoints / 'ema' / 'best_dev-1.index').exists()     # one average kept


def test_without_an_average_of_the_loaded_step_it_restarts_from_the_loaded_weights(first, tmp_path):
    checkpoints, output = resumed(first, tmp_path, keep_average=False)
    assert ('The weight average (--ema_decay) restarts from the loaded weights: no readable average of step 1 '
            'in {}'.format(checkpoints / 'ema')) in output
    loaded, weights, average = (read(checkpoints / 'train-1'), read(checkpoints / 'train-2'),
                                read(checkpoints / 'ema' / 'best_dev-2'))
    for name in WEIGHTS:
        np.testing.assert_allclose(average[name], averaged(loaded[name], weights[name], 2), rtol=1e-6, atol=1e-7,
                                   err_msg=name)


@pytest.mark.parametrize('damage', ['truncate', 'remove_index'])
def test_a_damaged_average_is_named_and_restarted_from_the_loaded_weights(first, tmp_path, damage):
    copy = tmp_path / 'first'
    shutil.copytree(str(first), str(copy))
    prefix = copy / 'ema' / 'best_dev-1'
    if damage == 'truncate':
        data = prefix.with_name('best_dev-1.data-00000-of-00001')
        data.write_bytes(data.read_bytes()[:100])
    else:
        prefix.with_name('best_dev-1.index').unlink()
    checkpoints, output = resumed(copy, tmp_path)
    assert 'W cannot load the weight average {}: '.format(checkpoints / 'ema' / 'best_dev-1') in output
    assert 'restarts from the loaded weights: no readable average of step 1' in output
    assert (checkpoints / 'ema' / 'best_dev-2.index').exists()


def test_training_and_its_checkpoints_are_those_of_a_run_without_the_flag(first, tmp_path):
    train(tmp_path / 'checkpoints')
    with_average, without = read(first / 'train-1'), read(tmp_path / 'checkpoints' / 'train-1')
    assert set(with_average) == set(without)
    assert not any('ExponentialMovingAverage' in name for name in with_average)
    for name, value in without.items():
        assert np.array_equal(with_average[name], value), name
    assert not (tmp_path / 'checkpoints' / 'ema').exists()


def test_the_average_folder_tests_as_a_checkpoint_folder(first):
    run = run_deepspeech('--n_hidden', N_HIDDEN, '--checkpoint_dir', first / 'ema', '--test_files', SMOKE_CSV)
    assert 'Loading best validating checkpoint from {}'.format(first / 'ema' / 'best_dev-1') in run.output
    assert 'Test on {} - WER:'.format(SMOKE_CSV) in run.output


def test_a_run_with_the_average_tests_and_exports_it_unless_told_otherwise(first, tmp_path):
    """--ema_decay: the run's test and export load the average (--load_evaluate auto); --load_evaluate ema
    loads it without the flag, and --load_evaluate last still takes the train checkpoint."""
    def tested(*flags):
        output = run_deepspeech('--n_hidden', N_HIDDEN, '--checkpoint_dir', first, '--test_files', SMOKE_CSV,
                                *flags).output
        return output, re.search(r'Test on .* - WER: .*', output).group(0)
    average = 'Loading the weight average (--ema_decay) from {}'.format(first / 'ema' / 'best_dev-1')
    output, delivered = tested('--ema_decay', DECAY, '--export_dir', tmp_path / 'export')
    assert output.count(average) == 2 and (tmp_path / 'export' / 'output_graph.pb').exists()   # test, export
    output, asked = tested('--load_evaluate', 'ema')
    assert average in output and asked == delivered
    output, last = tested('--ema_decay', DECAY, '--load_evaluate', 'last')
    assert 'Loading most recent checkpoint from {}'.format(first / 'train-1') in output and average not in output
    assert last != delivered     # the average is not the weights (one step at decay 0.5 moved them apart)


@pytest.mark.parametrize('flags, message', [
    (['--ema_decay', 1], 'flag --ema_decay=1.0: must be in [0, 1)'),
    (['--horovod', '--horovod_backward_passes_per_step', 2, '--ema_decay', 0.9],
     '--ema_decay does not work with --horovod_backward_passes_per_step')])
def test_a_decay_of_one_and_gradient_accumulation_are_refused(flags, message):
    """In process, as DeepSpeech.py parses its flags: how a rejected flag ends a run (its message, a non-zero
    exit, nothing written) is tests/test_flags.py's, with a bound of the same kind (--dropout_rate) and a
    validator of two flags (--horovod_elastic)."""
    from absl import flags as absl_flags
    with pytest.raises(absl_flags.Error, match=re.escape(message)):
        settings_from_args('--train_files', SMOKE_CSV, *flags)


@pytest.mark.slow
def test_two_horovod_ranks_keep_and_resume_the_average(first, tmp_path):
    """Two ranks resume `first` (one process wrote it with the flag): rank 0 writes ema/ (its broadcast
    gave rank 1 the same averages, which only matters when rank 1 is the one that goes on: not visible
    here), continuing the average."""
    checkpoints = tmp_path / 'checkpoints'
    shutil.copytree(str(first), str(checkpoints))
    resumed_run = run_horovod(2, *tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', SMOKE_CSV, '--epochs', 1,
                              '--ema_decay', DECAY)
    assert 'Restored the weight average (--ema_decay) of step 1 from {}'.format(
        checkpoints / 'ema' / 'best_dev-1') in resumed_run.output
    assert sorted(p.name for p in (checkpoints / 'ema').iterdir()) == [
        'best_dev-2.data-00000-of-00001', 'best_dev-2.index', 'best_dev_checkpoint', 'checkpoint', 'flags.txt']
    assert set(read(checkpoints / 'ema' / 'best_dev-2')) == set(read(checkpoints / 'train-2'))
