"""An in-process stand-in of the Horovod seam: N `dist` objects for N threads of one process whose
collectives really combine the threads' values, so the collective logic of the trainer (sums that
decide, agreement guards, chief-only writes, averaged gradients, the sync from rank 0) runs in seconds
without horovodrun.

    ranks = threaded_ranks(2)
    results = run_ranks(ranks, lambda dist: Trainer(dist, ...).run(''))

Every collective meets the other threads at a `Rendezvous` (a barrier with one slot per rank). Each
wait there has a timeout, and a rank that fails aborts the waits of the others, so ranks that diverge
(one in a collective the others never enter) make the test fail instead of hanging.

What is the product's own and what is stood in: `ThreadedDist` is a `distributed.Horovod` whose wire
is replaced (sum, gather, gather_objects, broadcast_object, the gradient allreduce, broadcast_op, size); the logic
built on the wire (check_same's guard, the BroadcastState sync of training_state, run) is Horovod's,
unchanged. Inside session.run the collectives are tf.numpy_function ops; the sessions run them in the
calling thread (inter_op_parallelism_threads -1), so a rank blocked in one never starves another rank.
Python collectives (sum, gather...) go straight to the rendezvous: the session is not needed.

TensorFlow's default graph is per thread, so each rank builds its own graph; `run_ranks` starts each
thread in graph mode (eager execution is a per-thread mode too: the rest of the process is untouched).
"""
import pickle
import threading

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from tensorflow.python.eager import context

from deepspeech_training import distributed

TIMEOUT = 60     # seconds a rank waits for the others at one collective


class RendezvousError(RuntimeError):
    """The ranks did not all reach the same collective in time (or one of them failed)."""


class Rendezvous:
    """Where N threads exchange one value each: `exchange(rank, value, what)` returns every rank's
    value, in rank order, once all N gave theirs; ranks met in different collectives (`what`) fail.
    An exchange that completed returns even if a rank fails right after it (a failure makes only the
    exchanges not complete yet fail)."""

    def __init__(self, size, timeout=TIMEOUT):
        self.size, self.timeout = size, timeout
        self.condition = threading.Condition()
        self.round, self.given, self.done, self.unread = 0, {}, {}, {}
        self.failure = None

    def exchange(self, rank, value, what='a collective'):
        with self.condition:
            this_round = self.round
            if self.failure is None:
                self.given[rank] = (what, value)
                if len(self.given) == self.size:
                    self.done[this_round] = [self.given[r] for r in range(self.size)]
                    self.unread[this_round] = self.size
                    self.round, self.given = self.round + 1, {}
                    self.condition.notify_all()
                elif not self.condition.wait_for(lambda: self.round > this_round or self.failure, self.timeout):
                    self.failure = 'rank {} waited {} s in {} for the other ranks'.format(rank, self.timeout, what)
                    self.condition.notify_all()
            if self.round == this_round:
                raise RendezvousError('{} (rank {} in {})'.format(self.failure, rank, what))
            given = self.done[this_round]
            self.unread[this_round] -= 1
            if not self.unread[this_round]:
                del self.done[this_round], self.unread[this_round]
        if len({w for w, _ in given}) > 1:    # Horovod would hang or mix up tensors here
            raise RendezvousError('the ranks met in different collectives: {}'.format(
                ', '.join('rank {} in {}'.format(r, w) for r, (w, _) in enumerate(given))))
        return [value for _, value in given]

    def abort(self, why='a rank failed'):
        """Make every exchange not complete yet fail at once."""
        with self.condition:
            self.failure = self.failure or why
            self.condition.notify_all()


