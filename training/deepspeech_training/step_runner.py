"""The loop that runs a set's batches through a session: training, validation and testing step through a
set with set_steps, and add the sample losses up (LossTotals) for the progress bar and the epoch line."""
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from .data.feeding import changed_audio_error, endless
from .data.samples import DataError
from .util.logging import Progress


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
