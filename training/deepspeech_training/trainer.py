"""The Trainer: one training run, the same for one process, fixed-size Horovod and elastic Horovod.

Everything that differs between them goes through the `dist` seam (distributed.py): `dist.run` calls
`Trainer.train_epochs` once, or again after each elastic reset. Side effects (checkpoints, summaries,
flags.txt, info logs) happen on the chief, asked of `dist` every time.
"""
import math
import os
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from . import precision
from .checkpoints import EPOCH_LOSS, EPOCH_POSITION, Checkpointer, check_space, checkpoint_bytes
from .data.augmentations import Augmenter, parse_augmentations
from .data.batching import eval_batches, train_batches
from .data.feature_cache import open_feature_cache
from .early_stopping import DevTracker
from .graph import InputSet, LossTotals, build_forward, build_input, create_session, run_set, seed_graph, set_steps
from .util import startup
from .util.logging import log_info, log_warn


def train_set(records, dist, config, training):
    """The training InputSet of this rank; a set too small for ranks x batch fails here, before any work."""
    def plan(epoch):
        return train_batches(len(records), training.train_batch_size, dist.size, dist.rank, epoch,
                             training.random_seed, training.shuffle_batches)
    plan(0)
    augmenter = None
    if training.augment:
        # A:B ranges over the epochs of end_epochs(): all of them with --total_epochs
        augmenter = Augmenter(parse_augmentations(training.augment), training.random_seed,
                              training.total_epochs or training.epochs)
    feature_cache = open_feature_cache(training.feature_cache, records, config, training, dist.process_name())
    return InputSet('Training', records, plan, training.train_batch_size, augmenter, feature_cache)


def eval_set(name, records, batch_size, dist):
    """A validation or test InputSet: this rank's padded share of every sample."""
    def plan(epoch):
        return eval_batches(len(records), batch_size, dist.size, dist.rank)
    return InputSet(name, records, plan, batch_size)


def effective_learning_rate(learning_rate, global_step, size, steps_per_epoch, training):
    """learning_rate x ranks, ramped up linearly from learning_rate during the warm-up (Goyal et al.).

    `size` is a tensor, the number of ranks when the step runs (an elastic reset changes it). The
    warm-up counts optimizer updates: with gradient accumulation global_step counts batches."""
    passes = training.horovod_backward_passes_per_step
    warmup = training.warmup_steps or training.warmup_epochs * steps_per_epoch / passes
    if not warmup:
        return learning_rate * size
    updates = tf.cast(global_step // passes, tf.float32)
    progress = tf.minimum(updates / float(warmup), 1.0)
    return learning_rate * (1.0 + (size - 1.0) * progress)


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
class TrainingProgress:
    """Where training stands besides the variables; synced from rank 0 with them, kept over an
    elastic reset (a reset plans the rest of the epoch anew for the new number of ranks)."""
    tracker: DevTracker             # best dev loss and epochs without improvement
    epoch: int = None               # None: not started yet (taken from the synced global_step)
    end_epoch: int = None           # the first epoch this run does not train
    first_epoch: int = None         # where the augmentations' A:B ranges start
    batches_done: int = 0           # of the current epoch, out of ...
    batches_planned: int = 0        # ... the epoch's length when it was planned (0: not planned yet)
    steps_run: int = 0              # by this run, counted alike on every rank (global_step may not be)
    loss_before: tuple = (0.0, 0.0)  # (loss sum, samples) over all ranks of the epoch's batches trained by
                                     # an earlier run (resumed mid-epoch), so the epoch's loss is the whole epoch's


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


def end_epochs(checkpoint_epoch, epochs, total_epochs):
    """(the first epoch not to train, the first epoch of the augmentations' A:B ranges) for a run that
    resumes at `checkpoint_epoch`: --epochs more, or up to --total_epochs, the same for every rerun of
    the command (a requeued job), which then augments as the first run did."""
    if total_epochs:
        return total_epochs, 0
    return checkpoint_epoch + epochs, checkpoint_epoch


class Interrupted(Exception):
    """Training stopped on a signal (STOP_SIGNALS) after a train checkpoint of the current step was saved."""

    def __init__(self, exit_code):
        super().__init__('interrupted')
        self.exit_code = exit_code


# What stops training with a checkpoint of the current step: Ctrl-C, a launcher's or scheduler's SIGTERM,
# and SIGUSR1, which Slurm sends before a job's time limit (`--signal=USR1@<s>`, bin/slurm/). The exit
# code says which came (128 + the signal); when the ranks got several, the first of this order wins.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


class StopRequests:
    """STOP_SIGNALS only set a flag (the handler saves nothing); the train loop reads it between steps,
    and all ranks agree on it so they stop at the same step."""

    def __init__(self):
        self.signum, self.previous = 0, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:   # e.g. SIGINT of a `cmd &` job
                    self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, _frame):
        self.signum = self.signum or signum

    def __exit__(self, exc_type, *_):
        # After an agreed stop the process is on its way out with its code: a launcher's SIGTERM (or a
        # second SIGUSR1) that comes later (horovodrun forwards a signal to the ranks one by one, Slurm
        # signals every task) must not turn that exit into a death by signal (horovodrun then reports 143
        # for a rank that stopped cleanly). Ctrl-C still ends a stuck shutdown.
        for signum, handler in self.previous.items():
            stopping = exc_type is Interrupted and signum != signal.SIGINT
            signal.signal(signum, signal.SIG_IGN if stopping else handler)

    def votes(self):
        """This rank's part of the agreed stop, summed over ranks: one count per stop signal."""
        return [self.signum == signum for signum in STOP_SIGNALS]

    @staticmethod
    def exit_code(summed_votes):
        """From the votes summed over ranks: None (no stop), else 128 + the first signal any rank got."""
        for signum, votes in zip(STOP_SIGNALS, summed_votes):
            if votes:
                return 128 + signum
        return None


