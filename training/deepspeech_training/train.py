"""main(), train() and test(): one training loop for one process and for Horovod.

Everything that differs between the two paths goes through the `dist` seam (distributed.py);
side effects (checkpoints, summaries, flags.txt, reports) happen on the chief only.
"""
import math
import os
import signal
import sys
import threading
import time

import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from absl import app

from . import distributed
from .evaluate import Decoder, decode_set, report, write_test_output
from .export import export
from .graph import InputSet, build_forward, build_input, run_set, seed_graph
from .util import logging
from .util.augmentations import Augmenter, parse_augmentations
from .util.batching import SetTooSmallError, eval_batches, train_batches
from .util.checkpoints import CheckpointError, Checkpointer, check_space, check_writable, checkpoint_bytes
from .util.config import config_from_flags, session_config
from .util.early_stopping import DevTracker
from .util.feature_cache import open_feature_cache
from .util.flags import FLAGS, create_flags, effective_dropout_rates, split_files
from .util.logging import log_info
from .util.scorer import ScorerError, load_scorer
from .util.samples import DataError, SampleRecord, read_sources
from .util.validation import validate_input


def read_set(csv_paths, config, limit, reverse, kind):
    records = read_sources(csv_paths, config.alphabet, limit=limit, reverse=reverse)
    if not records:
        raise DataError(['{}: no samples in {}'.format(kind, ', '.join(csv_paths))])
    return records      # their audio is checked by validate_input(), all sets at once


def train_set(records, dist, config):
    def plan(epoch):
        return train_batches(len(records), FLAGS.train_batch_size, dist.size, dist.rank, epoch,
                             FLAGS.random_seed, FLAGS.shuffle_batches)
    plan(0)  # a set too small for ranks x batch fails here, before any work
    augmenter = None
    if FLAGS.augment:
        augmenter = Augmenter(parse_augmentations(FLAGS.augment), FLAGS.random_seed, FLAGS.epochs)
    feature_cache = open_feature_cache(FLAGS.feature_cache, records, config, FLAGS, dist.rank, dist.size)
    return InputSet('Training', records, plan, FLAGS.train_batch_size, augmenter, feature_cache)


def eval_set(name, records, batch_size, dist):
    def plan(epoch):
        return eval_batches(len(records), batch_size, dist.size, dist.rank)
    return InputSet(name, records, plan, batch_size)


def create_session(dist):
    intra, inter = dist.threads_per_process()
    intra, inter = FLAGS.intra_op_parallelism_threads or intra, FLAGS.inter_op_parallelism_threads or inter
    if dist.size > 1:
        log_info('{} rank(s) on this host: {} intra-op and {} inter-op thread(s) each; Horovod cycle time {} ms, '
                 'fusion buffer {} bytes'.format(dist.local_size, intra, inter,
                                                 os.environ.get('HOROVOD_CYCLE_TIME', '1'),
                                                 os.environ.get('HOROVOD_FUSION_THRESHOLD', 128 * 1024 * 1024)))
    return tfv1.Session(config=session_config(intra, inter, dist.visible_gpu()))