class AveragingOptimizer(tfv1.train.Optimizer):
    """Horovod's DistributedOptimizer in miniature: compute_gradients (and so minimize) returns every
    gradient averaged over the ranks, through one numpy_function per step that meets the other ranks."""

    def __init__(self, optimizer, dist):
        super().__init__(use_locking=False, name='Averaging' + optimizer.get_name())
        self._optimizer, self._dist = optimizer, dist

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = [(g, v) for g, v in self._optimizer.compute_gradients(*args, **kwargs) if g is not None]
        gradients = [tf.convert_to_tensor(g) for g, _ in grads_and_vars]
        averaged = tf.numpy_function(self._mean, gradients, [g.dtype for g in gradients], name='threaded_allreduce')
        for mean, gradient in zip(averaged, gradients):
            mean.set_shape(gradient.shape)
        return list(zip(averaged, [v for _, v in grads_and_vars]))

    def _mean(self, *gradients):
        every_rank = self._dist.rendezvous.exchange(self._dist.rank, gradients, 'the gradient allreduce')
        return [(sum(rank[i] for rank in every_rank) / len(every_rank)).astype(gradient.dtype)
                for i, gradient in enumerate(gradients)]

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class ThreadedDist(distributed.Horovod):
    """Rank `rank` of `rendezvous.size` threads on one host. `calls` records each Python collective
    as (name, this rank's values, the result) for tests to check what was combined."""

    def __init__(self, rank, rendezvous):       # not Horovod's: there is no hvd to init
        self.rendezvous = rendezvous
        self.rank, self.size = rank, rendezvous.size
        self.local_rank, self.local_size = rank, rendezvous.size
        self.calls = []

    def refresh(self):
        """The ranks never change here."""

    def threads_per_process(self):
        # inter -1: every op of a session.run runs in the calling thread, so a rank waiting in a
        # numpy_function collective blocks only itself (a shared inter-op pool could be filled by it).
        return 1, -1

    def visible_gpu(self):
        return ''

    def _exchange(self, value, what):
        return self.rendezvous.exchange(self.rank, value, what)

    def sum(self, session, values):
        values = np.asarray(values, np.float64).reshape(-1)
        every_rank = self._exchange(values, 'sum')
        if len({v.size for v in every_rank}) != 1:
            raise RendezvousError('ranks summed vectors of different lengths: {}'.format(every_rank))
        result = np.sum(every_rank, axis=0)
        self.calls.append(('sum', values, result))
        return result

    def gather(self, session, obj):
        result = [pickle.loads(p) for p in self._exchange(pickle.dumps(obj), 'gather')]
        self.calls.append(('gather', obj, result))
        return result

    def gather_objects(self, obj):
        return self.gather(None, obj)

    def broadcast_object(self, session, obj):
        result = pickle.loads(self._exchange(pickle.dumps(obj) if self.rank == 0 else None, 'broadcast_object')[0])
        self.calls.append(('broadcast_object', obj, result))
        return result

    def size_tensor(self):
        return tf.constant(float(self.size))

    def wrap_optimizer(self, optimizer, fp16_compression=False, backward_passes_per_step=1):
        if backward_passes_per_step != 1:
            raise NotImplementedError('gradient accumulation is not stood in for; test it under horovodrun')
        return AveragingOptimizer(optimizer, self)

    def broadcast_op(self):
        """Every global variable takes rank 0's value (built after the optimizer: its slots too)."""
        variables = tfv1.global_variables()

        def rank0_values(*values):
            return list(self._exchange(values, 'broadcast_op')[0])

        values = tf.numpy_function(rank0_values, [v.read_value() for v in variables],
                                   [v.dtype.base_dtype for v in variables], name='threaded_broadcast')
        return tf.group([v.assign(value) for v, value in zip(variables, values)], name='threaded_broadcast_assign')


def threaded_ranks(size=2, timeout=TIMEOUT):
    rendezvous = Rendezvous(size, timeout)
    return [ThreadedDist(rank, rendezvous) for rank in range(size)]


def run_ranks(ranks, target, timeout=300):
    """target(dist) in one thread per rank, in graph mode; returns each rank's result or exception
    (in rank order). A rank that raises aborts the rendezvous, so the others fail fast too."""
    results = [None] * len(ranks)

    def run(dist):
        try:
            with context.graph_mode():
                results[dist.rank] = target(dist)
        except BaseException as error:      # noqa: B902 (handed to the test, which asserts on it)
            results[dist.rank] = error
            dist.rendezvous.abort('rank {} failed: {!r}'.format(dist.rank, error))

    threads = [threading.Thread(target=run, args=(dist,), name='rank-{}'.format(dist.rank), daemon=True)
               for dist in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
        if thread.is_alive():
            ranks[0].rendezvous.abort('{} did not finish'.format(thread.name))
            raise AssertionError('{} still running after {} s'.format(thread.name, timeout))
    return results
