"""The trainer's collective logic with two ranks in one process (tests/helpers/threaded_dist.py): the
real Trainer, on real speech and a tiny model, with collectives that really combine the ranks' values.
What only a real horovodrun shows (launch, the wire, faults) stays in test_horovod.py and test_faults.py.
"""
import dataclasses
import os
import signal

import numpy as np
import pytest
import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from tensorflow.python.eager import context

from tests.helpers.suite import SMOKE_CSV, make_corpus, settings_from_args
from deepspeech_training import distributed
from deepspeech_training.checkpoints import check_writable
from deepspeech_training.data.validation import validate_groups
from deepspeech_training import evaluate
from deepspeech_training.decoding import Decoder
from deepspeech_training.signals import Interrupted
from deepspeech_training.trainer import Trainer
from deepspeech_training.util import logging

from tests.helpers.threaded_dist import RendezvousError, run_ranks, threaded_ranks

STEPS_PER_EPOCH = 3       # six train samples, batch size 1, two ranks


@pytest.fixture(scope='module', autouse=True)
def quiet_logging():
    """No progress bars from the rank threads (util/logging's state is the process's)."""
    saved = dict(logging._state)
    logging.configure(None, show_progressbar=False)
    yield
    logging._state.update(saved)


@pytest.fixture(scope='module')
def train_csv(tmp_path_factory):
    """Six different utterances (the ranks' shards must differ for their gradients to)."""
    return make_corpus(tmp_path_factory.mktemp('corpus'), 2 * STEPS_PER_EPOCH + 2, seed=3) / 'train.csv'


def settings_from(tmp_path, train_csv, *args):
    """(Settings, flags.txt text, the input read) as DeepSpeech.py builds them from `args`; the
    bundled smoke-test speech (three utterances, shards of 2 and 1) is the dev set."""
    return settings_from_args('--train_files', train_csv, '--dev_files', SMOKE_CSV, '--n_hidden', 16,
                              '--dropout_rate', 0, '--learning_rate', 0.001, '--checkpoint_dir', tmp_path / 'checkpoints',
                              '--summary_dir', tmp_path / 'summaries', *args)


def changed(settings, **training):
    """`settings` with other training settings (one rank's flags differing from the other's)."""
    return dataclasses.replace(settings, training=dataclasses.replace(settings.training, **training))


def rank_settings(tmp_path, train_csv, *args, rank1=None):
    """Both ranks' (settings, flags text, input), each rank with its own checkpoint and summary
    directories (so what a rank writes shows); `rank1` (a dict of training settings) makes rank 1's
    flags differ."""
    both = [settings_from(tmp_path / 'rank{}'.format(rank), train_csv, *args) for rank in (0, 1)]
    if rank1:
        both[1] = (changed(both[1][0], **rank1),) + both[1][1:]
    return both


class RecordingTrainer(Trainer):
    """The Trainer, recording what it decided; `stop_at` = (rank, steps run) sets that rank's signal
    flag there, as SIGTERM's handler would."""
    stop_at = None

    def __init__(self, *args):
        super().__init__(*args)
        self.validations_seen, self.saves, self.stopped_after, self.interrupted, self.final = [], [], None, None, None
        self.set_losses = []    # (set name, (loss sum, sample count)) of each evaluation pass

    def train_epochs(self, state):
        super().train_epochs(state)
        self.final = dict(zip([v.op.name for v in tfv1.global_variables()],
                              self.session.run(tfv1.global_variables())))

    def _between_steps(self, state):
        if self.stop_at == (self.dist.rank, state.progress.steps_run):
            self.stop_requests.signum = signal.SIGTERM
        try:
            super()._between_steps(state)
        except Interrupted:
            self.stopped_after = state.progress.steps_run
            raise

    def _set_loss(self, iterator, epoch):
        loss = super()._set_loss(iterator, epoch)
        self.set_losses.append((iterator.name, tuple(float(value) for value in loss)))
        return loss

    def _save_train(self, state, **kwargs):
        self.saves.append(int(self.session.run(self.variables.global_step)))
        return super()._save_train(state, **kwargs)

    def _validate(self, progress):
        update, first_call = progress.tracker.update, len(self.dist.calls)
        seen = {}

        def recording(dev_loss):
            seen.update(dev_loss=dev_loss, decision=update(dev_loss))
            return seen['decision']
        progress.tracker.update = recording
        try:
            return super()._validate(progress)
        finally:
            del progress.tracker.update     # the tracker is pickled when the state syncs
            seen.update(epoch=progress.epoch, summed=[local for name, local, _ in self.dist.calls[first_call:]
                                                      if name == 'sum' and len(local) == 2])
            self.validations_seen.append(seen)


