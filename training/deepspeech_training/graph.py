"""Graph pieces shared by training, validation and testing: an iterator per set behind one input
(the set is chosen by feeding its iterator's handle), the forward pass with per-sample CTC loss, and
the loop that runs a set's batches."""
from dataclasses import dataclass
from typing import Callable, List

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .model import create_model, ctc_loss, dropout_placeholders, lstm_function
from .util.feeding import changed_audio_error, create_dataset, endless
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
    make_dataset: Callable = create_dataset   # create_dataset's signature (a benchmark feeds cached batches)
    # Filled in by build_input: the initializer of this set's iterator, run with `epoch` and
    # `first_batch` fed, says where the set's endless dataset starts; `string_handle` and `selector`
    # (the placeholder to feed it to) make the input read from this set.
    initializer: object = None
    epoch: object = None
    first_batch: object = None
    string_handle: object = None
    selector: object = None
    # (epoch, first batch) the iterator yields next, None when unknown (never started, or a run of its
    # batches did not finish): run_set starts the iterator there only when it is somewhere else.
    position: tuple = None
    handle: bytes = None
    end_epoch: int = None   # the first epoch the run will not reach (None: not known)

    def n_batches(self, epoch=0):
        return len(self.plan(epoch))

    def planned(self, epoch):
        """This set's batches of `epoch`, none from `end_epoch` on: the dataset ends there instead of
        reading ahead into an epoch that never comes."""
        return [] if self.end_epoch is not None and epoch >= self.end_epoch else self.plan(epoch)

    def select(self, session, feed=None):
        """`feed` plus what makes the input read this set's next batch."""
        if self.handle is None:
            self.handle = session.run(self.string_handle)
        feed = dict(feed or {})
        feed[self.selector] = self.handle
        return feed


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


def seed_graph(seed, rank):
    """The graph-level seed of rank `rank`: with one seed for all, row (t, b) of every rank would get the
    same dropout mask at every step, noise correlated across the global batch. The variables are
    broadcast from rank 0 anyway, and data order and augmentation are seeded by sample, not by this.
    (Fixed when the graph is built: after an elastic reset renumbers the ranks, two may share one.)"""
    tfv1.set_random_seed(seed + rank)


def build_input(sets, config, sample_rate, normalize_sample_rate):
    """One batch input for all `sets`, each with an iterator of its own (filled in on each set); it reads
    the first set unless another's handle is fed (InputSet.select)."""
    iterators = []
    for input_set in sets:
        dataset, input_set.epoch, input_set.first_batch = input_set.make_dataset(
            input_set.records, input_set.planned, input_set.batch_size, config, sample_rate, normalize_sample_rate,
            augmenter=input_set.augmenter, feature_cache=input_set.feature_cache)
        iterator = tfv1.data.make_initializable_iterator(dataset)
        input_set.initializer, input_set.string_handle = iterator.initializer, iterator.string_handle()
        iterators.append(iterator)
    selector = tfv1.placeholder_with_default(sets[0].string_handle, [], 'input_set')
    for input_set in sets:
        input_set.selector, input_set.position, input_set.handle = selector, None, None
    return tfv1.data.Iterator.from_string_handle(selector, tfv1.data.get_output_types(iterators[0]),
                                                 tfv1.data.get_output_shapes(iterators[0])).get_next()


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
    """Run the batches of `input_set`'s `epoch` from `first_batch` on; returns (sum of sample losses,
    sample count).

    `on_batch(values)` sees each step's fetched values (a dict with 'indices', 'weights', 'losses' and
    the `extra_fetches`)."""
    if input_set.position != (epoch, first_batch):
        session.run(input_set.initializer, {input_set.epoch: epoch, input_set.first_batch: first_batch})
    input_set.position = None
    fetches = dict(indices=forward.indices, weights=forward.weights, losses=forward.losses,
                   **(extra_fetches or {}))
    feed = input_set.select(session, feed)
    n_batches = input_set.n_batches(epoch)
    progress = Progress(input_set.name, n_batches)
    loss_sum, count = 0.0, 0.0
    for step in range(first_batch + 1, n_batches + 1):
        try:
            values = session.run(fetches, feed)
        except tf.errors.InvalidArgumentError as error:
            changed = changed_audio_error(error.message)
            if changed:
                raise DataError([changed]) from None
            raise
        loss_sum += float(np.sum(values['losses']))
        count += float(np.sum(values['weights']))
        if on_batch:
            on_batch(values)
        progress.update(step, loss_sum / max(count, 1.0))
    progress.finish()
    input_set.position = (epoch + 1, 0) if endless(input_set.feature_cache) else None
    return loss_sum, count
