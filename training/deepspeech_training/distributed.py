"""The one seam between training and Horovod; the only module that imports horovod.

`init(use_horovod, elastic)` returns a `Single` (one process), a `Horovod` or an `Elastic` object with
the same methods, so train() reads the same for all: the single-process path is the distributed path
with size 1, and the fixed Horovod path is the elastic one without resets.
Values that decide something (dev loss, early stop, best model) go through `sum`, so every rank takes
the same decision at the same step; `check_same` guards that they did.
"""
import copy
import os
import pickle
import socket

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .util.launchers import srun_task
from .util.ranks import OneProcess

INSTALL_HINT = ('--horovod needs Horovod built against this TensorFlow: run bin/setup.sh --horovod (it builds '
                'horovod==0.28.1 with Gloo and MPI), or HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 pip install '
                '--no-build-isolation horovod==0.28.1')


class Single(OneProcess):
    """One process: every collective is the identity."""

    def process_name(self):
        """A name for this process's own files (e.g. its feature cache) that no other live process of
        the job has: '' for one process."""
        return ''

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

    def gather_objects(self, obj):
        """Every rank's picklable `obj` on every rank, in rank order, before or outside any training graph
        (the control plane: input checks); the seam owns the ops and the session that carry it."""
        return [obj]

    def barrier(self, session):
        """Return once every rank got here (a sum of nothing, so it rides on the seam's ops)."""
        self.sum(session, [0.0])

    def check_same(self, session, what, values):
        """Raise if the ranks disagree on `values` (a guard: a disagreement means a hang next)."""

    def size_tensor(self):
        """The number of ranks when the graph runs (it changes on an elastic reset), as float32."""
        return tf.constant(float(self.size))

    def before_sync(self):
        """The seam for work done before the ranks sync their training state (main()'s input checks):
        collectives then would deadlock with an elastic job's ranks resyncing for a newly joined one."""
        return self

    def training_state(self, session, broadcast, progress):
        """What training carries over a reset: `progress` (the trainer's dataclass, picklable) and the
        variables in `session`."""
        return TrainingState(progress)

    def run(self, state, train_fn):
        """train_fn(state) once the ranks agree on `state` (again after each elastic reset)."""
        return train_fn(state)


class TrainingState:
    """The trainer's Python progress (`progress`: epoch, batches done, dev tracker...), which a sync or
    restore replaces with another object: read it through the state every time. The single-process and
    fixed-size cases never reset, so committing and checking for host changes cost nothing."""

    def __init__(self, progress):
        self.progress = progress

    def commit(self):
        """Keep the current state in memory: a failed rank resets the others to it."""

    def check_host_updates(self):
        """Raise Horovod's HostsUpdatedInterrupt on every rank at the same step when hosts changed."""


class BroadcastState(TrainingState):
    """Synced from rank 0: the global variables (weights, Adam slots, global_step, learning_rate) and
    the progress, so only rank 0 needs the checkpoint and its best dev loss."""

    def __init__(self, progress, session, broadcast, broadcast_object):
        super().__init__(progress)
        self.session, self.broadcast, self.broadcast_object = session, broadcast, broadcast_object

    def sync(self):
        self.session.run(self.broadcast)
        self.progress = self.broadcast_object(self.session, self.progress)


class RankDivergenceError(RuntimeError):
    pass


# Horovod's defaults suit GPUs. Ranks training on CPUs share the cores with Horovod's background thread,
# which wakes every HOROVOD_CYCLE_TIME ms (default 1) to negotiate (from 10 ms up, the wait for the next
# cycle shows in every short step); a 4 MB fusion buffer instead of 128 MB sends the first gradients of
# the backward pass while the rest are computed. Together, np=2 vs np=1 on 2 cores: 0.88 -> 1.10x at
# n_hidden 512, 1.02 -> 1.08x at 100 (doc/PERFORMANCE.rst). Given variables (or horovodrun
# --cycle-time-ms / --fusion-threshold-mb) win.
CPU_HOROVOD_SETTINGS = {'HOROVOD_CYCLE_TIME': '5', 'HOROVOD_FUSION_THRESHOLD': str(4 * 1024 * 1024)}


# Horovod's own defaults, for what neither the environment nor CPU_HOROVOD_SETTINGS gives.
HOROVOD_DEFAULTS = {'HOROVOD_CYCLE_TIME': '1', 'HOROVOD_FUSION_THRESHOLD': str(128 * 1024 * 1024)}


