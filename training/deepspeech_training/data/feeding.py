"""tf.data input: this rank's sample records -> audio -> MFCC frames -> padded batches -> context windows.

A dataset is built from a *batch plan* (lists of record indices, see batching.py) computed in Python
epoch by epoch, so only the audio of this rank's batches is ever opened. Each element carries the
sample's index and weight (0 for padding) so metrics can mask padding and results can be gathered by
index. A dataset runs on from epoch to epoch (`endless`): its iterator is initialised once per run,
not once per epoch (that took ~100 ms, twice an epoch with validation: most of an epoch of a small
run; measured with benchmarks/small_runs.py --breakdown), and each epoch's first batches are ready
when it starts. Its batches are all full (a short last batch is padded), so none spans two epochs.
"""
import io
import itertools

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from . import augmentations
from .audio import AudioError, RecordAudio, read_audio
from .headers import mark_stale
from .validation import check_read
from .batching import PADDING
from .sdb import SdbError
from .tar_shards import ShardError


def no_augmentation(domain, tensor, units_per_ms):
    return tensor


def audio_to_features(audio, config, augment=no_augmentation):
    """DeepSpeech 0.9 features: power spectrogram -> 26 MFCCs per 20 ms frame. audio: [samples] float.

    `augment(domain, tensor, units_per_ms)` changes the signal [samples, 1], the spectrogram and the
    features [frames, bins] on the way (training only; see augmentations.py)."""
    sample_rate = config.sample_rate
    frames_per_ms = 1.0 / (1000.0 * config.audio_step_samples / sample_rate)
    signal = augment(augmentations.SIGNAL, tf.expand_dims(audio, -1), sample_rate / 1000.0)
    spectrogram = tf.raw_ops.AudioSpectrogram(input=signal, window_size=config.audio_window_samples,
                                              stride=config.audio_step_samples, magnitude_squared=True)
    # squeeze and expand_dims, not slicing: the DeepSpeech 0.9 client's runtime has no StridedSlice
    spectrogram = tf.expand_dims(augment(augmentations.SPECTROGRAM, tf.squeeze(spectrogram, [0]), frames_per_ms), 0)
    mfccs = tf.raw_ops.Mfcc(spectrogram=spectrogram, sample_rate=sample_rate,
                            upper_frequency_limit=sample_rate / 2, dct_coefficient_count=config.n_input)
    return augment(augmentations.FEATURES, tf.reshape(mfccs, [-1, config.n_input]), frames_per_ms)


def create_overlapping_windows(features, config):
    """[batch, time, n_input] -> [batch, time, 2 * n_context + 1, n_input], zero-padded at both ends.

    Window t holds frames t - n_context .. t + n_context, so the flattened window is offset-major
    (index = (offset + n_context) * n_input + coefficient), as DeepSpeech 0.9's identity-filter
    convolution makes it; framing the padded frames gives the same values ~4x faster (doc/PERFORMANCE.rst)."""
    padded = tf.pad(features, [[0, 0], [config.n_context, config.n_context], [0, 0]])
    return tf.signal.frame(padded, config.window_width, 1, axis=1)


# Marks the error of a file that went bad after the validation pass; tf.data hands it on inside an
# InvalidArgumentError, from which changed_audio_error() takes it back out.
CHANGED_AUDIO = 'audio changed during training'


def read_checked_audio(record_audio, record, config):
    """The samples of a record's audio, a file's checked as the validation pass checks it (validation.check_read)
    on the very bytes decoded. A file that changed since the pass or the header cache knew it is named here,
    before it reaches a batch, and its CSV's header cache marked stale (the next start stats every file)."""
    try:
        if record.offset is not None:
            return record_audio.samples(record, config.sample_rate, config.normalize_sample_rate)
        data = record_audio.raw(record)[1]
        audio_file = io.BytesIO(data)
        audio_file.name = record.audio_path      # (what a reader of paths may name it by)
        audio = record_audio.file_reader(audio_file, config.sample_rate, config.normalize_sample_rate)
        problem = check_read(record, data, audio, config)
        if problem:
            raise AudioError(problem[1])
        return audio
    except (AudioError, SdbError, ShardError, OSError) as error:
        if record.offset is None:
            mark_stale(config.data_cache_dir, record.source)
        raise AudioError('{}: {} row {}: {}: {} (it is not what the check at start found: restore the file or remove '
                         'its row, then rerun the same command to resume from the last checkpoint)'
                         .format(CHANGED_AUDIO, record.source, record.row, record.audio_name, error)) from None


def changed_audio_error(message):
    """Our message in a TensorFlow op error raised by the input generator, or None."""
    for line in message.splitlines():
        if line.startswith('AudioError: ' + CHANGED_AUDIO):
            return line[len('AudioError: '):]
    return None


def endless(feature_cache):
    """Whether a dataset runs on from epoch to epoch: not with a feature cache, whose epochs (lookups,
    --cache_for_epochs) must be the trainer's, while an endless dataset reads ahead into the next epoch."""
    return feature_cache is None


