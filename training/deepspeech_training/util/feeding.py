"""tf.data input: this rank's sample records -> audio -> MFCC frames -> padded batches -> context windows.

A dataset is built from a *batch plan* (lists of record indices, see batching.py) computed in Python
when its iterator is initialised, so only the audio of this rank's batches is ever opened. Each
element carries the sample's index and weight (0 for evaluation padding) so metrics can mask padding
and results can be gathered by index.
"""
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .audio import AudioError, read_audio
from .batching import PADDING


def audio_to_features(audio, sample_rate, config):
    """DeepSpeech 0.9 features: power spectrogram -> 26 MFCCs per 20 ms frame. audio: [samples] float."""
    spectrogram = tf.raw_ops.AudioSpectrogram(input=tf.expand_dims(audio, -1),
                                              window_size=config.audio_window_samples,
                                              stride=config.audio_step_samples, magnitude_squared=True)
    mfccs = tf.raw_ops.Mfcc(spectrogram=spectrogram, sample_rate=sample_rate,
                            upper_frequency_limit=sample_rate / 2, dct_coefficient_count=config.n_input)
    return tf.reshape(mfccs, [-1, config.n_input])


def create_overlapping_windows(features, config):
    """[batch, time, n_input] -> [batch, time, 2 * n_context + 1, n_input], zero-padded at both ends.

    A convolution with an identity filter, as DeepSpeech 0.9 does it, so the flattened window is
    offset-major: index = (offset + n_context) * n_input + coefficient."""
    width = config.window_width
    eye = np.eye(width * config.n_input).reshape(width, config.n_input, width * config.n_input)
    windows = tf.nn.conv1d(features, filters=tf.constant(eye, tf.float32), stride=1, padding='SAME')
    return tf.reshape(windows, [tf.shape(features)[0], -1, width, config.n_input])


def frame_count(n_samples, config):
    """Number of MFCC frames AudioSpectrogram makes of `n_samples` audio samples."""
    if n_samples < config.audio_window_samples:
        return 0
    return 1 + (n_samples - config.audio_window_samples) // config.audio_step_samples


# Marks the error of a file that went bad after the validation pass; tf.data hands it on inside an
# InvalidArgumentError, from which changed_audio_error() takes it back out.
CHANGED_AUDIO = 'audio changed during training'


def read_checked_audio(audio_reader, record, sample_rate, normalize_sample_rate):
    try:
        return audio_reader(record.audio_path, sample_rate, normalize_sample_rate)
    except (AudioError, OSError) as error:
        raise AudioError('{}: {} row {}: {}: {} (it passed the check at start: restore the file or remove its row, '
                         'then rerun the same command to resume from the last checkpoint)'
                         .format(CHANGED_AUDIO, record.source, record.row, record.audio_path, error)) from None


def changed_audio_error(message):
    """Our message in a TensorFlow op error raised by the input generator, or None."""
    for line in message.splitlines():
        if line.startswith('AudioError: ' + CHANGED_AUDIO):
            return line[len('AudioError: '):]
    return None


def create_dataset(records, plan_fn, batch_size, config, sample_rate, normalize_sample_rate,
                   audio_reader=read_audio):
    """A dataset of batches (indices, weights, features, feature_lengths, labels, label_lengths).

    `plan_fn(epoch)` gives this rank's batches for an epoch; `epoch` and `first_batch` (where an epoch
    resumes after an elastic reset) are fed through the placeholders returned alongside the dataset
    when its iterator is initialised."""
    epoch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='epoch')
    first_batch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='first_batch')
    silence = np.zeros(config.audio_window_samples, np.float32)

    def generate(epoch_value, first_batch_value):
        for batch in plan_fn(int(epoch_value))[int(first_batch_value):]:
            for index in batch:
                if index == PADDING:
                    yield -1, 0.0, silence, np.zeros(1, np.int32)
                else:
                    record = records[index]
                    audio = read_checked_audio(audio_reader, record, sample_rate, normalize_sample_rate)
                    yield index, 1.0, audio, np.asarray(record.labels, np.int32)

    signature = (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float32),
                 tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int32))
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature,
                                             args=(epoch, first_batch))

    def to_features(index, weight, audio, labels):
        features = audio_to_features(audio, sample_rate, config)
        return index, weight, features, tf.shape(features)[0], labels, tf.shape(labels)[0]

    def to_windows(index, weight, features, feature_lengths, labels, label_lengths):
        return (index, weight, create_overlapping_windows(features, config), feature_lengths, labels,
                label_lengths)

    dataset = (dataset.map(to_features, num_parallel_calls=tf.data.AUTOTUNE)
               .padded_batch(batch_size, padded_shapes=([], [], [None, config.n_input], [], [None], []))
               .map(to_windows, num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE))
    return dataset, epoch, first_batch
