"""The one seam between training and Horovod; the only module that imports horovod.

`init(use_horovod)` returns a `Single` (one process) or a `Horovod` object with the same methods, so
train() reads the same for both: the single-process path is the distributed path with size 1.
Values that decide something (dev loss, early stop, best model) go through `sum`, so every rank takes
the same decision at the same step; `check_same` guards that they did.
"""
import os

import numpy as np
import tensorflow.compat.v1 as tfv1

INSTALL_HINT = ('--horovod needs Horovod built against this TensorFlow: run bin/setup.sh (it builds '
                'horovod==0.28.1 with Gloo), or HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 pip install '
                '--no-build-isolation horovod==0.28.1')


class Single:
    """One process: every collective is the identity."""
    rank = 0
    size = 1
    local_rank = 0
    local_size = 1

    @property
    def is_chief(self):
        return self.rank == 0

    def threads_per_process(self):
        """(intra, inter) op threads; 0 lets TensorFlow use the whole machine."""
        return 0, 0

    def visible_gpu(self):
        """The GPU this process may use ('' = all of them)."""
        return ''

    def wrap_optimizer(self, optimizer, fp16_compression=False, backward_passes_per_step=1):
        return optimizer

    def broadcast_op(self):
        return tfv1.no_op(name='broadcast_noop')

    def sum(self, session, values):
        return np.asarray(values, np.float64)

    def gather(self, session, obj):
        return [obj]

    def check_same(self, session, what, values):
        """Raise if the ranks disagree on `values` (a guard: a disagreement means a hang next)."""


class RankDivergenceError(RuntimeError):
    pass


class Horovod(Single):
    """Several processes started by horovodrun or mpirun."""

    def __init__(self, hvd):
        self.hvd = hvd
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()
        self._sum_ops = {}

    def threads_per_process(self):
        # N ranks on one host each using every core oversubscribe it: share the cores out.
        share = max(1, (os.cpu_count() or 1) // self.local_size)
        return share, max(1, share // 2)

    def visible_gpu(self):
        return str(self.local_rank)

    def wrap_optimizer(self, optimizer, fp16_compression=False, backward_passes_per_step=1):
        # Gradients must come from this wrapper's compute_gradients (minimize() does): gradients taken
        # with tf.gradients and handed to apply_gradients would never be averaged.
        return self.hvd.DistributedOptimizer(
            optimizer, compression=self.hvd.Compression.fp16 if fp16_compression else self.hvd.Compression.none,
            backward_passes_per_step=backward_passes_per_step, average_aggregated_gradients=True)

    def broadcast_op(self):
        return self.hvd.broadcast_global_variables(0)

    def sum(self, session, values):
        """Elementwise sum over ranks of a float vector; ops are built once per length, in the same
        order on every rank (so their names match)."""
        values = np.asarray(values, np.float64).reshape(-1)
        if values.size not in self._sum_ops:
            with session.graph.as_default():
                placeholder = tfv1.placeholder(tfv1.float64, [values.size])
                reduced = self.hvd.allreduce(placeholder, op=self.hvd.Sum,
                                             name='seam_sum_{}'.format(values.size))
            self._sum_ops[values.size] = (placeholder, reduced)
        placeholder, reduced = self._sum_ops[values.size]
        return session.run(reduced, {placeholder: values})

    def gather(self, session, obj):
        from horovod.tensorflow.functions import allgather_object
        return allgather_object(obj, session=session, name='seam_gather')

    def check_same(self, session, what, values):
        values = np.asarray(values, np.float64)
        mean = self.sum(session, values) / self.size
        spread = self.sum(session, np.abs(values - mean))
        if np.any(spread > 1e-9 * np.maximum(1.0, np.abs(mean))):
            raise RankDivergenceError('ranks disagree on {}: this rank has {}, the mean over ranks is {}'
                                      .format(what, values.tolist(), mean.tolist()))


def init(use_horovod):
    if not use_horovod:
        return Single()
    try:
        import horovod.tensorflow as hvd
    except ImportError as error:
        raise SystemExit('{} ({})'.format(INSTALL_HINT, error))
    return Horovod(hvd)