def train_two_ranks(both_settings, trainer_class=RecordingTrainer, dev=True, metrics=False):
    """Both ranks as DeepSpeech.py's main() trains: input checked (through the gather), then the
    Trainer (with the dev sets as --metrics_files too if `metrics`). Returns each rank's trainer, or the
    exception it raised."""
    def rank_main(dist):
        settings, (train_records, dev_sets, _, _) = both_settings[dist.rank]
        train_records, groups = validate_groups(dist.before_sync(), settings.model, train_records,
                                                {'dev': dev_sets if dev else {}})
        dev_sets = groups['dev']
        if dist.is_chief:
            check_writable(settings.checkpoints.save_dir, 'checkpoints')
            check_writable(settings.training.summary_dir, 'summaries')
        trainer = trainer_class(dist, settings, train_records, dev_sets, dev_sets if metrics else None)
        try:
            trainer.run()
        except Interrupted as interrupted:
            trainer.interrupted = interrupted
        return trainer
    return run_ranks(threaded_ranks(2), rank_main)


def trainers(results):
    for result in results:
        if isinstance(result, BaseException):
            raise AssertionError('a rank failed: {!r}'.format(results)) from result
    return results


def files_under(directory):
    return sorted(os.path.relpath(os.path.join(d, f), directory) for d, _, fs in os.walk(directory) for f in fs)


@pytest.fixture(scope='module')
def decided_run(tmp_path_factory, train_csv):
    """Two ranks, up to 5 epochs with validation; no dev loss improves by es_min_delta, so: best_dev
    after epoch 0, a plateau after epoch 1, the early stop after epoch 2. Rank 1 asks for another
    learning rate: the run's rate is rank 0's (the variables come from rank 0)."""
    tmp_path = tmp_path_factory.mktemp('decided')
    both = rank_settings(tmp_path, train_csv, '--epochs', 5, '--early_stop', '--es_epochs', 2, '--es_min_delta', 1e9,
                         '--reduce_lr_on_plateau', '--plateau_epochs', 1, '--plateau_reduction', 0.5,
                         rank1=dict(learning_rate=0.01))
    return tmp_path, both, trainers(train_two_ranks(both))


def test_dev_loss_is_summed_over_both_shards_and_both_ranks_decide_alike(decided_run):
    _, _, (rank0, rank1) = decided_run
    assert [v['epoch'] for v in rank0.validations_seen] == [0, 1, 2]
    for seen0, seen1 in zip(rank0.validations_seen, rank1.validations_seen):
        (loss0, count0), (loss1, count1) = seen0['summed'][0], seen1['summed'][0]
        assert count0 + count1 == 3     # every dev sample once, the padding weighs nothing
        assert loss0 / count0 != pytest.approx(loss1 / count1)     # the shards' own losses differ...
        expected = (loss0 + loss1) / (count0 + count1)
        assert seen0['dev_loss'] == pytest.approx(expected, rel=1e-12)  # ... each rank decides on the sum
        assert seen1['dev_loss'] == seen0['dev_loss']
        assert seen1['decision'] == seen0['decision'] and seen1['epoch'] == seen0['epoch']
    decisions = [(v['decision'].plateau, v['decision'].stop) for v in rank0.validations_seen]
    assert decisions == [(False, False), (True, False), (False, True)]     # plateau after epoch 1, stop after 2


def test_only_rank0_writes_checkpoints_flags_and_summaries(decided_run):
    tmp_path, _, _ = decided_run
    written = files_under(tmp_path / 'rank0')
    assert 'checkpoints/flags.txt' in written
    assert any(f.startswith('checkpoints/best_dev-') and f.endswith('.index') for f in written)
    assert 'checkpoints/train-{}.index'.format(3 * STEPS_PER_EPOCH) in written
    assert any(f.startswith('summaries/train/events.') for f in written)
    assert any(f.startswith('summaries/dev/events.') for f in written)
    assert not os.path.exists(tmp_path / 'rank1'), files_under(tmp_path / 'rank1')


def test_weights_and_learning_rate_are_equal_on_both_ranks(decided_run):
    _, _, (rank0, rank1) = decided_run
    epoch0 = [[local for name, local, _ in trainer.dist.calls if name == 'sum' and len(local) == 2][0]
              for trainer in (rank0, rank1)]
    assert epoch0[0][0] != pytest.approx(epoch0[1][0])     # the shards differ: unaveraged, the weights would
    assert rank0.final.keys() == rank1.final.keys()
    for name, value in rank0.final.items():
        np.testing.assert_array_equal(rank1.final[name], value, err_msg=name)
    assert rank0.final['learning_rate'] == pytest.approx(0.001 * 0.5)   # rank 0's rate, halved at the plateau
    assert rank0.final['global_step'] == 3 * STEPS_PER_EPOCH


