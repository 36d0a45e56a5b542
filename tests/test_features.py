"""Features as DeepSpeech 0.9 computes them, on the bundled real speech."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tfv1

from deepspeech_training.data.audio import AudioError, read_audio
from deepspeech_training.config import N_CONTEXT, N_INPUT, settings_from_args
from deepspeech_training.data.audio import frame_count
from deepspeech_training.data.feeding import audio_to_features, create_dataset, create_overlapping_windows

CONFIG = settings_from_args(["--n_hidden", 8]).model   # 16 kHz, 32 ms windows, 20 ms steps


def run(tensor, feed=None):
    with tfv1.Session(graph=tensor.graph) as session:
        return session.run(tensor, feed)


def test_mfcc_frames_are_26_coefficients_every_20_ms(speech):
    with tfv1.Graph().as_default():
        features = run(audio_to_features(tfv1.constant(speech), CONFIG))
    assert features.shape == (frame_count(len(speech), CONFIG), 26)
    assert features.shape[0] == 1 + (len(speech) - 512) // 320
    assert np.isfinite(features).all() and features.std() > 0


def test_windows_are_19_frames_offset_major_zero_padded():
    frames = np.arange(5 * N_INPUT, dtype=np.float32).reshape(1, 5, N_INPUT)
    with tfv1.Graph().as_default():
        windows = run(create_overlapping_windows(tfv1.constant(frames), CONFIG))
    assert windows.shape == (1, 5, 19, 26)
    # the centre (offset 0, index 9) of window t is frame t; offset +1 is frame t+1
    np.testing.assert_array_equal(windows[0, 2, 9], frames[0, 2])
    np.testing.assert_array_equal(windows[0, 2, 10], frames[0, 3])
    np.testing.assert_array_equal(windows[0, 0, 8], np.zeros(26))   # before the first frame
    np.testing.assert_array_equal(windows[0, 4, 10], np.zeros(26))  # after the last frame
    flat = windows.reshape(1, 5, 19 * 26)
    assert flat[0, 2, (1 + 9) * 26 + 3] == frames[0, 3, 3]


def test_windows_equal_deepspeech_identity_filter_convolution():
    """DeepSpeech 0.9 builds the windows as a conv1d with an identity filter; ours must match it exactly."""
    frames = np.random.RandomState(1).randn(3, 40, N_INPUT).astype(np.float32)
    width = 2 * N_CONTEXT + 1
    eye = np.eye(width * N_INPUT).reshape(width, N_INPUT, width * N_INPUT).astype(np.float32)
    with tfv1.Graph().as_default():
        windows = run(create_overlapping_windows(tfv1.constant(frames), CONFIG))
        reference = run(tfv1.nn.conv1d(tfv1.constant(frames), filters=eye, stride=1, padding='SAME'))
    np.testing.assert_array_equal(windows.reshape(reference.shape), reference)


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
    from deepspeech_training.session import session_config
    rank = distributed.Horovod.__new__(distributed.Horovod)   # the seam without hvd.init()
    rank.local_rank, rank.local_size = 1, 2
    assert session_config(visible_gpu=rank.visible_gpu()).gpu_options.visible_device_list == '1'
    assert session_config(visible_gpu=distributed.Single().visible_gpu()).gpu_options.visible_device_list == ''


# (graph mode reads the options set by with_options, the ones its iterators run with)
@pytest.mark.filterwarnings('ignore:To make it possible to preserve tf.data options')
def test_input_pipeline_has_no_autotuning_thread_to_wait_for_at_session_close():
    """tf.data's autotuning model thread could keep a closing session waiting up to 30 s and more after a
    SIGTERM (issue 44; the timing guard is in test_faults.py, whose short runs stay under that wait)."""
    with tfv1.Graph().as_default():
        dataset, _, _ = create_dataset([], lambda epoch: [], 1, CONFIG)
        assert dataset.options().autotune.enabled is False
