"""Graph pieces shared by training, validation and testing: one reinitialisable iterator over
several sets, the forward pass with per-sample CTC loss, and the loop that runs a set's batches."""
from dataclasses import dataclass
from typing import Callable, List

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .model import create_model, ctc_loss, dropout_placeholders, lstm_function
from .util.feeding import changed_audio_error, create_dataset
from .util.logging import Progress
from .util.samples import DataError


@dataclass
class InputSet:
    """One set (a CSV, or the merged train CSVs) ready to feed: its records and batch plan."""
    name: str
    records: list
    plan: Callable[[int], List[list]]     # epoch -> this rank's batches of record indices
    batch_size: int
    augmenter: object = None                # augmentations.Augmenter, for training only
    feature_cache: object = None            # feature_cache.FeatureCache, for training only
    initializer: object = None
    epoch: object = None
    make_dataset: Callable = create_dataset   # create_dataset's signature (a benchmark feeds cached batches)
    first_batch: object = None

    def n_batches(self, epoch=0):
        return len(self.plan(epoch))


@dataclass
class Forward:
    indices: object
    weights: object
    losses: object          # per sample, 0 where the weight is 0
    mean_loss: object
    logits: object          # time-major
    probabilities: object   # softmax of the logits, batch-major, for the CTC decoder
    seq_length: object
    dropout_rates: list


def build_input(sets, config, sample_rate, normalize_sample_rate):
    """Datasets for all `sets` behind one iterator; fills in each set's initializer and epoch feed."""
    datasets = []
    for input_set in sets:
        dataset, input_set.epoch, input_set.first_batch = input_set.make_dataset(
            input_set.records, input_set.plan, input_set.batch_size, config, sample_rate, normalize_sample_rate,
            augmenter=input_set.augmenter, feature_cache=input_set.feature_cache)
        datasets.append(dataset)
    iterator = tfv1.data.Iterator.from_structure(tfv1.data.get_output_types(datasets[0]),
                                                 tfv1.data.get_output_shapes(datasets[0]))
    for input_set, dataset in zip(sets, datasets):
        input_set.initializer = iterator.make_initializer(dataset)
    return iterator.get_next()


def build_forward(batch, config, relu_clip):
    indices, weights, windows, seq_length, labels, label_lengths = batch
    dropout_rates = dropout_placeholders()
    logits, _ = create_model(windows, seq_length, config, dropout_rates, relu_clip,
                             lstm=lstm_function(config.lstm_impl))
    losses = ctc_loss(logits, seq_length, labels, label_lengths) * weights
    mean_loss = tf.reduce_sum(losses) / tf.maximum(tf.reduce_sum(weights), 1.0)
    probabilities = tf.nn.softmax(tf.transpose(logits, [1, 0, 2]))
    return Forward(indices, weights, losses, mean_loss, logits, probabilities, seq_length, dropout_rates)


def run_set(session, input_set, forward, epoch=0, extra_fetches=None, feed=None, on_batch=None, first_batch=0):
    """Run the batches of `input_set` from `first_batch` on; returns (sum of sample losses, sample count).

    `on_batch(values)` sees each step's fetched values (a dict with 'indices', 'weights', 'losses' and
    the `extra_fetches`)."""
    session.run(input_set.initializer, {input_set.epoch: epoch, input_set.first_batch: first_batch})
    fetches = dict(indices=forward.indices, weights=forward.weights, losses=forward.losses,
                   **(extra_fetches or {}))
    progress = Progress(input_set.name, input_set.n_batches(epoch))
    loss_sum, count, step = 0.0, 0.0, first_batch
    while True:
        try:
            values = session.run(fetches, feed)
        except tf.errors.OutOfRangeError:
            break
        except tf.errors.InvalidArgumentError as error:
            changed = changed_audio_error(error.message)
            if changed:
                raise DataError([changed]) from None
            raise
        step += 1
        loss_sum += float(np.sum(values['losses']))
        count += float(np.sum(values['weights']))
        if on_batch:
            on_batch(values)
        progress.update(step, loss_sum / max(count, 1.0))
    progress.finish()
    return loss_sum, count