def horovod_tuning():
    """(cycle time in ms, fusion buffer in bytes) this process's Horovod runs with, as strings."""
    return tuple(os.environ.get(name, default) for name, default in HOROVOD_DEFAULTS.items())


def set_cpu_horovod_settings():
    """CPU_HOROVOD_SETTINGS that are not given, when no GPU is visible; must run before hvd.init()."""
    if not tf.config.list_physical_devices('GPU'):
        for name, value in CPU_HOROVOD_SETTINGS.items():
            os.environ.setdefault(name, value)


class Horovod(Single):
    """Several processes started by horovodrun or mpirun."""

    def __init__(self, hvd, cpu_settings=True):
        self.hvd = hvd
        if cpu_settings:
            set_cpu_horovod_settings()
        hvd.init()
        self.refresh()
        self._sum_ops = {}
        self._object_ops = None

    def refresh(self):
        """Read this process's rank and the sizes from Horovod (they change on an elastic reset)."""
        hvd = self.hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()

    def process_name(self):
        return 'rank{}'.format(self.rank)

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

    def broadcast_object(self, session, obj):
        """Rank 0's picklable `obj` on every rank, through ops built once (Horovod's own
        broadcast_object_fn calls tf.placeholder, which TF 2 no longer has)."""
        if self._object_ops is None:
            with session.graph.as_default():
                size, data = tfv1.placeholder(tf.int32, [1]), tfv1.placeholder(tf.uint8, [None])
                self._object_ops = (size, self.hvd.broadcast(size, 0, name='seam_object_size'),
                                    data, self.hvd.broadcast(data, 0, name='seam_object_data'))
        size, broadcast_size, data, broadcast_data = self._object_ops
        payload = np.frombuffer(pickle.dumps(obj), np.uint8) if self.rank == 0 else None
        length = session.run(broadcast_size, {size: [len(payload) if payload is not None else 0]})
        if payload is None:
            payload = np.zeros(length, np.uint8)
        return pickle.loads(session.run(broadcast_data, {data: payload}).tobytes())

    def gather(self, session, obj):
        from horovod.tensorflow.functions import allgather_object
        return allgather_object(obj, session=session, name='seam_gather')

    def gather_objects(self, obj):
        """A throw-away graph and one-thread CPU session carry the allgather: no training graph exists yet."""
        if self.size == 1:
            return [obj]
        graph = tfv1.Graph()
        config = tfv1.ConfigProto(device_count={'GPU': 0}, intra_op_parallelism_threads=1,
                                  inter_op_parallelism_threads=1)
        with graph.as_default(), tfv1.Session(graph=graph, config=config) as session:
            return self.gather(session, obj)

    def check_same(self, session, what, values):
        values = np.asarray(values, np.float64)
        mean = self.sum(session, values) / self.size
        spread = self.sum(session, np.abs(values - mean))
        if np.any(spread > 1e-9 * np.maximum(1.0, np.abs(mean))):
            raise RankDivergenceError('ranks disagree on {}: this rank has {}, the mean over ranks is {}'
                                      .format(what, values.tolist(), mean.tolist()))


    def size_tensor(self):
        return tf.cast(self.hvd.size_op(), tf.float32)

    def training_state(self, session, broadcast, progress):
        return BroadcastState(progress, session, broadcast, self.broadcast_object)

    def run(self, state, train_fn):
        state.sync()
        return train_fn(state)


class Elastic(Horovod):
    """Horovod under `horovodrun --min-np/--max-np --host-discovery-script`: ranks come and go.

    On a change every rank stops at the same step, Horovod re-forms the ring, and `run` calls
    train_fn again with the state synced from rank 0 (the new ranks' first sync too)."""

    def __init__(self, hvd):
        # Horovod's defaults: with both HOROVOD_CYCLE_TIME and HOROVOD_FUSION_THRESHOLD set, the hvd.init()
        # of an elastic reset segfaults in Horovod 0.28.1 (measured; either one alone does not).
        super().__init__(hvd, cpu_settings=False)
        from horovod.common.elastic import State
        self._state_class = _elastic_state_class(State)

    def before_sync(self):
        return Single()

    def process_name(self):
        """Host and local rank: ranks change over resets, so a rank's name would move to another process
        (the old rank 1 becomes rank 0 when rank 0's host leaves; a joiner is then rank 1 again)."""
        return '{}.local{}'.format(os.environ.get('HOROVOD_HOSTNAME', socket.gethostname()), self.local_rank)

    def training_state(self, session, broadcast, progress):
        state = self._state_class(progress, session, broadcast, self.broadcast_object, self.hvd.rank)
        state.register_reset_callbacks([self.refresh])
        return state

    def run(self, state, train_fn):
        from horovod.common.exceptions import HorovodInternalError

        def surfacing(state):
            try:
                return train_fn(state)
            except tf.errors.UnknownError as error:
                # elastic.run resets only on errors naming HorovodAllreduce/Allgather/Broadcast and returns
                # None for any other UnknownError: a failed collective of ours (seam_sum_N, seam_object_*,
                # seam_gather) would end the job "successfully" half-way. Raise what it resets on instead.
                if _failed_collective(error):
                    raise HorovodInternalError(error) from error
                raise RuntimeError(error.message) from error
        return self.hvd.elastic.run(surfacing)(state)


