"""--automatic_mixed_precision on this CPU: matrix products in bfloat16, checkpoints in float32 with
DeepSpeech's names that load and transcribe without the flag, and two Horovod ranks that stay in step.
(The GPU's float16 path cannot run here: no GPU.)"""
import os

import pytest
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from tests.helpers.suite import (SMOKE_CSV, SMOKE_SINGLE_CSV, overfit_single_utterance, run_deepspeech, run_horovod,
                                 tiny_model_flags)
from test_horovod import saved_variables
from deepspeech_training.config import settings_from_args
from deepspeech_training.session import session_config
from deepspeech_training.model import create_model, lstm_function
from deepspeech_training.precision import BFLOAT16, cpu_has_bfloat16

pytestmark = pytest.mark.skipif(not cpu_has_bfloat16(), reason='this CPU has neither AMX-BF16 nor AVX512-BF16')

WAV = os.path.join(os.path.dirname(SMOKE_SINGLE_CSV), 'good_morning.wav')
MATMUL_OPS = ('MatMul', 'BatchMatMulV2', '_MklMatMul', '_MklNativeMatMul', '_FusedMatMul', '_MklFusedMatMul',
              '_MklNativeFusedMatMul')


def step_graph_types(mixed_precision):
    """{(op type, node name): type} of one training step of a small model as the session runs it (the
    graph after grappler's rewrites)."""
    config = settings_from_args(['--n_hidden', 64, '--lstm_impl', 'scan']).model
    with tf.Graph().as_default():
        logits, _ = create_model(tf.random.uniform([2, 20, 19, 26]), tf.fill([2], 20), config, [0.0] * 6,
                                 lstm=lstm_function(config.lstm_impl, mixed_precision))
        step = tfv1.train.AdamOptimizer().minimize(tf.reduce_mean(logits ** 2))
        with tfv1.Session(config=session_config(mixed_precision=mixed_precision)) as session:
            session.run(tfv1.global_variables_initializer())
            metadata = tfv1.RunMetadata()
            session.run(step, options=tfv1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    return {(node.op, node.name): tf.dtypes.as_dtype(node.attr['T'].type).name for graph in metadata.partition_graphs
            for node in graph.node if 'T' in node.attr}


def matmul_types(mixed_precision):
    return {dtype for (op, _), dtype in step_graph_types(mixed_precision).items() if op in MATMUL_OPS}


def test_the_rewrite_multiplies_in_bfloat16_only_with_the_flag():
    assert matmul_types(BFLOAT16) == {'bfloat16'}
    assert matmul_types(None) == {'float32'}


def test_the_lstm_loops_keep_their_state_and_gates_in_float32_with_the_flag():
    """Only the products are bfloat16: cell state and gates forward, the gradients carried back, in float32
    (left to the rewrite they were bfloat16, and its rounding compounded over the time steps)."""
    types = step_graph_types(BFLOAT16)
    loop_math = {(op, name): dtype for (op, name), dtype in types.items()
                 if 'while/' in name and op in ('Mul', 'AddV2', 'AddN', 'Sub', 'Sigmoid', 'Tanh', 'Square')
                 and dtype != 'int32'}   # int32: the loop counters
    assert len(loop_math) >= 20, types
    assert set(loop_math.values()) == {'float32'}, loop_math
    loop_products = {dtype for (op, name), dtype in types.items() if 'while/' in name and op in MATMUL_OPS}
    assert loop_products == {'bfloat16'}


@pytest.fixture(scope='module')
def overfit(tmp_path_factory):
    """One utterance overfit with the flag (suite.overfit_single_utterance's margin: 300 epochs)."""
    tmp_path = tmp_path_factory.mktemp('amp')
    run = run_deepspeech(*tiny_model_flags(tmp_path / 'amp'), '--train_files', SMOKE_SINGLE_CSV, '--epochs', 300,
                         '--automatic_mixed_precision')
    return tmp_path, run.output


@pytest.mark.slow
def test_overfit_with_the_flag_saves_float32_and_transcribes_without_it(overfit):
    tmp_path, output = overfit
    assert 'Mixed precision: bfloat16 on the CPU' in output
    saved = saved_variables(tmp_path / 'amp' / 'checkpoints')
    float32_run = saved_variables(overfit_single_utterance()[0])     # the same names at any size
    assert set(saved) == set(float32_run)
    assert {name: value.dtype for name, value in saved.items()} == {n: v.dtype for n, v in float32_run.items()}
    transcript = run_deepspeech('--n_hidden', 32, '--checkpoint_dir', tmp_path / 'amp' / 'checkpoints',
                                '--load_evaluate', 'last', '--one_shot_infer', WAV, '--beam_width', 1)
    assert transcript.output.strip().splitlines()[-1] == 'good morning'


@pytest.mark.slow
def test_two_ranks_train_with_the_flag_in_step(tmp_path):
    """The ranks check at each epoch start that they agree on epoch, step and learning rate (a
    divergence fails the run); gradients are allreduced in float32 (the variables' type)."""
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--epochs', 3,
                      '--automatic_mixed_precision')
    assert 'Finished training epoch 2' in run.output
    assert 'Mixed precision: bfloat16 on the CPU' in run.output
