"""The Trainer: one training run, the same for one process, fixed-size Horovod and elastic Horovod.

Everything that differs between them goes through the `dist` seam (distributed.py): `dist.run` calls
`Trainer.train_epochs` once, or again after each elastic reset. Side effects (checkpoints, summaries,
flags.txt, info logs) happen on the chief, asked of `dist` every time.
"""
import math
import os
import time
from datetime import datetime


from .checkpoint_names import FLAGS_FILE
from .checkpoints import Checkpointer, check_space, checkpoint_bytes
from .data.plans import eval_set, train_set
from .ema import WeightAverageSaver
from .session import create_session
from .signals import Interrupted, StopRequests
from .step_runner import LossTotals, run_set, set_steps
from .summaries import Summaries
from .training_progress import new_progress, resume
from .train_graph import build_training_run
from .util import startup
from .util.logging import log_info, log_warn


class Trainer:
    """Owns a training run: its graph, session, checkpointer, summaries and the epoch loop."""

    def __init__(self, dist, settings, train_records, dev_sets, metrics_sets=None):
        """Build the graph: `train_records` to train on, `dev_sets` (name -> records) to validate on,
        `metrics_sets` (name -> records, --metrics_files) to report the loss of after each validation."""
        self.dist, self.settings = dist, settings
        config, training = settings.model, settings.training
        self.training_settings = training
        sets = [train_set(train_records, dist, config, training)]
        sets += [eval_set('Validation ' + name, records, training.dev_batch_size, dist)
                 for name, records in dev_sets.items()]
        sets += [eval_set('Metrics ' + name, records, training.dev_batch_size, dist)
                 for name, records in (metrics_sets or {}).items()]
        startup.mark('planning')
        run = build_training_run(sets, settings, dist)
        self.training, evaluations = run.iterators[0], run.iterators[1:]
        self.validations, self.metrics = evaluations[:len(dev_sets)], evaluations[len(dev_sets):]
        self.dev_sources, self.metrics_sources = list(dev_sets), list(metrics_sets or {})
        self.feature_cache = sets[0].feature_cache
        self.step = run.step
        self.variables = self.step.variables
        self.epoch_totals = LossTotals()   # this rank's, of the current epoch's batches run by this run
        self.broadcast = dist.broadcast_op()
        self.checkpointer = Checkpointer.from_settings(settings.checkpoints, dist)
        self.average = (WeightAverageSaver.from_settings(self.step.average, settings.checkpoints, dist)
                        if self.step.average else None)
        if dist.is_chief:   # a train and a best_dev checkpoint, and the average's
            check_space(settings.checkpoints.save_dir, (2 + bool(self.average)) * checkpoint_bytes(), 'checkpoints')
        self.summaries = Summaries(training.summary_dir, dist)
        self.session, self.last_save = None, None

    def run(self):
        """Load (or initialise) the variables, write the run's flags to flags.txt and train; raises
        Interrupted after saving when a signal stopped the run."""
        checkpoints, training = self.settings.checkpoints, self.training_settings
        with create_session(self.dist, self.settings.session) as self.session, StopRequests() as self.stop_requests:
            loaded = self.checkpointer.load_for_training(self.session, checkpoints.load_train,
                                                         checkpoints.drop_source_layers, checkpoints.load_cudnn)
            if self.average:
                from_checkpoint = loaded not in ('init', 'broadcast from rank 0') and not checkpoints.drop_source_layers
                self.average.resume(self.session, self._global_step(), from_checkpoint)
            startup.mark('graph')
            if training.force_initialize_learning_rate:
                self.variables.set_learning_rate(self.session, training.learning_rate)
            elif loaded not in ('init', 'broadcast from rank 0'):
                self._warn_kept_learning_rate(loaded)
            self._write_flags(self.settings.run.flags_text)
            progress = new_progress(self.checkpointer.best_dev_loss() if self.dist.is_chief else math.inf, training)
            state = self.dist.training_state(self.session, self.broadcast, progress)
            self.last_save = time.time()
            started = datetime.utcnow()
            log_info('STARTING Optimization')
            try:
                self.dist.run(state, self.train_epochs)
                log_info('FINISHED optimization in {}'.format(datetime.utcnow() - started))
            except Interrupted:
                path = self._save_train(state, commit=False)
                log_info('Interrupted at global step {}, saved {}'.format(self._global_step(), path))
                self.dist.barrier(self.session)  # no rank exits (and makes horovodrun kill rank 0) before the save
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
                for values in set_steps(self.session, self.training, self.step.forward, progress.epoch,
                                        self.step.fetches(), self.step.feed, first_batch, totals,
                                        batch_feed=lambda batch: self._run_position(progress, batch)):
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
            resume(progress, *self.session.run([self.variables.epoch_position, self.variables.epoch_loss,
                                                self.variables.global_step]), self.training.n_batches(),
                   self.training_settings)
        if self.training.input_set.augmenter:   # A:B ranges run over the epochs, on joiners too
            self.training.input_set.augmenter.first_epoch = progress.first_epoch
        for iterator in [self.training] + self.validations + self.metrics:
            iterator.restart(progress.end_epoch)
        base_rate = self.session.run(self.variables.learning_rate)
        training = self.training_settings
        log_info('Training from global step {} (epoch {}), learning rate {:g} x {} rank(s) = {:g}{}{}'
                 .format(self._global_step(), progress.epoch, base_rate, self.dist.size, base_rate * self.dist.size,
                         ' after a warm-up' if training.warmup_steps or training.warmup_epochs else '',
                         '' if self.step.run_position is None else ', {} schedule over epochs {}-{}, down to 0 at the '
                         'end'.format(training.lr_schedule, progress.first_epoch, progress.end_epoch - 1)))
        return progress

    def _run_position(self, progress, batch):
        """The feed of --lr_schedule's run position before `batch` of the current epoch: the fraction of the
        run's epochs (from progress.first_epoch to progress.end_epoch, as the augmentations' ranges) done."""
        if self.step.run_position is None:
            return {}
        done = progress.epoch - progress.first_epoch + batch / progress.batches_planned
        return {self.step.run_position: done / (progress.end_epoch - progress.first_epoch)}

    def _warn_kept_learning_rate(self, path):
        """DeepSpeech 0.9 keeps the checkpoint's learning rate over --learning_rate: say so when they differ."""
        kept, given = float(self.session.run(self.variables.learning_rate)), self.training_settings.learning_rate
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
                             + self.session.run([self.variables.global_step, self.variables.learning_rate]))
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
                         self.session.run(self.step.rate, self._run_position(progress, progress.batches_planned - 1)),
                         seconds_per_step))
        self.summaries.scalars('train', self._global_step(), loss=loss_sum / count)
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
        path = self.checkpointer.save_train(self.session, self.variables.global_step)
        if self.average:
            self.average.save(self.session, self._global_step())
        self.last_save = time.time()
        if commit:
            state.commit()      # a rank failing from here on takes the others back to this step
        return path

    def _store_position(self, progress):
        """Put `progress`'s epoch position into the variable the next checkpoint saves."""
        self.variables.set_epoch_position(self.session, [progress.epoch, progress.batches_done,
                                                         progress.batches_planned])
        # A collective: every rank stores its position (saves are agreed), rank 0's is saved.
        self.variables.set_epoch_loss(self.session, self._epoch_loss(progress, self.epoch_totals))

    def _validate(self, progress):
        """Validate, save best_dev, reduce the learning rate on a plateau; True when training should stop
        early. The dev loss is summed over all dev sets and ranks, so every rank decides the same."""
        if progress.tracker.best_loss is None:
            progress.tracker.best_loss = self._best_dev_loss_now(progress.epoch)
        dev_loss = self._dev_loss(progress.epoch)
        self.summaries.scalars('dev', self._global_step(), loss=dev_loss)
        decision = progress.tracker.update(dev_loss)
        if decision.save_best:
            self._store_position(progress)
            path = self.checkpointer.save_best(self.session, self.variables.global_step, dev_loss)
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
        totals = run_set(self.session, iterator, self.step.forward, epoch)
        return self.dist.sum(self.session, [totals.loss_sum, totals.count])

    def _report_metrics(self, epoch):
        """--metrics_files: each file's loss in DeepSpeech 0.9's line, for the user to follow; unlike the
        dev loss it decides nothing (best_dev, early stop and plateaus read the dev sets only)."""
        for source, metrics in zip(self.metrics_sources, self.metrics):
            loss_sum, count = self._set_loss(metrics, epoch)
            log_info('Metrics for epoch {} on {} - loss: {:.6f}'.format(epoch, source, loss_sum / count))

    def _reduce_learning_rate(self):
        """Back to best_dev's weights (rank 0 loads, then broadcasts) with the rate x --plateau_reduction."""
        reduced = self.session.run(self.variables.learning_rate) * self.training_settings.plateau_reduction
        self.checkpointer.reload_best(self.session)
        self.session.run(self.broadcast)
        self.variables.set_learning_rate(self.session, reduced)
        log_info('Encountered a plateau, reducing learning rate to {:g} (effective {:g}; best_dev reloaded)'
                 .format(reduced, reduced * self.dist.size))
        self.dist.check_same(self.session, 'the learning rate after a plateau',
                             [self.session.run(self.variables.learning_rate)])

    def _global_step(self):
        return self.session.run(self.variables.global_step)

    def _write_flags(self, flags_text):
        if self.dist.is_chief:
            os.makedirs(self.settings.checkpoints.save_dir, exist_ok=True)
            with open(os.path.join(self.settings.checkpoints.save_dir, FLAGS_FILE), 'w') as out:
                out.write(flags_text)