def effective_learning_rate(learning_rate, global_step, size, steps_per_epoch):
    """learning_rate x ranks, ramped up linearly from learning_rate during the warm-up (Goyal et al.).

    `size` is a tensor, the number of ranks when the step runs (an elastic reset changes it). The
    warm-up counts optimizer updates: with gradient accumulation global_step counts batches."""
    warmup = FLAGS.warmup_steps or FLAGS.warmup_epochs * steps_per_epoch / FLAGS.horovod_backward_passes_per_step
    if not warmup:
        return learning_rate * size
    updates = tf.cast(global_step // FLAGS.horovod_backward_passes_per_step, tf.float32)
    progress = tf.minimum(updates / float(warmup), 1.0)
    return learning_rate * (1.0 + (size - 1.0) * progress)


class Summaries:
    """TensorBoard scalars under summary_dir/{train,dev}, written by the chief."""

    def __init__(self, summary_dir, is_chief):
        self.writers = {}
        if is_chief:
            self.writers = {kind: tfv1.summary.FileWriter(os.path.join(summary_dir, kind)) for kind in ('train', 'dev')}

    def scalars(self, kind, step, **values):
        if kind in self.writers:
            summary = tfv1.Summary(value=[tfv1.Summary.Value(tag=tag, simple_value=float(value))
                                          for tag, value in values.items()])
            self.writers[kind].add_summary(summary, step)

    def close(self):
        for writer in self.writers.values():
            writer.close()


# Steps between two agreements on a stop request: an allreduce under Horovod (measured ~2-3 ms a step
# on localhost), free on one process. Every step, so a stop fits in horovodrun's 5 s SIGTERM grace.
STOP_CHECK_STEPS = 1


class Interrupted(Exception):
    """Training stopped on SIGINT/SIGTERM after a train checkpoint of the current step was saved."""

    def __init__(self, exit_code):
        super().__init__('interrupted')
        self.exit_code = exit_code


class StopRequests:
    """SIGINT and SIGTERM only set a flag (the handler saves nothing); the train loop reads it between
    steps, and all ranks agree on it so they stop at the same step."""

    def __init__(self):
        self.signum, self.previous = 0, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:   # e.g. SIGINT of a `cmd &` job
                    self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, _frame):
        self.signum = self.signum or signum

    def __exit__(self, *_):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def agreed(self, session, dist):
        """None, or the exit code all ranks use: 130 if any rank got SIGINT, else 143 (SIGTERM)."""
        stop, sigint = dist.sum(session, [self.signum != 0, self.signum == signal.SIGINT])
        if stop:
            return 128 + (signal.SIGINT if sigint else signal.SIGTERM)
        return None