def test_two_rank_test_reports_every_sample_once_from_rank0_checkpoint_alone(decided_run, tmp_path):
    """test(): each rank decodes its shard, rank 0 gathers; rank 1 has no checkpoint (only rank 0
    needs files). The report equals the single-process one."""
    _, both, _ = decided_run
    settings = [s for s, _ in both]
    sets = both[0][1][1]    # the dev set as a test set

    def rank_test(dist):
        decoding = dataclasses.replace(settings[dist.rank].decoding,
                                       test_output_file=str(tmp_path / 'rank{}.json'.format(dist.rank)))
        return evaluate.test(dist, dataclasses.replace(settings[dist.rank], decoding=decoding), sets,
                    Decoder(settings[0].model.alphabet, decoding))

    two_ranks = run_ranks(threaded_ranks(2), rank_test)
    with context.graph_mode():
        single = evaluate.test(distributed.Single(), settings[0], sets, Decoder(settings[0].model.alphabet, settings[0].decoding))
        wav = sets[SMOKE_CSV][0].audio_path
        [transcript] = evaluate.transcribe(settings[0], [wav], Decoder(settings[0].model.alphabet, settings[0].decoding))
    assert two_ranks[1] == {}
    assert two_ranks[0] == single and set(single) == {SMOKE_CSV}
    assert (tmp_path / 'rank0.json').exists() and not (tmp_path / 'rank1.json').exists()
    assert isinstance(transcript, str)


def test_a_stop_request_on_one_rank_stops_both_at_the_same_step_with_a_saved_checkpoint(tmp_path, train_csv):
    class StopOnRank1(RecordingTrainer):
        stop_at = (1, 2)

    rank0, rank1 = trainers(train_two_ranks(rank_settings(tmp_path, train_csv, '--epochs', 2), StopOnRank1, dev=False))
    assert rank0.stopped_after == rank1.stopped_after == 2
    assert rank0.interrupted.exit_code == rank1.interrupted.exit_code == 143
    assert tf.train.latest_checkpoint(str(tmp_path / 'rank0' / 'checkpoints')).endswith('train-2')


def test_a_timed_save_due_on_one_rank_saves_on_both_at_the_same_step(tmp_path, train_csv):
    class DueOnRank1(RecordingTrainer):
        def _save_due(self):
            return self.dist.rank == 1

    both = rank_settings(tmp_path, train_csv, '--epochs', 1, '--checkpoint_secs', 3600, '--max_to_keep', 10)
    rank0, rank1 = trainers(train_two_ranks(both, DueOnRank1, dev=False))
    assert rank0.saves == rank1.saves == [1, 2, 3, 3]   # due after each step on rank 1's clock; the epoch's end
    written = files_under(tmp_path / 'rank0' / 'checkpoints')
    assert all('train-{}.index'.format(step) in written for step in (1, 2, 3)), written


def test_metrics_losses_are_summed_over_the_ranks_like_the_dev_loss(tmp_path, train_csv):
    """--metrics_files on two ranks: each set's loss is that of all its samples (the dev set's three, split
    2 + 1), the same on both ranks, and a metrics set of the dev file has the dev loss."""
    rank0, rank1 = trainers(train_two_ranks(rank_settings(tmp_path, train_csv, '--epochs', 2), metrics=True))
    assert rank0.set_losses == rank1.set_losses
    assert [name.split()[0] for name, _ in rank0.set_losses] == ['Validation', 'Metrics'] * 2
    assert all(count == 3 for _, (_, count) in rank0.set_losses)
    assert rank0.set_losses[0][1] == pytest.approx(rank0.set_losses[1][1])


def test_the_cosine_schedule_feeds_both_ranks_the_same_run_position_down_to_the_end(tmp_path, train_csv):
    """--lr_schedule cosine on two ranks: at every step both ranks feed the same fraction of the run, rising
    by one step's share from 0 to the last step's; both end with the same weights."""
    class RecordingPositions(RecordingTrainer):
        def __init__(self, *args):
            super().__init__(*args)
            self.positions = []

        def _run_position(self, progress, batch):
            feed = super()._run_position(progress, batch)
            self.positions.append(feed[self.step.run_position])
            return feed

    epochs = 3
    both = rank_settings(tmp_path, train_csv, '--total_epochs', epochs, '--lr_schedule', 'cosine')
    rank0, rank1 = trainers(train_two_ranks(both, RecordingPositions, dev=False))
    steps = epochs * STEPS_PER_EPOCH
    expected = [step / steps for step in range(steps)]
    for trainer in (rank0, rank1):     # each step's, then each epoch's last again for its log line
        assert [p for i, p in enumerate(trainer.positions) if i % (STEPS_PER_EPOCH + 1) != STEPS_PER_EPOCH] == \
            pytest.approx(expected)
    assert rank0.positions == rank1.positions
    assert rank0.final['global_step'] == steps
    np.testing.assert_array_equal(rank0.final['layer_6/weights'], rank1.final['layer_6/weights'])


