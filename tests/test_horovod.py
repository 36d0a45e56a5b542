"""The distributed path, with real horovodrun / mpirun processes: 2 ranks on localhost (Gloo).

Every run is bounded by a timeout that kills its whole process group, so a hang fails the test.
The collective logic (decisions, sums, guards, chief-only writes, uneven sample counts) is tested in
process, in seconds, by test_collectives.py; here one real run shows each over the wire, and a run
serves several tests where it can (module-scoped fixtures; doc/TESTING.rst lists what moved where)."""
import glob
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers.horovodrun import horovodrun
from tests.helpers.suite import (CSV_HEADER, PACKAGE_ENV, ROOT, SMOKE_CSV, TRACE, deepspeech_command, make_corpus,
                                 run_command, run_deepspeech, run_horovod, settings_from_args, start_step,
                                 tiny_model_flags, traced_calls)
from deepspeech_training.data.batching import PADDING, eval_batches, train_batches

pytestmark = pytest.mark.slow


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    """A dozen real utterances: train.csv, dev.csv, test.csv."""
    return make_corpus(tmp_path_factory.mktemp('corpus'), 16, 3)


def csv_rows(path):
    with open(path) as csv_file:
        return [line.split(',')[0] for line in csv_file.read().splitlines()[1:]]


def changes_under(calls, folder):
    """Calls that create, write, rename or delete something under `folder`."""
    folder = str(folder)
    changing = re.compile(r'(O_WRONLY|O_RDWR|O_CREAT)|^\d+\s+(mkdir|rename|unlink)')
    return [c for c in calls if folder in c and changing.search(c)]


def opened_wavs(calls):
    return [os.path.basename(m.group(1)) for m in (re.search(r'openat\(.*"([^"]+\.wav)"', c) for c in calls)
            if m and 'ENOENT' not in m.string]


@pytest.fixture(scope='module')
def traced_run(corpus, tmp_path_factory):
    """One 2-rank run under strace (tests/helpers/trace_files.sh) that the next two tests read: train
    (batch 2, 2 epochs), validate and test on the corpus, the test report to a file."""
    tmp_path = tmp_path_factory.mktemp('traced')
    trace_dir, out = tmp_path / 'traces', tmp_path / 'run'
    trace_dir.mkdir()
    run = run_horovod(2, *tiny_model_flags(out), '--train_files', corpus / 'train.csv',
                      '--dev_files', corpus / 'dev.csv', '--test_files', corpus / 'test.csv',
                      '--epochs', TRACED_EPOCHS, '--train_batch_size', TRACED_BATCH,
                      '--dev_batch_size', TRACED_BATCH, '--test_batch_size', TRACED_BATCH,
                      '--test_output_file', out / 'results.json', wrapper=[TRACE], env={'TRACE_DIR': str(trace_dir)})
    return run, out, trace_dir


TRACED_EPOCHS, TRACED_BATCH = 2, 2


def test_smoke_two_ranks_train_and_test_only_rank_0_writes(corpus, traced_run):
    run, out, trace_dir = traced_run
    assert 'Test on {} - WER:'.format(corpus / 'test.csv') in run.output
    assert (out / 'checkpoints' / 'flags.txt').exists() and (out / 'results.json').exists()
    assert glob.glob(str(out / 'summaries' / 'train' / 'events.*'))
    assert changes_under(traced_calls(trace_dir, 0), out), 'the trace saw no write of rank 0 at all'
    assert changes_under(traced_calls(trace_dir, 1), out) == []
    # infos come from rank 0 alone, but for the line each rank gives of what it computes on (horovodrun
    # tags the lines with the rank: no [rank N] of ours)
    assert '[rank ' not in run.output
    infos_of_rank1 = [line for line in run.output.splitlines() if line.startswith('[1]<stdout>:I ')]
    assert len(infos_of_rank1) == 1 and 'Rank 1 of 2 computes on: CPU only' in infos_of_rank1[0], infos_of_rank1