def create_dataset(records, plan_fn, batch_size, config, audio_reader=read_audio, augmenter=None, feature_cache=None):
    """A dataset of batches (indices, weights, features, feature_lengths, labels, label_lengths): the
    batches of `plan_fn(epoch)` (this rank's batches of an epoch), epoch after epoch if it is endless
    (see `endless`) until a plan is empty, else of that one epoch.

    `epoch` and `first_batch` (where an epoch resumes after an elastic reset), fed through the
    placeholders returned alongside the dataset when its iterator is initialised, say where it starts.
    An `augmenter` (training only) changes each sample, seeded by (random seed, epoch, sample index).
    With a `feature_cache` a sample whose features are cached is not read again; the others are
    computed and stored."""
    runs_on = endless(feature_cache)
    epoch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='epoch')
    first_batch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='first_batch')
    silence = np.zeros(config.audio_window_samples, np.float32)
    # one for the generator, whichever of tf.data's threads runs its next step: what a batch's load() read
    # must be there for its samples (containers are shared by threads, RecordAudio's docstring)
    record_audio = RecordAudio(config.read_buffer, audio_reader)
    no_audio, no_features = np.zeros(0, np.float32), np.zeros((0, config.n_input), np.float32)

    def element(index, epoch_value, progress):
        """Sample `index` for the pipeline (`progress`: how far into the epoch, 0..1): its cached
        features, or its (augmented) audio."""
        index = int(index)
        if index == PADDING:
            return -1, 0.0, silence, np.zeros(1, np.int32), 0, 0.0, no_features, False
        record = records[index]
        labels = np.asarray(record.labels, np.int32)
        cached = feature_cache.get(index) if feature_cache else None
        if cached is not None:
            return index, 1.0, no_audio, labels, 0, 0.0, cached, True
        audio = read_checked_audio(record_audio, record, config)
        seed, clock = 0, 0.0
        if augmenter:
            seed = augmentations.sample_seed(augmenter.random_seed, epoch_value, index)
            clock = augmenter.clock(epoch_value, progress)
            audio = augmenter.augment_audio(audio, config.sample_rate, seed, clock)
        return index, 1.0, audio, labels, seed, clock, no_features, False

    def generate(start_epoch, first_batch_value):
        first_batch_value = int(first_batch_value)
        for epoch_value in itertools.count(int(start_epoch)) if runs_on else [int(start_epoch)]:
            plan = plan_fn(epoch_value)
            if not plan:
                return      # the run ends before this epoch (and the cache sees no epoch start for it)
            if feature_cache:
                feature_cache.start_epoch(epoch_value)
            for number, batch in enumerate(plan[first_batch_value:], first_batch_value):
                if not feature_cache:       # (with one, cached samples are not read: each is read when needed)
                    record_audio.load([records[i] for i in batch if i != PADDING])
                padding = [PADDING] * (batch_size - len(batch)) if runs_on else []
                for index in itertools.chain(batch, padding):
                    yield element(index, epoch_value, number / len(plan))
            first_batch_value = 0

    signature = (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float32), tf.TensorSpec([None], tf.float32),
                 tf.TensorSpec([None], tf.int32), tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.float32),
                 tf.TensorSpec([None, config.n_input], tf.float32), tf.TensorSpec([], tf.bool))
    dataset = tf.data.Dataset.from_generator(generate, output_signature=signature, args=(epoch, first_batch))

    def compute_features(audio, labels, seed, clock):
        augment = no_augmentation
        if augmenter and augmenter.graph:
            # ctc_min_frames() in the graph: one frame per label plus a blank between repeats
            min_frames = tf.size(labels) + tf.reduce_sum(tf.cast(tf.equal(labels[1:], labels[:-1]), tf.int32))

            def augment(domain, tensor, units_per_ms):
                return augmenter.augment_tensor(domain, tensor, seed, clock, units_per_ms, min_frames)
        return audio_to_features(audio, config, augment)

    def store(index, features, was_cached):
        if not was_cached:
            feature_cache.put(int(index), features)
        return np.bool_(True)

    def to_features(index, weight, audio, labels, seed, clock, cached_features, is_cached):
        if feature_cache:
            features = tf.cond(is_cached, lambda: cached_features,
                               lambda: compute_features(audio, labels, seed, clock))
            stored = tf.numpy_function(store, [index, features, is_cached], tf.bool)
            with tf.control_dependencies([stored]):
                features = tf.identity(features)
        else:
            features = compute_features(audio, labels, seed, clock)
        return index, weight, features, tf.shape(features)[0], labels, tf.shape(labels)[0]

    def to_windows(index, weight, features, feature_lengths, labels, label_lengths):
        return (index, weight, create_overlapping_windows(features, config), feature_lengths, labels,
                label_lengths)

    dataset = (dataset.map(to_features, num_parallel_calls=tf.data.AUTOTUNE)
               .padded_batch(batch_size, padded_shapes=([], [], [None, config.n_input], [], [None], []))
               .map(to_windows, num_parallel_calls=tf.data.AUTOTUNE)
               .prefetch(tf.data.AUTOTUNE)
               .with_options(without_autotune_model()))
    return dataset, epoch, first_batch


def without_autotune_model():
    """Options without tf.data's autotuning model. Its thread (one per iterator) can miss the session's
    cancellation in TensorFlow 2.15 and sleep out its optimisation period, which doubles as the run goes on:
    closing the session (an iterator's end joins that thread) then waited for it, up to 18 s measured after
    a SIGTERM, over 30 s in issue 44 (tests/test_faults.py). Without the model, AUTOTUNE means one call per
    core and a prefetch buffer that grows when the trainer finds it empty; the batches are the same."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options