class Trainer:
    """Owns a training run: its graph, session, checkpointer, summaries and the epoch loop."""

    def __init__(self, dist, settings, train_records, dev_sets, metrics_sets=None):
        """Build the graph: `train_records` to train on, `dev_sets` (name -> records) to validate on,
        `metrics_sets` (name -> records, --metrics_files) to report the loss of after each validation."""
        self.dist, self.settings = dist, settings
        config, training = settings.model, settings.training
        self.training_settings = training
        tfv1.reset_default_graph()
        seed_graph(training.random_seed, dist.rank)
        sets = [train_set(train_records, dist, config, training)]
        sets += [eval_set('Validation ' + name, records, training.dev_batch_size, dist)
                 for name, records in dev_sets.items()]
        sets += [eval_set('Metrics ' + name, records, training.dev_batch_size, dist)
                 for name, records in (metrics_sets or {}).items()]
        startup.mark('planning')
        batch, iterators = build_input(sets, config)
        self.training, evaluations = iterators[0], iterators[1:]
        self.validations, self.metrics = evaluations[:len(dev_sets)], evaluations[len(dev_sets):]
        self.dev_sources, self.metrics_sources = list(dev_sets), list(metrics_sets or {})
        self.feature_cache = sets[0].feature_cache
        self.forward = build_forward(batch, config, settings.session.mixed_precision)
        self.global_step = tfv1.train.get_or_create_global_step()
        # Stored unscaled, so a checkpoint means the same whatever the number of ranks resuming it.
        self.learning_rate = tfv1.get_variable('learning_rate', initializer=training.learning_rate, trainable=False)
        self.new_rate = tfv1.placeholder(tf.float32, [])
        self.set_learning_rate = self.learning_rate.assign(self.new_rate)
        # Where training stands in its epochs, saved with every checkpoint: global_step // batches is
        # another epoch when the number of ranks changes. [-1, 0, 0]: not known (a DeepSpeech checkpoint).
        self.epoch_position = tfv1.get_variable(EPOCH_POSITION, initializer=tf.constant([-1, 0, 0], tf.int64),
                                                trainable=False)
        self.new_position = tfv1.placeholder(tf.int64, [3])
        self.set_epoch_position = self.epoch_position.assign(self.new_position)
        # The loss sum and sample count of the epoch's batches done, over all ranks, beside the position: a
        # run resumed mid-epoch reports the whole epoch's mean loss. [0, 0] in a checkpoint without them.
        self.epoch_loss = tfv1.get_variable(EPOCH_LOSS, initializer=tf.constant([0.0, 0.0], tf.float64),
                                            trainable=False)
        self.new_epoch_loss = tfv1.placeholder(tf.float64, [2])
        self.set_epoch_loss = self.epoch_loss.assign(self.new_epoch_loss)
        self.epoch_totals = LossTotals()   # this rank's, of the current epoch's batches run by this run
        self.rate = effective_learning_rate(self.learning_rate, self.global_step, dist.size_tensor(),
                                            self.training.n_batches(), training)
        optimizer = tfv1.train.AdamOptimizer(self.rate, beta1=training.beta1, beta2=training.beta2,
                                             epsilon=training.epsilon)
        # Loss scaling (float16 only) inside, so Horovod averages the unscaled float32 gradients.
        optimizer = dist.wrap_optimizer(precision.wrap_optimizer(optimizer, settings.session.mixed_precision),
                                        training.horovod_fp16_compression, training.horovod_backward_passes_per_step)
        # The wrapper's compute_gradients: averaged over the ranks (tf.gradients' would not be).
        self.gradients = optimizer.compute_gradients(self.forward.mean_loss)
        if training.horovod_fp16_compression:
            self.gradients = finite_gradients(self.gradients)
        self.train_op = optimizer.apply_gradients(self.gradients, global_step=self.global_step)
        self.broadcast = dist.broadcast_op()
        checkpoints = settings.checkpoints
        self.checkpointer = Checkpointer(checkpoints.load_dir, checkpoints.save_dir, checkpoints.max_to_keep, dist)
        if dist.is_chief:
            check_space(checkpoints.save_dir, 2 * checkpoint_bytes(), 'checkpoints')
        self.summaries = Summaries(training.summary_dir, dist)
        self.train_feed = dict(zip(self.forward.dropout_rates, training.dropout_rates))
        self.train_fetches = dict(train=self.train_op, step=self.global_step, rate=self.rate,
                                  mean_loss=self.forward.mean_loss)
        self.session, self.last_save = None, None

    def run(self, flags_text):
        """Load (or initialise) the variables, write `flags_text` to flags.txt and train; raises
        Interrupted after saving when a signal stopped the run."""
        checkpoints, training = self.settings.checkpoints, self.training_settings
        with create_session(self.dist, self.settings.session) as self.session, StopRequests() as self.stop_requests:
            loaded = self.checkpointer.load_for_training(self.session, checkpoints.load_train,
                                                         checkpoints.drop_source_layers, checkpoints.load_cudnn)
            startup.mark('graph')
            if training.force_initialize_learning_rate:
                self.session.run(self.set_learning_rate, {self.new_rate: training.learning_rate})
            elif loaded not in ('init', 'broadcast from rank 0'):
                self._warn_kept_learning_rate(loaded)
            self._write_flags(flags_text)
            tracker = DevTracker(self.checkpointer.best_dev_loss() if self.dist.is_chief else math.inf,
                                 training.es_min_delta, training.es_epochs if training.early_stop else None,
                                 training.plateau_epochs if training.reduce_lr_on_plateau else None)
            state = self.dist.training_state(self.session, self.broadcast, TrainingProgress(tracker))
            self.last_save = time.time()
            started = datetime.utcnow()
            log_info('STARTING Optimization')
            try:
                self.dist.run(state, self.train_epochs)
                log_info('FINISHED optimization in {}'.format(datetime.utcnow() - started))
            except Interrupted:
                path = self._save_train(state, commit=False)
                log_info('Interrupted at global step {}, saved {}'.format(self.session.run(self.global_step), path))
                self.dist.sum(self.session, [0.0])  # no rank exits (and makes horovodrun kill rank 0) before the save
                raise
            finally:
                self.summaries.close()
                if self.feature_cache:
                    self.feature_cache.close()

    def train_epochs(self, state):
        """The epochs from `state` on: train, validate, save. dist.run calls this again, with the new
        ranks, after each elastic reset; `state.progress` is the same object throughout one call."""
        progress = self._start(state)
        while progress.epoch < progress.end_epoch:
            first_batch = self._plan_epoch(progress)
            if first_batch < progress.batches_planned:     # else a reset came during this epoch's validation
                started, totals = time.time(), LossTotals()
                self.epoch_totals = totals
                for values in set_steps(self.session, self.training, self.forward, progress.epoch, self.train_fetches,
                                        self.train_feed, first_batch, totals):
                    self.summaries.scalars('train', values['step'], step_loss=values['mean_loss'],
                                           learning_rate=values['rate'])
                    startup.first_step(self.dist.rank)
                    progress.batches_done += 1
                    progress.steps_run += 1
                    self._between_steps(state)
                self._finish_epoch(progress, totals, (time.time() - started) / (progress.batches_planned - first_batch))
                self._save_train(state)
            if self.validations and self._validate(progress):
                break
            self._report_metrics(progress.epoch)
            progress.epoch, progress.batches_done, progress.batches_planned = progress.epoch + 1, 0, 0
            progress.loss_before, self.epoch_totals = (0.0, 0.0), LossTotals()
            state.commit()

    def _start(self, state):
        """What a (re)start sets up: the reset hook. Returns the progress to go on from."""
        progress = state.progress
        if progress.epoch is None:
            self._resume_position(progress)
            progress.end_epoch, progress.first_epoch = end_epochs(progress.epoch, self.training_settings.epochs,
                                                                  self.training_settings.total_epochs)
            self._log_resume(progress)
        if self.training.input_set.augmenter:   # A:B ranges run over the epochs, on joiners too
            self.training.input_set.augmenter.first_epoch = progress.first_epoch
        for iterator in [self.training] + self.validations + self.metrics:
            iterator.restart(progress.end_epoch)
        base_rate = self.session.run(self.learning_rate)
        log_info('Training from global step {} (epoch {}), learning rate {:g} x {} rank(s) = {:g}{}'
                 .format(self.session.run(self.global_step), progress.epoch, base_rate, self.dist.size,
                         base_rate * self.dist.size,
                         ' after a warm-up' if self.training_settings.warmup_steps or
                         self.training_settings.warmup_epochs else ''))
        return progress

    def _resume_position(self, progress):
        """The epoch and the part of it done, from the checkpoint (synced from rank 0); from global_step
        for a checkpoint without them. An epoch whose training was done resumes at the next one."""
        epoch, done, planned = (int(value) for value in self.session.run(self.epoch_position))
        if epoch < 0:
            epoch, done, planned = self.session.run(self.global_step) // self.training.n_batches(), 0, 0
        elif planned and done == planned:
            epoch, done, planned = epoch + 1, 0, 0
        progress.epoch, progress.batches_done, progress.batches_planned = epoch, done, planned
        progress.loss_before = tuple(float(value) for value in self.session.run(self.epoch_loss)) if done else (0.0, 0.0)

    def _log_resume(self, progress):
        """Say where a run from a checkpoint resumes and how far it will train."""
        training = self.training_settings
        if progress.batches_done:
            log_info('Resuming mid-epoch: epoch {} at step {} of {}{}'.format(
                progress.epoch, progress.batches_done, progress.batches_planned,
                '; its loss will be the mean over the whole epoch' if progress.loss_before[1] else
                ' (the checkpoint has no loss of the steps done: the epoch\'s loss will be that of the steps '
                'run from here)'))
        if not training.total_epochs and (progress.epoch or progress.batches_done):
            log_info('Training --epochs {} more epoch(s), up to epoch {}; to stop at the same epoch however '
                     'often the command is rerun (a resumed or requeued run), give --total_epochs instead'
                     .format(training.epochs, progress.end_epoch))

    def _warn_kept_learning_rate(self, path):
        """DeepSpeech 0.9 keeps the checkpoint's learning rate over --learning_rate: say so when they differ."""
        kept, given = float(self.session.run(self.learning_rate)), self.training_settings.learning_rate
        if not math.isclose(kept, given, rel_tol=1e-6):
            log_warn('continuing with the learning rate {:g} of checkpoint {}, not --learning_rate {:g}; add '
                     '--force_initialize_learning_rate to start from --learning_rate'.format(kept, path, given))

    def _plan_epoch(self, progress):
        """Plan the current epoch for the ranks there are now; returns its first batch (after an elastic
        reset: the same fraction of the epoch as was done)."""
        n_batches = self.training.n_batches(progress.epoch)
        first_batch = progress.batches_done * n_batches // progress.batches_planned if progress.batches_planned else 0
        progress.batches_done, progress.batches_planned = first_batch, n_batches
        # Guard: ranks that disagree here would hang in the next allreduce (or, for the run's first epoch,
        # augment on other A:B ranges than the others); fail instead. The end epoch comes from each rank's
        # --epochs: a rank that stopped early would leave the others in a collective.
        augmenter = self.training.input_set.augmenter
        self.dist.check_same(self.session, 'epoch, end epoch, batches, first batch, first epoch, global step, '
                             'learning rate', [progress.epoch, progress.end_epoch, n_batches, first_batch,
                                               augmenter.first_epoch if augmenter else 0]
                             + self.session.run([self.global_step, self.learning_rate]))
        return first_batch

    def _between_steps(self, state):
        """Decisions that change which collectives run (stop, timed save, commit) come from values the
        same on every rank: one allreduce a step (~2-3 ms under Horovod on localhost, free on one process)
        carries the signals and the save timers, so a stop fits in horovodrun's 5 s SIGTERM grace and
        no rank enters a save's broadcast while another is in the next step's allreduce."""
        *votes, save = self.dist.sum(self.session, self.stop_requests.votes() + [self._save_due()])
        exit_code = self.stop_requests.exit_code(votes)
        if exit_code:
            raise Interrupted(exit_code)
        commit_steps = self.training_settings.horovod_elastic_commit_steps
        if save:
            self._save_train(state)
        elif commit_steps and state.progress.steps_run % commit_steps == 0:
            state.commit()      # free unless elastic
        state.check_host_updates()

    def _save_due(self):
        """This rank's clock says a timed save is due: --checkpoint_secs since the last save. With 0 or less
        never, as in DeepSpeech 0.9 (a train checkpoint at each epoch's end only)."""
        every = self.settings.checkpoints.checkpoint_secs
        return every > 0 and time.time() - self.last_save > every

    def _finish_epoch(self, progress, totals, seconds_per_step):
        loss_sum, count = self._epoch_loss(progress, totals)
        log_info('Finished training epoch {} - loss: {:.6f}{}, effective learning rate: {:g}, {:.3f} s/step'
                 .format(progress.epoch, loss_sum / count,
                         ' (mean over {} ranks)'.format(self.dist.size) if self.dist.size > 1 else '',
                         self.session.run(self.rate), seconds_per_step))
        self.summaries.scalars('train', self.session.run(self.global_step), loss=loss_sum / count)
        if self.feature_cache:
            self.feature_cache.save()

    def _epoch_loss(self, progress, totals):
        """(loss sum, sample count) over all ranks of the current epoch's batches done: `totals` (this
        rank's, of this run) summed over the ranks, plus those of an earlier run resumed mid-epoch."""
        loss_sum, count = self.dist.sum(self.session, [totals.loss_sum, totals.count])
        return loss_sum + progress.loss_before[0], count + progress.loss_before[1]

    def _save_train(self, state, commit=True):
        """Save the train checkpoint with the epoch position; commit unless `commit` is False (the
        ranks are stopping). Returns the checkpoint's path (None on other ranks than the chief)."""
        self._store_position(state.progress)
        path = self.checkpointer.save_train(self.session, self.global_step)
        self.last_save = time.time()
        if commit:
            state.commit()      # a rank failing from here on takes the others back to this step
        return path

    def _store_position(self, progress):
        """Put `progress`'s epoch position into the variable the next checkpoint saves."""
        self.session.run(self.set_epoch_position, {self.new_position: [progress.epoch, progress.batches_done,
                                                                      progress.batches_planned]})
        # A collective: every rank stores its position (saves are agreed), rank 0's is saved.
        self.session.run(self.set_epoch_loss, {self.new_epoch_loss: self._epoch_loss(progress, self.epoch_totals)})

    def _validate(self, progress):
        """Validate, save best_dev, reduce the learning rate on a plateau; True when training should stop
        early. The dev loss is summed over all dev sets and ranks, so every rank decides the same."""
        if progress.tracker.best_loss is None:
            progress.tracker.best_loss = self._best_dev_loss_now(progress.epoch)
        dev_loss = self._dev_loss(progress.epoch)
        self.summaries.scalars('dev', self.session.run(self.global_step), loss=dev_loss)
        decision = progress.tracker.update(dev_loss)
        if decision.save_best:
            self._store_position(progress)
            path = self.checkpointer.save_best(self.session, self.global_step, dev_loss)
            log_info('Saved new best validating model with loss {:.6f} to: {}'.format(dev_loss, path))
        if decision.stop:
            log_info('Early stop triggered as the loss did not improve the last {} epochs'
                     .format(progress.tracker.epochs_without_improvement))
            return True
        if decision.plateau:
            self._reduce_learning_rate()
        return False

    def _dev_loss(self, epoch, log_sets=True):
        """The loss over all dev sets and ranks; each set's in DeepSpeech 0.9's line when `log_sets`."""
        all_sets = LossTotals()
        for source, validation in zip(self.dev_sources, self.validations):
            loss_sum, count = self._set_loss(validation, epoch)
            if log_sets:
                log_info('Finished validating epoch {} on {} - loss: {:.6f}'.format(epoch, source, loss_sum / count))
            all_sets.loss_sum, all_sets.count = all_sets.loss_sum + loss_sum, all_sets.count + count
        return all_sets.loss_sum / all_sets.count

    def _best_dev_loss_now(self, epoch):
        """The dev loss of the saved best_dev, evaluated now because it is not known (best_dev_loss.json
        unreadable): without it this validation would replace best_dev whatever its loss. Every rank
        gets here (the unknown loss came from rank 0 with the progress) and runs the same collectives;
        rank 0 lends best_dev's weights for the pass and says whether it could (inf if not)."""
        with self.checkpointer.best_dev_weights(self.session) as lent:
            self.session.run(self.broadcast)
            loss = self._dev_loss(epoch, log_sets=False)
            readable = self.dist.sum(self.session, [float(lent)])[0] > 0
        self.session.run(self.broadcast)
        if not readable:
            return math.inf
        log_info('Evaluated the saved best_dev on the dev set(s): loss {:.6f}'.format(loss))
        self.checkpointer.record_best_loss(loss)
        return loss

    def _set_loss(self, iterator, epoch):
        """(loss sum, sample count) of one pass over an evaluation set, summed over the ranks: every rank
        gets the same, so the decisions taken from it are the same."""
        totals = run_set(self.session, iterator, self.forward, epoch)
        return self.dist.sum(self.session, [totals.loss_sum, totals.count])

    def _report_metrics(self, epoch):
        """--metrics_files: each file's loss in DeepSpeech 0.9's line, for the user to follow; unlike the
        dev loss it decides nothing (best_dev, early stop and plateaus read the dev sets only)."""
        for source, metrics in zip(self.metrics_sources, self.metrics):
            loss_sum, count = self._set_loss(metrics, epoch)
            log_info('Metrics for epoch {} on {} - loss: {:.6f}'.format(epoch, source, loss_sum / count))

    def _reduce_learning_rate(self):
        """Back to best_dev's weights (rank 0 loads, then broadcasts) with the rate x --plateau_reduction."""
        reduced = self.session.run(self.learning_rate) * self.training_settings.plateau_reduction
        self.checkpointer.reload_best(self.session)
        self.session.run(self.broadcast)
        self.session.run(self.set_learning_rate, {self.new_rate: reduced})
        log_info('Encountered a plateau, reducing learning rate to {:g} (effective {:g}; best_dev reloaded)'
                 .format(reduced, reduced * self.dist.size))
        self.dist.check_same(self.session, 'the learning rate after a plateau', [self.session.run(self.learning_rate)])

    def _write_flags(self, flags_text):
        if self.dist.is_chief:
            os.makedirs(self.settings.checkpoints.save_dir, exist_ok=True)
            with open(os.path.join(self.settings.checkpoints.save_dir, 'flags.txt'), 'w') as out:
                out.write(flags_text)