def test_each_rank_opens_only_the_audio_of_its_own_shard(corpus, traced_run):
    _, _, trace_dir = traced_run
    epochs, batch = TRACED_EPOCHS, TRACED_BATCH
    from deepspeech_training.data.headers import path_key
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    alphabet = load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt'))
    train_records, dev_records, test_records = (read_sources([str(corpus / name)], alphabet)
                                                for name in ('train.csv', 'dev.csv', 'test.csv'))
    for rank in range(2):
        expected = [os.path.basename(train_records[i].audio_path) for epoch in range(epochs)
                    for b in train_batches(len(train_records), batch, 2, rank, epoch) for i in b]
        expected += [os.path.basename(dev_records[i].audio_path) for _ in range(epochs)
                     for b in eval_batches(len(dev_records), batch, 2, rank) for i in b if i != PADDING]
        expected += [os.path.basename(test_records[i].audio_path)
                     for b in eval_batches(len(test_records), batch, 2, rank) for i in b if i != PADDING]
        # ... plus, once, the headers of its share of the distinct audio paths (the validation pass,
        # data/validation.py: those whose key % 2 is the rank)
        audio_paths = {r.audio_path for records in (train_records, dev_records, test_records) for r in records}
        expected += [os.path.basename(p) for p in audio_paths if path_key(p) % 2 == rank]
        assert sorted(opened_wavs(traced_calls(trace_dir, rank))) == sorted(expected)


def planned_reads(csv_path, size, rank, epochs, seed):
    """The train audio rank `rank` of `size` reads over `epochs` with --shuffle_batches, in order."""
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    records = read_sources([str(csv_path)], load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt')))
    return [os.path.basename(records[i].audio_path) for epoch in epochs
            for b in train_batches(len(records), 1, size, rank, epoch, seed, True) for i in b]


def saved_variables(checkpoint_dir):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(checkpoint_dir)))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def test_resuming_on_another_number_of_ranks_goes_on_with_the_next_epochs(corpus, tmp_path):
    """2 epochs on 1 rank, 2 on 2 ranks, 2 on 1 rank: epochs 0..5 as in a straight run (global_step //
    batches per epoch would repeat or skip epochs), each rank reading its samples in those epochs'
    shuffled order (after its share of the audio check at start). The checkpoints move between two
    ranks and one both ways: each run goes on from the last one's global step, the learning rate is
    stored unscaled and scaled by the ranks of the run, and the single process tests from the 2-rank
    checkpoint. (This run also serves what test_checkpoints_move_between_two_ranks_and_one checked.)"""
    train = corpus / 'train.csv'
    train_wavs = {os.path.basename(path) for path in csv_rows(train)}
    flags = tiny_model_flags(tmp_path) + ['--train_files', train, '--shuffle_batches', '--random_seed', 7,
                                          '--epochs', 2]
    steps_per_epoch = {1: len(train_wavs), 2: len(train_wavs) // 2}     # batch 1
    finished, step = [], 0
    for segment, size in enumerate([1, 2, 1]):
        trace_dir = tmp_path / 'traces{}'.format(segment)
        trace_dir.mkdir()
        env = {'TRACE_DIR': str(trace_dir)}
        if size == 1:
            test = ['--test_files', SMOKE_CSV, '--load_evaluate', 'last'] if segment else []
            run = run_command([TRACE] + deepspeech_command(*flags, *test), env=env)
        else:
            run = run_horovod(size, *flags, wrapper=[TRACE], env=env)
        assert start_step(run.output) == step
        assert 'learning rate 0.001 x {} rank(s) = {:g}'.format(size, 0.001 * size) in run.output
        step += 2 * steps_per_epoch[size]
        saved = saved_variables(tmp_path / 'checkpoints')
        assert saved['global_step'] == step and saved['learning_rate'] == pytest.approx(0.001)
        finished += [int(epoch) for epoch in re.findall(r'Finished training epoch (\d+)', run.output)]
        for rank in range(size):
            # the train set's audio (the test set's, read after training, is other files)
            reads = [wav for wav in opened_wavs(traced_calls(trace_dir, rank)) if wav in train_wavs]
            planned = planned_reads(train, size, rank, [2 * segment, 2 * segment + 1], 7)
            assert reads[-len(planned):] == planned and len(reads) - len(planned) <= len(csv_rows(train)), reads
    assert finished == list(range(6))
    assert 'Test on {}'.format(SMOKE_CSV) in run.output


@pytest.fixture(scope='module')
def uneven_run(corpus, tmp_path_factory):
    """7 samples on 2 ranks x batch 2, for training and validation: one step an epoch (3 samples left
    out), the dev shards 4 and 3 padded. HOROVOD_CYCLE_TIME is given (the last test below)."""
    tmp_path = tmp_path_factory.mktemp('uneven')
    run = run_horovod(2, *tiny_model_flags(tmp_path, 16), '--train_files', corpus / 'train.csv',
                      '--dev_files', corpus / 'train.csv', '--limit_train', 7, '--limit_dev', 7,
                      '--train_batch_size', 2, '--dev_batch_size', 2, '--epochs', 2, timeout=180,
                      env={'HOROVOD_CYCLE_TIME': '2'})
    return run, tmp_path


def test_uneven_sample_counts_finish_under_horovodrun(uneven_run):
    """One case over the real wire; the sweep (5, 7, 9 samples x batch 1, 2) runs in process:
    test_collectives.py's test_uneven_sample_counts_finish_on_two_ranks."""
    run, tmp_path = uneven_run
    assert run.output.count('Finished training epoch') == 2
    steps = 7 // (2 * 2)
    assert saved_variables(tmp_path / 'checkpoints')['global_step'] == 2 * steps


def test_set_smaller_than_ranks_times_batch_is_a_clear_error(tmp_path):
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--train_batch_size', 2,
                      check=False, timeout=180)
    assert run.returncode != 0
    assert '3 training samples cannot fill one step of 2 ranks x batch size 2' in run.output


