"""Graph pieces shared by training, validation and testing: an iterator per set behind one input
(the set is chosen by feeding its iterator's handle), the forward pass with per-sample CTC loss, and
the loop that runs a set's batches."""
from dataclasses import dataclass

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .model import create_model, ctc_loss, dropout_placeholders, lstm_function
from .data.feeding import changed_audio_error, endless
from .util.logging import Progress
from .data.samples import DataError


@dataclass
class SetIterator:
    """The iterator build_input made for one InputSet, and where it stands.

    Its initializer, run with `epoch` and `first_batch` fed, says where the set's (endless) dataset
    starts; feeding `handle` to `selector` makes the input read this set."""
    input_set: object       # data.plans.InputSet
    end_epoch: int = None   # the first epoch the run will not reach (None: not known)
    initializer: object = None
    epoch: object = None
    first_batch: object = None
    string_handle: object = None
    selector: object = None
    handle: bytes = None
    # (epoch, first batch) the iterator yields next, None when unknown (never started, or a run of its
    # batches did not finish): set_steps starts the iterator there only when it is somewhere else.
    position: tuple = None

    @property
    def name(self):
        return self.input_set.name

    def n_batches(self, epoch=0):
        return self.input_set.n_batches(epoch)

    def planned(self, epoch):
        """This set's batches of `epoch`, none from `end_epoch` on: the dataset ends there instead of
        reading ahead into an epoch that never comes."""
        return [] if self.end_epoch is not None and epoch >= self.end_epoch else self.input_set.plan(epoch)

    def select(self, session, feed=None):
        """`feed` plus what makes the input read this set's next batch."""
        if self.handle is None:
            self.handle = session.run(self.string_handle)
        feed = dict(feed or {})
        feed[self.selector] = self.handle
        return feed

    def restart(self, end_epoch):
        """Forget where the iterator stands (after an elastic reset the plans are the new ranks'), and
        end it before `end_epoch`."""
        self.position, self.end_epoch = None, end_epoch


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


def build_input(sets, config):
    """One batch input for all `sets`: (the batch tensors, a SetIterator per set). It reads the first
    set unless another's handle is fed (SetIterator.select)."""
    iterators = []
    for input_set in sets:
        iterator = SetIterator(input_set)
        dataset, iterator.epoch, iterator.first_batch = input_set.make_dataset(
            input_set.records, iterator.planned, input_set.batch_size, config, augmenter=input_set.augmenter,
            feature_cache=input_set.feature_cache)
        tf_iterator = tfv1.data.make_initializable_iterator(dataset)
        iterator.initializer, iterator.string_handle = tf_iterator.initializer, tf_iterator.string_handle()
        iterators.append(iterator)
    selector = tfv1.placeholder_with_default(iterators[0].string_handle, [], 'input_set')
    for iterator in iterators:
        iterator.selector = selector
    batch = tfv1.data.Iterator.from_string_handle(selector, tfv1.data.get_output_types(dataset),
                                                  tfv1.data.get_output_shapes(dataset)).get_next()
    return batch, iterators


def build_forward(batch, config, mixed_precision=None):
    """The model on `batch`, its CTC loss and probabilities; `mixed_precision`: --automatic_mixed_precision's
    16-bit type (None: float32)."""
    indices, weights, windows, seq_length, labels, label_lengths = batch
    dropout_rates = dropout_placeholders()
    logits, _ = create_model(windows, seq_length, config, dropout_rates,
                             lstm=lstm_function(config.lstm_impl, mixed_precision))
    losses = ctc_loss(logits, seq_length, labels, label_lengths) * weights
    mean_loss = tf.reduce_sum(losses) / tf.maximum(tf.reduce_sum(weights), 1.0)
    probabilities = tf.nn.softmax(tf.transpose(logits, [1, 0, 2]))
    return Forward(indices, weights, losses, mean_loss, logits, probabilities, seq_length, dropout_rates)


@dataclass
class LossTotals:
    """Sum of sample losses and sample count (padding weighs 0) over the steps seen so far."""
    loss_sum: float = 0.0
    count: float = 0.0

    def add(self, values):
        self.loss_sum += float(np.sum(values['losses']))
        self.count += float(np.sum(values['weights']))

    @property
    def mean(self):
        return self.loss_sum / max(self.count, 1.0)


def set_steps(session, iterator, forward, epoch=0, fetches=None, feed=None, first_batch=0, totals=None,
              show_loss=True, batch_feed=None):
    """Run the batches of `iterator`'s set in `epoch` from `first_batch` on, yielding each step's fetched
    values (a dict with 'indices', 'weights', 'losses' and the `fetches`), which `totals` (LossTotals)
    adds up for the progress bar (with the loss unless `show_loss` is False: a set without references)
    and the caller. `batch_feed(batch)`, if given, adds to `feed` what changes from batch to batch."""
    if iterator.position != (epoch, first_batch):
        session.run(iterator.initializer, {iterator.epoch: epoch, iterator.first_batch: first_batch})
    iterator.position = None
    fetches = dict(indices=forward.indices, weights=forward.weights, losses=forward.losses, **(fetches or {}))
    feed = iterator.select(session, feed)
    totals = totals if totals is not None else LossTotals()
    n_batches = iterator.n_batches(epoch)
    progress = Progress(iterator.name, n_batches, show_loss=show_loss)
    for step in range(first_batch + 1, n_batches + 1):
        try:
            values = session.run(fetches, {**feed, **batch_feed(step - 1)} if batch_feed else feed)
        except tf.errors.InvalidArgumentError as error:
            changed = changed_audio_error(error.message)
            if changed:
                raise DataError([changed]) from None
            raise
        totals.add(values)
        yield values
        progress.update(step, totals.mean if show_loss else None)
    progress.finish()
    iterator.position = (epoch + 1, 0) if endless(iterator.input_set.feature_cache) else None


def run_set(session, iterator, forward, epoch=0):
    """The LossTotals of one pass over `iterator`'s set in `epoch` (validation)."""
    totals = LossTotals()
    for _ in set_steps(session, iterator, forward, epoch, totals=totals):
        pass
    return totals
