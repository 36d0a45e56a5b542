"""--lstm_impl: the scan LSTM computes what the fused BlockLSTM computes, and their checkpoints are one."""
import numpy as np
import pytest
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from deepspeech_training.model import LSTM_SCOPE, create_model, fused_lstm, lstm_function, scan_lstm
from deepspeech_training.config import N_CONTEXT, N_INPUT, settings_from_args

T, B, N_IN, H = 12, 3, 5, 7


def relative_error(actual, expected):
    return np.linalg.norm(actual - expected) / max(np.linalg.norm(expected), 1e-30)


def lstm_results(lstm, seq_lengths, with_initial_state):
    """Outputs, final (c, h) and the gradients of a loss using all three w.r.t. x, kernel, bias (and
    the initial state), with the same random weights and inputs whatever the implementation."""
    random = np.random.RandomState(0)
    x_value = random.randn(T, B, N_IN).astype(np.float32)
    kernel_value = 0.3 * random.randn(N_IN + H, 4 * H).astype(np.float32)
    bias_value = 0.3 * random.randn(4 * H).astype(np.float32)
    state_value = [random.randn(B, H).astype(np.float32) for _ in range(2)]
    output_weights = random.randn(T, B, H).astype(np.float32)
    with tf.Graph().as_default() as graph:
        x = tf.constant(x_value)
        state = tuple(tf.constant(s) for s in state_value) if with_initial_state else None
        outputs, (c, h) = lstm(x, tf.constant(seq_lengths, tf.int32), H, state)
        kernel, bias = tfv1.trainable_variables()
        assert kernel.op.name == LSTM_SCOPE + '/kernel' and kernel.shape == (N_IN + H, 4 * H)
        assert bias.op.name == LSTM_SCOPE + '/bias' and bias.shape == (4 * H,)
        loss = tf.reduce_sum(outputs * output_weights) + tf.reduce_sum(0.7 * c) + tf.reduce_sum(-1.3 * h)
        wrt = [x, kernel, bias] + (list(state) if with_initial_state else [])
        gradients = tf.gradients(loss, wrt)
        with tfv1.Session(graph=graph) as session:
            session.run([kernel.assign(kernel_value), bias.assign(bias_value)])
            names = ['outputs', 'c', 'h', 'd_x', 'd_kernel', 'd_bias', 'd_c0', 'd_h0']
            return dict(zip(names, session.run([outputs, c, h] + gradients)))


@pytest.mark.parametrize('seq_lengths', [[T, 5, 1], [8, 5, 0], [T, T, T]])
@pytest.mark.parametrize('with_initial_state', [False, True])
def test_scan_matches_fused_outputs_final_state_and_gradients(seq_lengths, with_initial_state):
    fused = lstm_results(fused_lstm, seq_lengths, with_initial_state)
    scan = lstm_results(scan_lstm, seq_lengths, with_initial_state)
    assert fused.keys() == scan.keys() and len(fused) == (8 if with_initial_state else 6)
    for name in fused:
        assert scan[name].shape == fused[name].shape, name
        assert np.abs(fused[name]).max() > 0 or name == 'outputs', name
        assert relative_error(scan[name], fused[name]) < 1e-5, name
    # as BlockLSTM, nothing is computed (outputs are 0) after the longest sequence
    assert not scan['outputs'][max(seq_lengths):].any()


def implementation(lstm):
    """The LSTM function behind lstm_function's answer (scan comes with its product type bound)."""
    return getattr(lstm, 'func', lstm)


def test_auto_is_fused_on_gpu_and_scan_on_cpu():
    assert lstm_function('fused') is fused_lstm and implementation(lstm_function('scan')) is scan_lstm
    expected = fused_lstm if tf.config.list_physical_devices('GPU') else scan_lstm
    assert implementation(lstm_function('auto')) is expected
    assert lstm_function('scan', 'bfloat16').keywords == {'product_dtype': 'bfloat16'}


def model_config(lstm_impl):
    return settings_from_args(['--n_hidden', 16, '--lstm_impl', lstm_impl]).model


def model_logits(lstm_impl, windows, seq_lengths, save_to=None, load_from=None):
    """Build create_model in a graph of its own; random weights saved to `save_to`, or restored from
    `load_from`; returns the logits and the variables' names and shapes."""
    config = model_config(lstm_impl)
    with tf.Graph().as_default() as graph:
        tfv1.set_random_seed(7)
        logits, (c, h) = create_model(tf.constant(windows), tf.constant(seq_lengths), config, [0.0] * 6,
                                      lstm=lstm_function(config.lstm_impl))
        variables = {v.op.name: v.shape.as_list() for v in tfv1.global_variables()}
        saver = tfv1.train.Saver()
        with tfv1.Session(graph=graph) as session:
            if load_from:
                saver.restore(session, load_from)
            else:
                session.run(tfv1.global_variables_initializer())
                # every bias non-zero too, so a wrong gate order could not hide behind zeros
                session.run([v.assign(tf.random.uniform(v.shape, -0.5, 0.5)) for v in tfv1.global_variables()
                             if v.op.name.endswith('bias')])
                saver.save(session, save_to)
            return session.run([logits, c, h]), variables


@pytest.mark.parametrize('saved_with, loaded_with', [('fused', 'scan'), ('scan', 'fused')])
def test_checkpoint_of_one_implementation_loads_into_the_other_with_the_same_logits(tmp_path, saved_with,
                                                                                     loaded_with):
    random = np.random.RandomState(1)
    windows = random.randn(2, 10, 2 * N_CONTEXT + 1, N_INPUT).astype(np.float32)
    seq_lengths = np.array([10, 6], np.int32)
    prefix = str(tmp_path / 'model')
    saved, saved_variables = model_logits(saved_with, windows, seq_lengths, save_to=prefix)
    loaded, loaded_variables = model_logits(loaded_with, windows, seq_lengths, load_from=prefix)
    assert saved_variables == loaded_variables
    assert loaded_variables[LSTM_SCOPE + '/kernel'] == [32, 64] and loaded_variables[LSTM_SCOPE + '/bias'] == [64]
    for name, before, after in zip(['logits', 'c', 'h'], saved, loaded):
        assert np.abs(before).max() > 0, name
        assert relative_error(after, before) < 1e-5, name