def test_two_rank_gradient_equals_single_process_gradient_of_the_union(corpus, tmp_path):
    script = os.path.join(ROOT, 'tests', 'helpers', 'dump_gradients.py')
    csv_path = corpus / 'train.csv'
    (tmp_path / 'one').mkdir()
    (tmp_path / 'two').mkdir()
    run_command([sys.executable, script, tmp_path / 'one', csv_path, 4], env=PACKAGE_ENV)
    run_command(horovodrun(2, build_check=False) + [sys.executable, script, tmp_path / 'two', csv_path, 2, '--horovod'],
                timeout=180, env=PACKAGE_ENV)
    single = np.load(str(tmp_path / 'one' / 'rank0.npz'))
    ranks = [np.load(str(tmp_path / 'two' / 'rank{}.npz'.format(r))) for r in range(2)]
    assert len(single.files) == 3 * 12
    # The two paths compute the same mean gradient, summing the batch's per-frame terms in another order
    # (and two half-batch means instead of one). A float32 sum of n terms in another order differs by up
    # to (n - 1) * 2^-24 * sum|x| / |sum x| relative (Higham, Accuracy and Stability of Numerical
    # Algorithms, 4.2): n is a few hundred frames here and the per-frame terms of a gradient cancel;
    # measured 1e-7 to 3e-7 on one machine, 1.85e-5 on another. A gradient that is not averaged over the
    # ranks is off by the difference between the halves: measured 0.15 to 0.78. 1e-3 lies between the two
    # with a factor of 50 or more on each side, and the test checks the second margin on every run.
    tolerance = 1e-3
    for name in (n for n in single.files if not n.startswith(('weights/', 'local/'))):
        for rank in ranks:
            np.testing.assert_array_equal(rank['weights/' + name], single['weights/' + name])  # same start
            error = np.linalg.norm(rank[name] - single[name]) / np.linalg.norm(single[name])
            assert error < tolerance, (name, error)
            unsynchronised = np.linalg.norm(rank['local/' + name] - single[name]) / np.linalg.norm(single[name])
            assert unsynchronised > 10 * tolerance, (name, unsynchronised)


def test_each_rank_draws_its_own_dropout_masks(tmp_path):
    """Both ranks get the same utterance: their own gradients are equal without dropout and differ with
    it. One run: the helper first computes the batch's gradients with the dropout rates at 0 (no
    update), then the training step with --dropout 0.3."""
    csv_path = tmp_path / 'same_twice.csv'
    wav = os.path.join(ROOT, 'data', 'smoke_test', 'good_morning.wav')
    row = '{},{},good morning\n'.format(wav, os.path.getsize(wav))
    csv_path.write_text(CSV_HEADER + '\n' + row * 2)
    run_command(horovodrun(2, build_check=False)
                + [sys.executable, os.path.join(ROOT, 'tests', 'helpers', 'dump_gradients.py'), tmp_path, csv_path, 1,
                   '--horovod', '--dropout', 0.3, '--also_without_dropout'], timeout=180, env=PACKAGE_ENV)
    ranks = [np.load(str(tmp_path / 'rank{}.npz'.format(r))) for r in range(2)]
    for gradient, dropout in (('nodropout/layer_1/weights', 0.0), ('local/layer_1/weights', 0.3)):
        same = np.array_equal(ranks[0][gradient], ranks[1][gradient])
        assert same == (dropout == 0.0), (dropout, np.abs(ranks[0][gradient] - ranks[1][gradient]).max())