def train(dist, config, train_records, dev_sets):
    """Train for FLAGS.epochs epochs, validating on `dev_sets` (name -> records) after each."""
    tfv1.reset_default_graph()
    seed_graph(FLAGS.random_seed, dist.rank)
    training = train_set(train_records, dist, config)
    validations = [eval_set('Validation ' + name, records, FLAGS.dev_batch_size, dist)
                   for name, records in dev_sets.items()]
    forward = build_forward(build_input([training] + validations, config, FLAGS.audio_sample_rate,
                                        FLAGS.normalize_sample_rate), config, FLAGS.relu_clip)
    global_step = tfv1.train.get_or_create_global_step()
    # Stored unscaled, so a checkpoint means the same whatever the number of ranks resuming it.
    learning_rate = tfv1.get_variable('learning_rate', initializer=FLAGS.learning_rate, trainable=False)
    new_rate = tfv1.placeholder(tf.float32, [])
    set_learning_rate = learning_rate.assign(new_rate)
    rate = effective_learning_rate(learning_rate, global_step, dist.size_tensor(), training.n_batches())
    optimizer = dist.wrap_optimizer(tfv1.train.AdamOptimizer(rate, beta1=FLAGS.beta1, beta2=FLAGS.beta2,
                                                             epsilon=FLAGS.epsilon),
                                    FLAGS.horovod_fp16_compression, FLAGS.horovod_backward_passes_per_step)
    train_op = optimizer.minimize(forward.mean_loss, global_step=global_step)
    broadcast = dist.broadcast_op()
    checkpointer = Checkpointer(config.load_checkpoint_dir, config.save_checkpoint_dir, FLAGS.max_to_keep,
                                dist.is_chief)
    if dist.is_chief:
        check_space(config.save_checkpoint_dir, 2 * checkpoint_bytes(), 'checkpoints')
    summaries = Summaries(config.summary_dir, dist.is_chief)
    train_feed = dict(zip(forward.dropout_rates, effective_dropout_rates()))

    with create_session(dist) as session, StopRequests() as stop_requests:
        checkpointer.load_for_training(session, FLAGS.load_train, FLAGS.drop_source_layers, FLAGS.load_cudnn)
        if FLAGS.force_initialize_learning_rate:
            session.run(set_learning_rate, {new_rate: FLAGS.learning_rate})
        write_flags(config, dist)
        # What an elastic reset keeps besides the variables, synced from rank 0 with them. epoch None:
        # not started yet (taken from the synced global_step). batch: batches done of `batches`, the
        # epoch's length when it was planned (a reset plans the rest anew for the new number of ranks).
        state = dist.training_state(
            session, broadcast, epoch=None, end_epoch=None, batch=0, batches=0, steps_run=0,
            tracker=DevTracker(checkpointer.best_dev_loss() if dist.is_chief else math.inf, FLAGS.es_min_delta,
                               FLAGS.es_epochs if FLAGS.early_stop else None,
                               FLAGS.plateau_epochs if FLAGS.reduce_lr_on_plateau else None))
        last_save = time.time()

        def save_train():
            nonlocal last_save
            path = checkpointer.save_train(session, global_step)
            last_save = time.time()
            state.commit()      # a rank failing from here on takes the others back to this step
            return path

        def after_step(values):
            summaries.scalars('train', values['step'], step_loss=values['mean_loss'], learning_rate=values['rate'])
            state.batch += 1
            state.steps_run += 1    # counted here, not read from global_step: the same on every rank
            if state.steps_run % STOP_CHECK_STEPS == 0:
                exit_code = stop_requests.agreed(session, dist)
                if exit_code:
                    raise Interrupted(exit_code)
            if time.time() - last_save > FLAGS.checkpoint_secs:
                save_train()
            elif FLAGS.horovod_elastic_commit_steps and state.steps_run % FLAGS.horovod_elastic_commit_steps == 0:
                state.commit()      # free unless elastic
            state.check_host_updates()

        def train_epoch(epoch, first_batch):
            started = time.time()
            loss_sum, count = run_set(session, training, forward, epoch, feed=train_feed, on_batch=after_step,
                                      first_batch=first_batch,
                                      extra_fetches=dict(train=train_op, step=global_step, rate=rate,
                                                         mean_loss=forward.mean_loss))
            seconds_per_step = (time.time() - started) / (state.batches - first_batch)
            loss_sum, count = dist.sum(session, [loss_sum, count])
            log_info('Finished training epoch {} - loss: {:.6f}, effective learning rate: {:g}, '
                     '{:.3f} s/step'.format(epoch, loss_sum / count, session.run(rate), seconds_per_step))
            summaries.scalars('train', session.run(global_step), loss=loss_sum / count)
            if training.feature_cache:
                training.feature_cache.save()
            save_train()

        def after_validation(epoch):
            """Validate; True when training should stop early."""
            dev_loss = validate(session, validations, forward, dist, epoch)
            summaries.scalars('dev', session.run(global_step), loss=dev_loss)
            decision = state.tracker.update(dev_loss)
            if decision.save_best:
                path = checkpointer.save_best(session, global_step, dev_loss)
                log_info('Saved new best validating model with loss {:.6f} to: {}'.format(dev_loss, path))
            if decision.stop:
                log_info('Early stop triggered as the loss did not improve the last {} epochs'
                         .format(state.tracker.epochs_without_improvement))
                return True
            if decision.plateau:
                reduced = session.run(learning_rate) * FLAGS.plateau_reduction
                checkpointer.reload_best(session)
                session.run(broadcast)
                session.run(set_learning_rate, {new_rate: reduced})
                log_info('Encountered a plateau, reloaded best_dev and reduced the learning rate to {:g} '
                         '(effective {:g})'.format(reduced, reduced * dist.size))
                dist.check_same(session, 'the learning rate after a plateau', [session.run(learning_rate)])
            return False

        def train_epochs(state):
            """The epochs from `state` on; run again after each elastic reset, with the new ranks."""
            logging.configure(dist.rank, dist.size, FLAGS.show_progressbar)
            checkpointer.is_chief = dist.is_chief   # after a reset rank 0 may be another process
            if state.epoch is None:
                state.epoch = session.run(global_step) // training.n_batches()
                state.end_epoch = state.epoch + FLAGS.epochs
                if training.augmenter:
                    training.augmenter.first_epoch = state.epoch    # the clock of A:B ranges runs over this run
            for input_set in [training] + validations:
                input_set.position = None   # after a reset the plans are the new ranks': start anew
                input_set.end_epoch = state.end_epoch
            base_rate = session.run(learning_rate)
            log_info('Training from global step {} (epoch {}), learning rate {:g} x {} rank(s) = {:g}{}'
                     .format(session.run(global_step), state.epoch, base_rate, dist.size, base_rate * dist.size,
                             ' after a warm-up' if FLAGS.warmup_steps or FLAGS.warmup_epochs else ''))
            while state.epoch < state.end_epoch:
                n_batches = training.n_batches(state.epoch)
                first_batch = state.batch * n_batches // state.batches if state.batches else 0
                state.batch, state.batches = first_batch, n_batches
                # Guard: ranks that disagree here would hang in the next allreduce; fail instead.
                dist.check_same(session, 'epoch, batches, first batch, global step, learning rate',
                                [state.epoch, n_batches, first_batch] + session.run([global_step, learning_rate]))
                if first_batch < n_batches:     # else a reset came during this epoch's validation
                    train_epoch(state.epoch, first_batch)
                if validations and after_validation(state.epoch):
                    break
                state.epoch, state.batch, state.batches = state.epoch + 1, 0, 0
                state.commit()

        try:
            dist.run(state, train_epochs)
        except Interrupted:
            path = checkpointer.save_train(session, global_step)
            if dist.is_chief:
                log_info('Interrupted at global step {}, saved {}'.format(session.run(global_step), path))
            dist.sum(session, [0.0])    # no rank exits (and makes horovodrun kill rank 0) before the save
            raise
        finally:
            summaries.close()
            if training.feature_cache:
                training.feature_cache.close()


