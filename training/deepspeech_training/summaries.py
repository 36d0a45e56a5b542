"""TensorBoard scalars of a training run: the step loss and rate, each epoch's loss, the dev loss."""
import os

import tensorflow.compat.v1 as tfv1


class Summaries:
    """TensorBoard scalars under summary_dir/{train,dev}, written by the chief (asked of `dist` at each
    write: after an elastic reset another process may be rank 0)."""

    def __init__(self, summary_dir, dist):
        self.summary_dir, self.dist, self.writers = summary_dir, dist, {}

    def scalars(self, kind, step, **values):
        if not self.dist.is_chief:
            return
        if kind not in self.writers:
            self.writers[kind] = tfv1.summary.FileWriter(os.path.join(self.summary_dir, kind))
        summary = tfv1.Summary(value=[tfv1.Summary.Value(tag=tag, simple_value=float(value))
                                      for tag, value in values.items()])
        self.writers[kind].add_summary(summary, step)

    def close(self):
        for writer in self.writers.values():
            writer.close()
