"""The graph a checkpoint holds and the training step, built in one place: the Trainer runs it, the
benchmarks and the profiler time it, evaluation and export declare the same checkpoint variables.

`checkpoint_variables()` declares what a checkpoint holds besides the model and its optimizer slots;
`build_train_graph()` adds the forward pass, the effective learning rate, the (distributed) optimizer
and the train op on a batch; `build_training_run()` assembles a whole run's graph from its input sets."""
import math
from dataclasses import dataclass

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from . import precision
from .checkpoint_names import EPOCH_LOSS, EPOCH_POSITION, LEARNING_RATE
from .ema import WeightAverage
from .forward import Forward, build_forward, seed_graph
from .iterators import build_input


class Setter:
    """Assigns a value from Python to `variable` through one placeholder, built once with the graph."""

    def __init__(self, variable):
        self.value = tfv1.placeholder(variable.dtype.base_dtype, variable.shape)
        self.op = variable.assign(self.value)

    def __call__(self, session, value):
        session.run(self.op, {self.value: value})


@dataclass
class CheckpointVariables:
    """What a checkpoint holds besides the model and the optimizer's slots."""
    global_step: object
    learning_rate: object           # unscaled: a checkpoint means the same whatever the number of ranks
    set_learning_rate: Setter
    epoch_position: object = None   # [epoch, batches done, batches planned], [-1, 0, 0]: not known
    set_epoch_position: Setter = None
    epoch_loss: object = None       # [loss sum, sample count] of the epoch's batches done, over all ranks
    set_epoch_loss: Setter = None


def checkpoint_variables(learning_rate=0.0, position=True):
    """Declare the CheckpointVariables in the default graph, `learning_rate` their initial rate (a loaded
    checkpoint's wins). The epoch position and loss only with `position` (training): evaluation and
    export load the model, not where training stands, and so initialise nothing a DeepSpeech
    checkpoint lacks but its learning rate."""
    global_step = tfv1.train.get_or_create_global_step()
    rate = tfv1.get_variable(LEARNING_RATE, initializer=learning_rate, trainable=False)
    variables = CheckpointVariables(global_step, rate, Setter(rate))
    if position:
        # global_step // batches is another epoch when the number of ranks changes: the position is saved
        variables.epoch_position = tfv1.get_variable(EPOCH_POSITION, initializer=tf.constant([-1, 0, 0], tf.int64),
                                                     trainable=False)
        variables.set_epoch_position = Setter(variables.epoch_position)
        # a run resumed mid-epoch reports the whole epoch's mean loss; [0, 0] in a checkpoint without it
        variables.epoch_loss = tfv1.get_variable(EPOCH_LOSS, initializer=tf.constant([0.0, 0.0], tf.float64),
                                                 trainable=False)
        variables.set_epoch_loss = Setter(variables.epoch_loss)
    return variables


def schedule_factor(schedule, run_position):
    """--lr_schedule's multiplier of the learning rate where the run stands: `run_position` (a tensor) is the
    fraction of the run's epochs trained before this step, so the schedule follows epochs and batches, not
    global steps, and stays exact over a resume, other rank counts and an elastic reset."""
    assert schedule == 'cosine', schedule
    return 0.5 * (1.0 + tf.cos(math.pi * tf.clip_by_value(run_position, 0.0, 1.0)))