def test_plateaus_then_early_stop_on_both_ranks_at_the_same_epochs(tmp_path):
    """The decisions themselves (the dev loss summed over the shards, the same decision on each rank
    each epoch, the rate after a plateau checked equal) are test_collectives.py's
    test_dev_loss_is_summed_over_both_shards_and_both_ranks_decide_alike; here one real run shows them
    over the wire: both ranks reload best_dev (rank 0 reads, then broadcasts) and stop together."""
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--dev_files', SMOKE_CSV,
                      '--epochs', 20, '--early_stop', '--es_epochs', 3, '--reduce_lr_on_plateau', '--plateau_epochs', 1,
                      '--es_min_delta', 1000, timeout=180)
    # epoch 0 improves on nothing; epochs 1 and 2 are plateaus; each rank checks the others agree; the
    # third epoch without improvement (3) stops.
    assert run.output.count('Encountered a plateau') == 2
    assert 'effective learning rate: 0.0002' in run.output
    assert 'Early stop triggered as the loss did not improve the last 3 epochs' in run.output
    assert run.output.count('Finished training epoch') == 4
    # the last train checkpoint is written after epoch 3's training, after the two plateaus
    assert saved_variables(tmp_path / 'checkpoints')['learning_rate'] == pytest.approx(1e-5)


def test_distributed_test_report_equals_single_process_report(corpus, traced_run, tmp_path):
    """A test-only run on 2 ranks and one on a single process, from the traced run's checkpoint: two
    test sets, batches of 2 (padded on the ranks)."""
    _, out, _ = traced_run
    flags = ['--n_hidden', 32, '--checkpoint_dir', out / 'checkpoints', '--summary_dir', tmp_path / 'summaries',
             '--test_files', '{0}/test.csv,{0}/dev.csv'.format(corpus), '--test_batch_size', 2,
             '--load_evaluate', 'last']
    run_deepspeech(*flags, '--test_output_file', tmp_path / 'single.json')
    run_horovod(2, *flags, '--test_output_file', tmp_path / 'distributed.json')
    single = json.loads((tmp_path / 'single.json').read_text())
    distributed = json.loads((tmp_path / 'distributed.json').read_text())
    assert len(distributed) == len(csv_rows(corpus / 'test.csv')) + len(csv_rows(corpus / 'dev.csv'))
    assert [(r['wav_filename'], r['res'], r['wer'], r['cer']) for r in distributed] == \
        [(r['wav_filename'], r['res'], r['wer'], r['cer']) for r in single]
    np.testing.assert_allclose([r['loss'] for r in distributed], [r['loss'] for r in single], rtol=1e-4)


@pytest.mark.skipif(not shutil.which('mpirun'), reason='no mpirun (apt-get install openmpi-bin libopenmpi-dev)')
def test_mpirun_launch_trains(tmp_path):
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--epochs', 1,
                      launcher='mpirun', timeout=180)
    assert 'learning rate 0.001 x 2 rank(s)' in run.output
    assert saved_variables(tmp_path / 'checkpoints')['global_step'] == 1


