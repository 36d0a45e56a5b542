"""Geometry and session settings derived from the flags, computed once per process."""
import os
from dataclasses import dataclass

import tensorflow.compat.v1 as tfv1

from .flags import FLAGS, DEFAULT_DATA_HOME
from .text import load_alphabet

N_INPUT = 26      # MFCC coefficients per frame
N_CONTEXT = 9     # frames of context on each side: layer_1 sees 2 * 9 + 1 = 19 frames


@dataclass
class Config:
    alphabet: object
    n_input: int
    n_context: int
    audio_window_samples: int
    audio_step_samples: int
    n_hidden: int
    n_classes: int          # alphabet size + 1: the CTC blank is the last class
    checkpoint_dir: str
    load_checkpoint_dir: str
    save_checkpoint_dir: str
    summary_dir: str
    lstm_impl: str = 'auto'     # model.LSTM_IMPLS

    @property
    def window_width(self):
        return 2 * self.n_context + 1


def config_from_flags():
    """Build the Config; creates no files (directories are made by whoever writes them)."""
    alphabet = load_alphabet(FLAGS.alphabet_config_path, FLAGS.bytes_output_mode)
    checkpoint_dir = FLAGS.checkpoint_dir or os.path.join(DEFAULT_DATA_HOME, 'checkpoints')
    return Config(
        alphabet=alphabet,
        n_input=N_INPUT,
        n_context=N_CONTEXT,
        audio_window_samples=FLAGS.audio_sample_rate * FLAGS.feature_win_len // 1000,
        audio_step_samples=FLAGS.audio_sample_rate * FLAGS.feature_win_step // 1000,
        n_hidden=FLAGS.n_hidden,
        n_classes=alphabet.GetSize() + 1,
        checkpoint_dir=checkpoint_dir,
        load_checkpoint_dir=FLAGS.load_checkpoint_dir or checkpoint_dir,
        save_checkpoint_dir=FLAGS.save_checkpoint_dir or checkpoint_dir,
        summary_dir=FLAGS.summary_dir or os.path.join(DEFAULT_DATA_HOME, 'summaries'),
        lstm_impl=FLAGS.lstm_impl,
    )


def session_config(intra_op_threads=0, inter_op_threads=0, visible_gpu=''):
    """A Session config; 0 threads lets TensorFlow choose (the Horovod seam passes per-rank shares
    and the GPU of each rank)."""
    return tfv1.ConfigProto(
        allow_soft_placement=True,
        intra_op_parallelism_threads=intra_op_threads,
        inter_op_parallelism_threads=inter_op_threads,
        gpu_options=tfv1.GPUOptions(allow_growth=True, visible_device_list=visible_gpu))