def validate(session, validations, forward, dist, epoch):
    """Sample-weighted mean dev loss over all dev sets and all ranks (the same on every rank)."""
    totals = []
    for validation in validations:
        loss_sum, count = dist.sum(session, run_set(session, validation, forward, epoch))
        log_info('Finished {} epoch {} - loss: {:.6f}'.format(validation.name, epoch, loss_sum / count))
        totals.append((loss_sum, count))
    return sum(t[0] for t in totals) / sum(t[1] for t in totals)


def write_flags(config, dist):
    if dist.is_chief:
        os.makedirs(config.save_checkpoint_dir, exist_ok=True)
        with open(os.path.join(config.save_checkpoint_dir, 'flags.txt'), 'w') as out:
            out.write(FLAGS.flags_into_string())


def build_evaluation(config, sets, dist):
    """The graph that decodes `sets` from a checkpoint: input, forward pass, checkpointer, broadcast."""
    tfv1.reset_default_graph()
    forward = build_forward(build_input(sets, config, FLAGS.audio_sample_rate, FLAGS.normalize_sample_rate),
                            config, FLAGS.relu_clip)
    tfv1.train.get_or_create_global_step()
    tfv1.get_variable('learning_rate', initializer=FLAGS.learning_rate, trainable=False)
    checkpointer = Checkpointer(config.load_checkpoint_dir, config.save_checkpoint_dir, FLAGS.max_to_keep,
                                dist.is_chief)
    return forward, checkpointer, dist.broadcast_op()


def test(dist, config, test_sets, decoder):
    """Decode each test set from the checkpoint --load_evaluate picks; print DeepSpeech's report."""
    sets = [eval_set('Test ' + name, records, FLAGS.test_batch_size, dist) for name, records in test_sets.items()]
    for input_set in sets:
        input_set.end_epoch = 1     # one pass
    forward, checkpointer, broadcast = build_evaluation(config, sets, dist)
    all_results, metrics = [], {}
    with create_session(dist) as session:
        checkpointer.load_for_evaluation(session, FLAGS.load_evaluate)
        session.run(broadcast)
        for test_set, name in zip(sets, test_sets):
            results = decode_set(session, test_set, forward, decoder, dist)
            if dist.is_chief:
                metrics[name] = report(name, results, FLAGS.report_count)
                all_results += results
    if dist.is_chief and FLAGS.test_output_file:
        write_test_output(FLAGS.test_output_file, all_results)
    return metrics


