"""Features as DeepSpeech 0.9 computes them, on the bundled real speech."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tfv1

from deepspeech_training.util.audio import AudioError, read_audio
from deepspeech_training.util.config import Config, N_CONTEXT, N_INPUT
from deepspeech_training.model import create_model
from deepspeech_training.util.feeding import audio_to_features, frame_count

CONFIG = Config(alphabet=None, n_input=N_INPUT, n_context=N_CONTEXT, audio_window_samples=512,
                audio_step_samples=320, n_hidden=8, n_classes=29, checkpoint_dir='', load_checkpoint_dir='',
                save_checkpoint_dir='', summary_dir='')


def run(tensor, feed=None):
    with tfv1.Session(graph=tensor.graph) as session:
        return session.run(tensor, feed)


def test_mfcc_frames_are_26_coefficients_every_20_ms(speech):
    with tfv1.Graph().as_default():
        features = run(audio_to_features(tfv1.constant(speech), 16000, CONFIG))
    assert features.shape == (frame_count(len(speech), CONFIG), 26)
    assert features.shape[0] == 1 + (len(speech) - 512) // 320
    assert np.isfinite(features).all() and features.std() > 0


def test_layer_1_on_frames_equals_deepspeech_layer_1_on_its_identity_filter_windows():
    """Training feeds frames and layer 1 convolves them; DeepSpeech 0.9 (and our exported graphs) feed
    19-frame windows, built as a conv1d with an identity filter. Same variables, same logits."""
    frames = np.random.RandomState(1).randn(3, 40, N_INPUT).astype(np.float32)
    width = 2 * N_CONTEXT + 1
    eye = np.eye(width * N_INPUT).reshape(width, N_INPUT, width * N_INPUT).astype(np.float32)
    with tfv1.Graph().as_default():
        windows = tfv1.reshape(tfv1.nn.conv1d(tfv1.constant(frames), filters=eye, stride=1, padding='SAME'),
                               [3, 40, width, N_INPUT])
        lengths = tfv1.constant([40, 31, 7])
        from_frames, _ = create_model(tfv1.constant(frames), lengths, CONFIG, [0.0] * 6)
        with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True):
            from_windows, _ = create_model(windows, lengths, CONFIG, [0.0] * 6)
        with tfv1.Session() as session:
            session.run(tfv1.global_variables_initializer())
            from_frames, from_windows = session.run([from_frames, from_windows])
    assert from_frames.shape == (40, 3, 29)
    np.testing.assert_allclose(from_frames, from_windows, rtol=1e-5, atol=1e-5)


def test_other_sample_rates_are_resampled_or_rejected(tmp_path, speech):
    import soundfile
    path = str(tmp_path / '8k.wav')
    soundfile.write(path, speech[::2], 8000, subtype='PCM_16')
    resampled = read_audio(path, 16000)
    assert abs(len(resampled) - len(speech)) <= 2
    with pytest.raises(AudioError, match='sample rate 8000 Hz, expected 16000 Hz'):
        read_audio(path, 16000, normalize_sample_rate=False)


def test_stereo_and_garbage_files_are_rejected(tmp_path, speech):
    import soundfile
    stereo = str(tmp_path / 'stereo.wav')
    soundfile.write(stereo, np.stack([speech, speech], axis=1), 16000)
    with pytest.raises(AudioError, match='2 channels, expected mono'):
        read_audio(stereo, 16000)
    garbage = tmp_path / 'garbage.wav'
    garbage.write_bytes(b'not a wav file at all')
    with pytest.raises(AudioError, match='cannot decode audio'):
        read_audio(str(garbage), 16000)


def test_each_horovod_rank_sees_only_the_gpu_of_its_local_rank():
    """No GPU here: this checks the plumbing from the seam into the session config only."""
    from deepspeech_training import distributed
    from deepspeech_training.util.config import session_config
    rank = distributed.Horovod.__new__(distributed.Horovod)   # the seam without hvd.init()
    rank.local_rank, rank.local_size = 1, 2
    assert session_config(visible_gpu=rank.visible_gpu()).gpu_options.visible_device_list == '1'
    assert session_config(visible_gpu=distributed.Single().visible_gpu()).gpu_options.visible_device_list == ''