@pytest.mark.skipif(not shutil.which('mpirun'), reason='no mpirun (apt-get install openmpi-bin libopenmpi-dev)')
def test_horovodrun_output_is_one_tag_a_line_with_labelled_losses(corpus, tmp_path):
    """horovodrun with MPI (its default when MPI is installed) tags each line mpirun reads: a line written in
    two pieces, or a bar redrawn with '\\r', came out glued to the next tag; our own [rank N] doubled the tag.
    The bar shows rank 0's running loss, the epoch line the mean over the ranks: both say so."""
    run = run_command(horovodrun(2, gloo=False)
                      + deepspeech_command('--horovod', '--show_progressbar', *tiny_model_flags(tmp_path),
                                           '--train_files', corpus / 'train.csv', '--train_batch_size', 1,
                                           '--epochs', 1),
                      timeout=240)
    tag = re.compile(r'\[\d+,\d+\]<std(out|err)>:')
    lines = run.output.splitlines()
    assert any(tag.match(line) for line in lines), run.output[-3000:]
    assert [line for line in lines if len(tag.findall(line)) > 1] == []
    assert not re.search(r'<std(out|err)>:\[rank \d\]', run.output), run.output[-3000:]
    assert re.search(r'\| Rank 0 loss: \d+\.\d{6}$', run.output, re.M), run.output[-3000:]
    assert re.search(r'Finished training epoch 0 - loss: \d+\.\d{6} \(mean over 2 ranks\)', run.output)


@pytest.fixture(scope='module')
def fp16_run(tmp_path_factory):
    """fp16 compression, 2 backward passes a step and a warm-up, with Horovod's timeline (cycles marked);
    HOROVOD_CYCLE_TIME not given."""
    tmp_path = tmp_path_factory.mktemp('fp16')
    timeline = tmp_path / 'timeline.json'
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--epochs', 4,
                      '--horovod_fp16_compression', '--horovod_backward_passes_per_step', 2,
                      '--warmup_steps', 2, timeout=180,
                      env={'HOROVOD_TIMELINE': str(timeline), 'HOROVOD_TIMELINE_MARK_CYCLES': '1'})
    return run, tmp_path, timeline.read_text()


def test_cpu_ranks_get_a_5_ms_cycle_and_a_4_mb_fusion_buffer_unless_given(fp16_run, uneven_run):
    run, _, timeline = fp16_run
    assert 'Horovod cycle time 5 ms, fusion buffer 4194304 bytes' in run.output
    # Horovod itself runs on it: its background loop starts a cycle every 5 ms (1 ms is its own default)
    starts = [int(ts) for ts in re.findall(r'"name": "CYCLE_START"[^}]*"ts": (\d+)', timeline)]
    assert len(starts) > 100
    assert 4500 <= np.median(np.diff(starts)) <= 10000
    given, _ = uneven_run       # run with HOROVOD_CYCLE_TIME=2
    assert 'Horovod cycle time 2 ms, fusion buffer 4194304 bytes' in given.output


def test_fp16_compression_accumulation_and_warmup(fp16_run):
    run, tmp_path, timeline = fp16_run
    # the gradients go over the wire as float16: layer_1's weights' gradient, for one
    dtypes = re.findall(r'"dtype": "(\w+)", "shape": "\[494, 32\]"', timeline)
    assert dtypes and set(dtypes) == {'float16'}, dtypes
    rates = [float(r) for r in re.findall(r'effective learning rate: ([0-9.e-]+)', run.output)]
    # one batch per epoch, two per update: updates after epochs 0..3 = 0, 1, 1, 2 -> ramp 0.001 -> 0.002
    assert rates == pytest.approx([0.001, 0.0015, 0.0015, 0.002])
    final = saved_variables(tmp_path / 'checkpoints')
    assert final['global_step'] == 4
    assert final['beta1_power'] == pytest.approx(0.9 ** 3)   # two real updates (+ the initial 0.9)


def test_horovod_only_flags_need_horovod():
    """In process, as DeepSpeech.py parses its flags: how a rejected flag ends a run (its message, a non-zero
    exit, nothing written) is tests/test_flags.py's, with this validator's sibling (--horovod_elastic)."""
    from absl import flags
    for flag in ('--horovod_fp16_compression', '--horovod_backward_passes_per_step=2'):
        with pytest.raises(flags.Error, match='need --horovod'):
            settings_from_args('--train_files', SMOKE_CSV, flag)


def test_a_gradient_that_is_not_finite_stops_the_step_with_a_clear_error():
    """The fp16 guard: an inf from a float16 sum must not reach the weights."""
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training.train_graph import finite_gradients
    with tf.Graph().as_default():
        variable = tfv1.get_variable('weights', initializer=1.0)
        (gradient, _), = finite_gradients([(tf.constant(float('inf')), variable)])
        with tfv1.Session() as session, pytest.raises(tf.errors.InvalidArgumentError, match='float16 overflows'):
            session.run(gradient)
