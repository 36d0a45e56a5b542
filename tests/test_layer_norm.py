"""--layer_norm as DeepSpeech 0.9: layer normalisation after layers 1-3 and 5, its variables named as
tf.contrib.layers.layer_norm named them, so DeepSpeech checkpoints trained with it load here and ours there;
the exported model runs in the released clients."""
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from tests.helpers.suite import (OVERFIT_N_HIDDEN, SMOKE_SINGLE_CSV, overfit_single_utterance, run_deepspeech,
                                 settings_from_args, tiny_model_flags)
from test_export import CLIENT_MODELS, GREEDY, WAV, run_client_command

N_HIDDEN = 64
NORMALISED_LAYERS = ('layer_1', 'layer_2', 'layer_3', 'layer_5')


def test_layer_norm_normalises_each_row_then_scales_and_shifts():
    from deepspeech_training.model import layer_norm
    rows = np.random.RandomState(0).uniform(0, 20, (5, 7)).astype(np.float32)
    with tf.Graph().as_default(), tfv1.Session() as session:
        output = layer_norm(tf.constant(rows))
        beta, gamma = sorted(tfv1.global_variables(), key=lambda v: v.op.name)
        assert [beta.op.name, gamma.op.name] == ['LayerNorm/beta', 'LayerNorm/gamma']
        session.run(tfv1.global_variables_initializer())
        session.run([beta.assign(np.arange(7, dtype=np.float32)), gamma.assign(np.full(7, 3, np.float32))])
        expected = (rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + 1e-12) * 3 + np.arange(7)
        np.testing.assert_allclose(session.run(output), expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """Overfit one utterance with --layer_norm (150 epochs at a higher rate decode it here in ~10 s;
    200 leave a margin), export .pb/.pbmm/.tflite, and transcribe with --one_shot_infer."""
    tmp_path = tmp_path_factory.mktemp('layer_norm')
    run = run_deepspeech(*tiny_model_flags(tmp_path, N_HIDDEN), '--layer_norm', '--train_files', SMOKE_SINGLE_CSV,
                         '--epochs', 200, '--learning_rate', 0.003, '--export_dir', tmp_path / 'export',
                         '--export_tflite', '--one_shot_infer', WAV)
    return tmp_path, run.output.strip().splitlines()[-1]


@pytest.mark.slow
def test_layer_norm_checkpoint_holds_deepspeechs_variables(trained):
    checkpoint = tf.train.load_checkpoint(str(trained[0] / 'checkpoints' / 'train-200'))
    shapes = {name: shape for name, shape in checkpoint.get_variable_to_shape_map().items() if 'LayerNorm' in name}
    assert shapes == {'{}/LayerNorm/{}{}'.format(layer, variable, slot): [N_HIDDEN] for layer in NORMALISED_LAYERS
                      for variable in ('beta', 'gamma') for slot in ('', '/Adam', '/Adam_1')}
    assert trained[1] == 'good morning'


@pytest.mark.slow
def test_layer_norm_checkpoint_reloads_only_with_the_flag(trained):
    """With the flag, loaded anew in this process and transcribed as --one_shot_infer does (evaluate.transcribe);
    without it, a run stops with the fix."""
    from tensorflow.python.eager import context
    from deepspeech_training.decoding import make_decoder
    from deepspeech_training.evaluate import transcribe
    checkpoint_flags = ['--n_hidden', N_HIDDEN, '--checkpoint_dir', trained[0] / 'checkpoints']
    settings, _ = settings_from_args(*checkpoint_flags, '--layer_norm')
    with context.graph_mode():
        assert transcribe(settings, [WAV], make_decoder(settings)) == [trained[1]]
    without = run_deepspeech(*checkpoint_flags, '--one_shot_infer', WAV, check=False)
    assert without.returncode != 0
    assert 'was trained with --layer_norm' in without.output and 'add --layer_norm' in without.output


@pytest.mark.slow
def test_a_checkpoint_without_layer_norm_says_so_when_the_flag_is_given(tmp_path):
    """A copy of the run's shared model (suite.overfit_single_utterance, trained without the flag) resumed
    with it."""
    shutil.copytree(str(overfit_single_utterance()[0]), str(tmp_path / 'checkpoints'))
    run = run_deepspeech(*tiny_model_flags(tmp_path, OVERFIT_N_HIDDEN), '--train_files', SMOKE_SINGLE_CSV,
                         '--epochs', 1, '--layer_norm', check=False)
    assert run.returncode != 0 and 'trained without --layer_norm' in run.output


@pytest.mark.slow
@pytest.mark.parametrize('client, model', CLIENT_MODELS)
def test_layer_norm_model_runs_in_the_released_clients(trained, client, model):
    output = run_client_command(client, trained[0] / 'export' / ('output_graph.' + model), WAV, *GREEDY)
    assert output.strip().splitlines()[-2] == trained[1]