def transcribe(config, wav_paths, decoder):
    """Transcripts of WAV files from the --load_evaluate checkpoint (the test graph, without labels)."""
    single = distributed.Single()
    records = [SampleRecord(path, 0, '', (0,), path, 0) for path in wav_paths]
    input_set = eval_set('Transcribing', records, 1, single)
    forward, checkpointer, _ = build_evaluation(config, [input_set], single)
    with create_session(single) as session:
        checkpointer.load_for_evaluation(session, FLAGS.load_evaluate)
        return [r.res for r in decode_set(session, input_set, forward, decoder, single)]


def main(_):
    dist = distributed.init(FLAGS.horovod, FLAGS.horovod_elastic)
    logging.configure(dist.rank, dist.size, FLAGS.show_progressbar)
    if not (FLAGS.train_files or FLAGS.test_files or FLAGS.export_dir or FLAGS.one_shot_infer):
        raise app.UsageError('nothing to do: give --train_files (and --dev_files) to train, --test_files to test, '
                             '--export_dir to export or --one_shot_infer to transcribe a file')
    config = config_from_flags()
    try:
        # All input is read and checked before any graph is built or file written.
        train_records = dev_sets = test_sets = None
        if FLAGS.train_files:
            train_records = read_set(split_files(FLAGS.train_files), config, FLAGS.limit_train, FLAGS.reverse_train,
                                     'train')
            dev_sets = {p: read_set([p], config, FLAGS.limit_dev, FLAGS.reverse_dev, 'dev')
                        for p in split_files(FLAGS.dev_files)}
        if FLAGS.test_files:
            test_sets = {p: read_set([p], config, FLAGS.limit_test, FLAGS.reverse_test, 'test')
                         for p in split_files(FLAGS.test_files)}
        # Every sample's audio (header only), the same outcome on every rank, before any collective.
        train_records, dev_sets, test_sets = validate_input(dist.before_sync(), config, train_records, dev_sets,
                                                            test_sets, FLAGS.audio_sample_rate,
                                                            FLAGS.normalize_sample_rate, FLAGS.skip_invalid_samples)
        # A bad scorer fails here, not after hours of training.
        decoder = Decoder(config.alphabet, load_scorer(FLAGS.scorer_path, FLAGS.lm_alpha, FLAGS.lm_beta,
                                                       FLAGS.alphabet_config_path, FLAGS.bytes_output_mode)
                          if FLAGS.scorer_path else None)
        if train_records and dist.is_chief:
            check_writable(config.save_checkpoint_dir, 'checkpoints')
            check_writable(config.summary_dir, 'summaries')
        if train_records:
            train(dist, config, train_records, dev_sets)
        if test_sets:
            test(dist, config, test_sets, decoder)
        if FLAGS.export_dir and dist.is_chief:
            export(config)
        if FLAGS.one_shot_infer and dist.is_chief:
            print(transcribe(config, [FLAGS.one_shot_infer], decoder)[0])
    except (DataError, SetTooSmallError, CheckpointError, ScorerError, distributed.RankDivergenceError) as error:
        logging.log_error(str(error))
        sys.exit(1)
    except Interrupted as interrupted:
        # 130 after SIGINT, 143 after SIGTERM. Under Horovod only rank 0 says so: a non-zero exit of
        # another rank would make horovodrun kill rank 0 while it shuts down. Logged too, because
        # horovodrun 0.28.1 may report 0 for ranks it stopped itself (doc/HOROVOD.rst).
        log_info('Exiting with code {}'.format(interrupted.exit_code))
        sys.exit(interrupted.exit_code if dist.is_chief else 0)


def run_script(entry=None):
    """Start a command-line tool on the training flags: DeepSpeech.py's main, or `entry`."""
    tfv1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')   # TensorFlow's Python deprecation notices drown our log
    create_flags()
    app.run(entry or main)