@pytest.mark.parametrize('rank1, epochs, when', [
    (dict(train_batch_size=2), 1, 'batches'),                                   # planned epoch lengths differ
    (dict(epochs=2), 1, 'end epoch'),                                           # rank 1 would train on alone
    (dict(plateau_reduction=0.5), 2, 'the learning rate after a plateau'),     # rates after a plateau differ
])
def test_ranks_that_disagree_fail_with_rank_divergence_instead_of_hanging(tmp_path, train_csv, rank1, epochs, when):
    both = rank_settings(tmp_path, train_csv, '--epochs', epochs, '--reduce_lr_on_plateau', '--plateau_epochs', 1,
                         '--es_min_delta', 1e9, rank1=rank1)
    results = train_two_ranks(both)
    for result in results:
        assert isinstance(result, distributed.RankDivergenceError), results
        assert when in str(result)


@pytest.fixture(scope='module')
def twelve_csv(tmp_path_factory):
    """Twelve utterances (test_horovod.py's corpus): room for the uneven sample counts below."""
    return make_corpus(tmp_path_factory.mktemp('twelve'), 16, seed=3) / 'train.csv'


# (batch, samples): the three shapes an odd count takes on 2 ranks (batching.train_batches, eval_batches); the
# other counts of 5, 7, 9 at batch 1 or 2 repeat one of them with more steps.
UNEVEN_CASES = [
    (1, 5),     # 1 training sample left out; rank 1's last dev batch all padding
    (2, 7),     # 3 left out; rank 1's last dev batch half padding, rank 0's full
    (2, 9),     # 1 left out, 2 steps an epoch; rank 0's last dev batch half padding, rank 1's all padding
]


@pytest.mark.parametrize('batch, samples', UNEVEN_CASES)
def test_uneven_sample_counts_finish_on_two_ranks(twelve_csv, tmp_path, samples, batch):
    """M samples on 2 ranks: training trimmed to whole steps of 2 ranks x batch, validation padded so
    every dev sample counts once; both ranks run the same steps and finish. test_horovod.py's
    test_uneven_sample_counts_finish_under_horovodrun runs one of these cases under horovodrun."""
    both = [settings_from_args('--train_files', twelve_csv, '--dev_files', twelve_csv, '--limit_train', samples,
                               '--limit_dev', samples, '--train_batch_size', batch, '--dev_batch_size', batch,
                               '--epochs', 2, '--n_hidden', 16, '--dropout_rate', 0,
                               '--checkpoint_dir', tmp_path / 'rank{}'.format(rank) / 'checkpoints',
                               '--summary_dir', tmp_path / 'rank{}'.format(rank) / 'summaries') for rank in (0, 1)]
    rank0, rank1 = trainers(train_two_ranks(both))
    steps = samples // (2 * batch)
    for trainer in (rank0, rank1):
        assert [v['epoch'] for v in trainer.validations_seen] == [0, 1]
        assert trainer.final['global_step'] == 2 * steps
    for seen0, seen1 in zip(rank0.validations_seen, rank1.validations_seen):
        (_, count0), (_, count1) = seen0['summed'][0], seen1['summed'][0]
        assert count0 + count1 == samples and abs(count0 - count1) <= 1    # every dev sample once, none padding
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'rank0' / 'checkpoints')))
    assert reader.get_tensor('global_step') == 2 * steps


def test_a_rank_left_alone_in_a_collective_or_in_another_one_fails_instead_of_hanging():
    """The stand-in's own guards: a collective only one rank enters times out; ranks in different
    collectives fail at once (Horovod would hang or mix their tensors up)."""
    alone = run_ranks(threaded_ranks(2, timeout=1), lambda dist: dist.sum(None, [1.0]) if dist.rank == 0 else None)
    assert isinstance(alone[0], RendezvousError) and alone[1] is None
    apart = run_ranks(threaded_ranks(2), lambda dist: dist.sum(None, [1.0]) if dist.rank == 0 else dist.gather(None, 1))
    assert all(isinstance(result, RendezvousError) and 'different collectives' in str(result) for result in apart)