def effective_learning_rate(learning_rate, global_step, size, steps_per_epoch, training, run_position=None):
    """learning_rate x ranks, ramped up linearly from learning_rate during the warm-up (Goyal et al.), times
    the schedule's factor at `run_position`.

    `size` is a tensor, the number of ranks when the step runs (an elastic reset changes it). The
    warm-up counts optimizer updates: with gradient accumulation global_step counts batches."""
    passes = training.horovod_backward_passes_per_step
    warmup = training.warmup_steps or training.warmup_epochs * steps_per_epoch / passes
    rate = learning_rate if run_position is None else learning_rate * schedule_factor(training.lr_schedule,
                                                                                      run_position)
    if not warmup:
        return rate * size
    updates = tf.cast(global_step // passes, tf.float32)
    progress = tf.minimum(updates / float(warmup), 1.0)
    return rate * (1.0 + (size - 1.0) * progress)


FP16_OVERFLOW = ('a gradient is not finite after the float16 allreduce of --horovod_fp16_compression (float16 '
                 'overflows beyond 65504, summed over the ranks): the step is not applied; train without '
                 '--horovod_fp16_compression, or with a lower --learning_rate')


def finite_gradients(grads_and_vars):
    """`grads_and_vars` whose gradients stop the step with FP16_OVERFLOW when not finite: an inf or NaN
    from a float16 sum would otherwise turn the weights into NaN without a word. The averaged gradients
    are equal on every rank, so every rank stops at the same step."""
    return [(tf.debugging.check_numerics(gradient, FP16_OVERFLOW) if gradient is not None else None, variable)
            for gradient, variable in grads_and_vars]


@dataclass
class TrainGraph:
    """One training step on the batch input: what the Trainer runs and a benchmark times."""
    forward: Forward
    variables: CheckpointVariables
    rate: object            # the effective learning rate (scaled by the ranks, warmed up)
    gradients: list         # (gradient, variable): averaged over the ranks, checked with fp16 compression
    train_op: object
    feed: dict              # the dropout rates of training
    precision: str          # None (float32), or --automatic_mixed_precision's 16-bit type
    average: WeightAverage = None   # --ema_decay's, updated by train_op after each update; None when off
    run_position: object = None     # fed with the fraction of the run done (--lr_schedule); None: constant

    def fetches(self):
        """What a training step fetches: the update, and the step, rate and loss it reports."""
        return dict(train=self.train_op, step=self.variables.global_step, rate=self.rate,
                    mean_loss=self.forward.mean_loss)


def build_train_graph(batch, config, training, dist, mixed_precision, steps_per_epoch):
    """The TrainGraph on `batch` (iterators.build_input's) for `config` (the model), `training` (TrainingSettings)
    and `dist` (the seam); `steps_per_epoch` paces the warm-up."""
    forward = build_forward(batch, config, mixed_precision)
    variables = checkpoint_variables(training.learning_rate)
    run_position = (tfv1.placeholder_with_default(0.0, [], 'run_position') if training.lr_schedule != 'constant'
                    else None)
    rate = effective_learning_rate(variables.learning_rate, variables.global_step, dist.size_tensor(),
                                   steps_per_epoch, training, run_position)
    optimizer = tfv1.train.AdamOptimizer(rate, beta1=training.beta1, beta2=training.beta2, epsilon=training.epsilon)
    # Loss scaling (float16 only) inside, so Horovod averages the unscaled float32 gradients.
    optimizer = dist.wrap_optimizer(precision.wrap_optimizer(optimizer, mixed_precision),
                                    training.horovod_fp16_compression, training.horovod_backward_passes_per_step)
    # The wrapper's compute_gradients: averaged over the ranks (tf.gradients' would not be).
    gradients = optimizer.compute_gradients(forward.mean_loss)
    if training.horovod_fp16_compression:
        gradients = finite_gradients(gradients)
    train_op = optimizer.apply_gradients(gradients, global_step=variables.global_step)
    average = None
    if training.ema_decay:
        # The trainable variables are the model's weights (the loop's and the optimizer's are not trainable).
        average = WeightAverage(training.ema_decay, tfv1.trainable_variables(), variables.global_step, train_op)
        train_op = average.train_op
    return TrainGraph(forward, variables, rate, gradients, train_op,
                      dict(zip(forward.dropout_rates, training.dropout_rates)), mixed_precision, average, run_position)


@dataclass
class TrainingRun:
    """The graph of a training run: one batch input for all its sets, and the step on it."""
    batch: tuple
    iterators: list         # graph.SetIterator per input set, in their order: the first is trained on
    step: TrainGraph


def build_training_run(sets, settings, dist):
    """A new graph with the TrainingRun of `sets` (data.plans.InputSet: the training set first, then the
    sets to validate on) for `settings` and `dist`. The Trainer builds its run here, and the benchmarks and
    the profiler time the same graph (feeding their own batches through InputSet.make_dataset)."""
    tfv1.reset_default_graph()
    seed_graph(settings.training.random_seed, dist.rank)
    batch, iterators = build_input(sets, settings.model)
    step = build_train_graph(batch, settings.model, settings.training, dist, settings.session.mixed_precision,
                             iterators[0].n_batches())
    return TrainingRun(batch, iterators, step)