def _failed_collective(error):
    """Whether a TensorFlow error comes from a Horovod op (a peer died or Horovod shut down)."""
    return (error.op is not None and error.op.type.startswith('Horovod')) or 'Horovod' in error.message


def _elastic_state_class(State):
    """ElasticState: a BroadcastState that is also Horovod's elastic `State` (a class that exists only
    once Horovod is imported). hvd.elastic.TensorFlowState cannot be used: on TF 2 graph mode it calls
    tf.placeholder and its restore never runs its assign ops."""

    class ElasticState(BroadcastState, State):
        def __init__(self, progress, session, broadcast, broadcast_object, get_rank):
            BroadcastState.__init__(self, progress, session, broadcast, broadcast_object)
            State.__init__(self, bcast_object=lambda obj: broadcast_object(session, obj), get_rank=get_rank)
            variables = tfv1.global_variables()
            with session.graph.as_default():
                self._fed = [tfv1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
                self._load = tf.group([v.assign(fed) for v, fed in zip(variables, self._fed)])
            self._variables = variables
            self._saved = None

        def save(self):
            self._saved = (self.session.run(self._variables), copy.deepcopy(self.progress))

        def restore(self):
            """Back to the last commit (a rank failed mid-step: this rank's step may be half done)."""
            variables, progress = self._saved
            self.session.run(self._load, dict(zip(self._fed, variables)))
            self.progress = copy.deepcopy(progress)

        def sync(self):
            BroadcastState.sync(self)
            self.save()

        # Horovod's, not TrainingState's no-ops
        commit = State.commit
        check_host_updates = State.check_host_updates

    return ElasticState


def devices(dist):
    """What `dist`'s rank computes on, for the start-up log: 'GPU 0 (its name)' for each GPU its sessions
    see (under Horovod the one of its local rank), or 'CPU only'."""
    gpus = tf.config.list_physical_devices('GPU')
    visible = dist.visible_gpu()
    used = [(index, gpu) for index, gpu in enumerate(gpus) if visible == '' or str(index) == visible]
    if not used:
        return 'CPU only ({} cores{})'.format(
            os.cpu_count(), ', no GPU {} among the {} found'.format(visible, len(gpus)) if gpus else '')
    return ', '.join('GPU {} ({})'.format(index, tf.config.experimental.get_device_details(gpu).get('device_name', gpu.name))
                     for index, gpu in used)


def check_slurm_step(dist, env):
    """Fail when srun started several tasks that are not the ranks of one job: without --horovod, or
    without srun --mpi=pmix (Horovod then sees one rank in each task), every task would train alone and
    all would write the same checkpoints."""
    step = srun_task(env)
    if step is None:
        return
    tasks, task = step
    if (tasks, task) != (dist.size, dist.rank):
        raise SystemExit('srun started {} tasks (this is task {}) but this process is rank {} of {}: start '
                         'one task per rank with `srun --mpi=pmix python DeepSpeech.py --horovod ...` '
                         '(bin/slurm/train.sbatch)'.format(tasks, task, dist.rank, dist.size))


def init(use_horovod, elastic=False):
    if not use_horovod:
        dist = Single()
    else:
        try:
            import horovod.tensorflow as hvd
            import horovod.tensorflow.elastic  # noqa: F401 (hvd.elastic)
        except ImportError as error:
            raise SystemExit('{} ({})'.format(INSTALL_HINT, error))
        dist = Elastic(hvd) if elastic else Horovod(hvd)
    check_slurm_step(dist, os.environ)
    return dist
