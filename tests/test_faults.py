"""Faults with real processes and real signals: SIGINT/SIGTERM stop training with a checkpoint of the
current step, SIGKILL at any moment leaves the checkpoint directory loadable, a dead or frozen Horovod
rank ends the whole job. Every run is bounded by a timeout that kills its whole process group."""
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.helpers.horovodrun import horovodrun
from tests.helpers.suite import ROOT, SMOKE_CSV, deepspeech_command, make_corpus, run_command, start_step, tiny_model_flags

CRASH_AT = os.path.join(ROOT, 'tests', 'helpers', 'crash_at.py')

pytestmark = pytest.mark.slow
# Gloo: the dead-rank behaviour measured is Gloo's.
HOROVOD_GLOO = horovodrun(2, build_check=False)


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    """60 utterances (49 train, 5 dev): an epoch of batch 1 lasts about a second."""
    return make_corpus(tmp_path_factory.mktemp('corpus'), 60, 5)


def signals_as_at_a_terminal():
    """SIGINT and SIGTERM at their defaults in the child: the suite itself may run with SIGINT ignored (a
    background job of a script, `cmd &`), children inherit that, and the trainer rightly keeps a signal
    that was ignored at its start ignored. A user's run gets Ctrl-C from a terminal."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


class Run:
    """A background command in its own process group, its output in a file we can poll."""

    def __init__(self, command, log, env=None):
        self.log = log
        self.out = open(str(log), 'w')
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1', **(env or {}))
        self.process = subprocess.Popen([str(c) for c in command], cwd=ROOT, env=env, stdout=self.out,
                                        stderr=subprocess.STDOUT, start_new_session=True,
                                        preexec_fn=signals_as_at_a_terminal)
        self.started = time.time()

    def output(self):
        with open(str(self.log)) as log:
            return log.read()

    def wait_for(self, pattern, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            match = re.search(pattern, self.output())
            if match:
                return match
            if self.process.poll() is not None:
                raise AssertionError('exited ({}) before {!r}:\n{}'.format(self.process.returncode, pattern,
                                                                            self.output()[-5000:]))
            time.sleep(0.1)
        self.kill()
        raise AssertionError('no {!r} within {} s:\n{}'.format(pattern, timeout, self.output()[-5000:]))

    def wait(self, timeout):
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError('still running {} s later:\n{}'.format(timeout, self.output()[-5000:]))
        finally:
            self.out.close()

    def kill(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


def train_flags(corpus, tmp_path, *more):
    return tiny_model_flags(tmp_path) + ['--train_files', corpus / 'train.csv', '--train_batch_size', 1,
                                         '--epochs', 1000] + list(more)


def state(directory, name='checkpoint'):
    found = tf.train.get_checkpoint_state(str(directory), name)
    return found.model_checkpoint_path if found else None


def rank_pids(marker, timeout=60):
    """{HOROVOD_RANK: pid} of the python DeepSpeech.py processes whose command line holds `marker`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ranks = {}
        for pid in subprocess.run(['pgrep', '-f', marker], stdout=subprocess.PIPE,
                                  universal_newlines=True).stdout.split():
            try:
                with open('/proc/{}/cmdline'.format(pid), 'rb') as cmdline:
                    argv = cmdline.read().split(b'\0')
                with open('/proc/{}/environ'.format(pid), 'rb') as environ:
                    env = dict(v.split(b'=', 1) for v in environ.read().split(b'\0') if b'=' in v)
            except OSError:
                continue
            if b'HOROVOD_RANK' in env and argv[0].endswith(os.path.basename(sys.executable).encode()) \
                    and argv[1].endswith(b'DeepSpeech.py'):
                ranks[int(env[b'HOROVOD_RANK'])] = int(pid)
        if len(ranks) == 2:
            return ranks
        time.sleep(0.2)
    raise AssertionError('did not find the two ranks of {}'.format(marker))


def resume_step(corpus, tmp_path):
    """Run one more epoch from the checkpoint; the global step it started from."""
    flags = train_flags(corpus, tmp_path)
    flags[flags.index('--epochs') + 1] = 1
    return start_step(run_command(deepspeech_command(*flags), timeout=240).output)


def signal_at_step(step, signum, *options):
    """crash_at.py's arguments that send `signum` right after training step `step` (an event of the run,
    not a moment on the clock, so a slow machine changes nothing)."""
    return [sys.executable, CRASH_AT, 'after-train-step', step, '--signal', signum.name] + list(options)


@pytest.mark.fast
def test_a_sigterm_after_the_agreed_stop_does_not_kill_the_exiting_rank():
    """horovodrun forwards a signal to the ranks one by one: a rank that already stopped through the
    agreed stop got its SIGTERM while exiting and died with 143 (1 run in 22 of the horovodrun case below)."""
    from deepspeech_training.signals import Interrupted, StopRequests
    # as in a process started in the foreground: a suite run as `cmd &` inherits SIGINT ignored
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with StopRequests():
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL      # a finished run restores the handler
        with pytest.raises(Interrupted):
            with StopRequests():
                raise Interrupted(143)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN      # a stopping run ignores further SIGTERMs
        os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN    # Ctrl-C still ends a stuck shutdown
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def test_signal_mid_epoch_saves_the_current_step_and_the_next_run_resumes_there(corpus, tmp_path):
    """SIGINT (exit 130), then SIGTERM (143) to the run that resumed from its save, each right after that
    run's own training step 3. One chain instead of one test per signal: the signalled run after the first
    is also the previous one's resume (its start step checked), which saves a run per signal. Each save is
    read back (its global step); a last run resuming from the second would take the path the second run
    took from the first (5 s more)."""
    start = 0
    for signum, exit_code in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
        run = Run(signal_at_step(3, signum) + deepspeech_command(*train_flags(corpus, tmp_path))[1:],
                  tmp_path / 'log-{}'.format(signum.name))
        assert run.wait(240) == exit_code, (signum.name, run.output())
        assert start_step(run.output()) == start, (signum.name, run.output())
        step, path = re.search(r'Interrupted at global step (\d+), saved (\S+)', run.output()).groups()
        assert int(step) == start + 3 and path.endswith('train-' + step), (signum.name, step, path)
        assert state(tmp_path / 'checkpoints') == path and load_and_read(path) == int(step)
        assert 'Finished training epoch' not in run.output()[run.output().index('Interrupted'):]
        start = int(step)


def train_rates(summary_dir):
    """{global step: learning rate} of every training step the summaries under `summary_dir` hold."""
    rates = {}
    for events in sorted((summary_dir / 'train').iterdir()):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            rates.update({event.step: value.simple_value for value in event.summary.value
                          if value.tag == 'learning_rate'})
    return rates


def test_the_cosine_schedule_after_a_mid_epoch_stop_and_rerun_is_that_of_one_uninterrupted_run(tmp_path):
    """--lr_schedule cosine with --total_epochs: a run stopped (SIGINT) in the middle of its second epoch
    and run again gives every step the learning rate one uninterrupted run gives it, --learning_rate x
    (1 + cos(pi x step / steps)) / 2 (train_graph.schedule_factor; the fraction of the run fed at each step is
    test_collectives'), from --learning_rate down to near 0 at the last step. The smoke set: 3 steps an epoch.
    Held to the formula instead of an uninterrupted third run's summaries (which it matched to float32's
    rounding, 1e-6 relative at the last step): a resume that restarts, repeats or skips part of the schedule
    is off by far more than 1e-5."""
    command = deepspeech_command(*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--total_epochs', 3,
                                 '--lr_schedule', 'cosine', '--learning_rate', 0.001)
    stopped = Run(signal_at_step(4, signal.SIGINT) + command[1:], tmp_path / 'log-stopped')
    assert stopped.wait(240) == 130, stopped.output()
    assert start_step(run_command(command, timeout=240).output) == 4
    rates, steps = train_rates(tmp_path / 'summaries'), 3 * 3
    assert sorted(rates) == list(range(steps))
    assert [rates[step] for step in range(steps)] == pytest.approx(
        [0.001 * (1 + math.cos(math.pi * step / steps)) / 2 for step in range(steps)], rel=1e-5)


# A hang guard, far above the 1-3 s a stop takes, and under the 30 s grace Slurm often gives after its SIGTERM.
STOP_BOUND = 20


def test_sigterm_at_random_moments_exits_promptly_and_each_run_resumes_from_the_last(corpus, tmp_path):
    """Five runs of the small-corpus recipe, each SIGTERMed at a random moment of its first seconds of training
    (a step, validation, a save, an epoch's boundary): each exits 143 within STOP_BOUND with a loadable train
    checkpoint of the step it stopped at, where the next run starts. Closing the session once waited for
    tf.data's autotuning thread of the idle validation iterator, up to 30 s and more (feeding.py,
    without_autotune_model)."""
    moments = random.Random(44)
    flags = ['--flagfile', os.path.join(ROOT, 'data', 'recipes', 'small-corpus.flags')] + train_flags(
        corpus, tmp_path, '--dev_files', corpus / 'dev.csv')
    start = 0
    for number in range(5):
        run = Run(deepspeech_command(*flags), tmp_path / 'log-{}'.format(number))
        run.wait_for('STARTING Optimization')
        time.sleep(moments.uniform(0, 6))
        run.process.send_signal(signal.SIGTERM)
        assert run.wait(STOP_BOUND) == 143, run.output()[-5000:]
        assert start_step(run.output()) == start, run.output()[-5000:]
        step, path = re.search(r'Interrupted at global step (\d+), saved (\S+)', run.output()).groups()
        assert state(tmp_path / 'checkpoints') == path and load_and_read(path) == int(step)
        start = int(step)


def test_horovod_signal_stops_all_ranks_at_the_same_step(corpus, tmp_path):
    """SIGINT to rank 0, then SIGTERM to rank 1, then SIGINT to horovodrun, each right after training step 3
    of its run; each run after the first resumes from the previous one's save (its start step checked).
    One chain instead of one test per target: it saves a horovodrun per target. Each save is read back
    (its global step); a last horovodrun resuming from the third would take the path the second and
    third took (15 s more)."""
    start = 0
    for target, signum in [('rank 0', signal.SIGINT), ('rank 1', signal.SIGTERM), ('horovodrun', signal.SIGINT)]:
        start = signalled_horovod_run(corpus, tmp_path, target, signum, start)


def signalled_horovod_run(corpus, tmp_path, target, signum, start):
    """A two-rank run from global step `start`, `target` sent `signum` after its training step 3: both ranks
    stop through the agreed stop at the same step and save it. Returns that step."""
    flags = train_flags(corpus, tmp_path)
    # sent by the target rank itself, or by rank 0 to its horovodrun, right after its training step 3
    sender = ['--rank', 0, '--to-horovodrun'] if target == 'horovodrun' else ['--rank', int(target[-1])]
    run = Run(HOROVOD_GLOO + signal_at_step(3, signum, *sender) + deepspeech_command('--horovod', *flags)[1:],
              tmp_path / 'log-{}'.format(target.replace(' ', '')))
    returncode = run.wait(240)
    output = run.output()
    print('{} {}: horovodrun exited {}'.format(target, signum.name, returncode))
    assert start_step(output) == start, output[-3000:]
    step, path = re.search(r'Interrupted at global step (\d+), saved (\S+)', output).groups()
    # At step 3 for a rank's own signal; horovodrun forwards it as SIGTERM to both ranks a little later.
    assert int(step) == start + 3 if target != 'horovodrun' else int(step) >= start + 3, (target, step)
    assert state(tmp_path / 'checkpoints') == path and load_and_read(path) == int(step)
    # Both ranks left through the agreed stop, none through a failed collective: rank 0 with 130/143
    # (it says which in its log), the others with 0.
    expected = 143 if target == 'horovodrun' else 128 + signum
    assert 'Exiting with code {}'.format(expected) in output, output[-3000:]
    codes = re.findall(r'Process (\d) exit with status code (\d+)', output)
    if target == 'horovodrun':
        # horovodrun SIGTERMs the ranks itself, and Horovod 0.28.1 may then lose their exit codes: its
        # middleman (safe_shell_exec) reaps the rank's shell in two threads, Popen.wait and psutil's wait in
        # terminate_executor_shell_and_children; when psutil's wins, Popen gets ECHILD and reports 0
        # (6 of 30 runs on a busy machine). So horovodrun reports rank 0's 143 and exits 1, or reports nothing and
        # exits 0; the code of our own rank is checked in its log above. And horovodrun SIGKILLs a rank still
        # alive 5 s after its SIGTERM (137): on a machine loaded 4-5x over its cores the ranks' exit after the
        # save (Horovod's and TensorFlow's shutdown) outlasted that, once for rank 1, once for both.
        ours_or_killed = {'0': ('143', '137'), '1': ('0', '137')}
        assert all(code in ours_or_killed[rank] for rank, code in codes), (codes, output[-3000:])
        assert returncode == (1 if any(code != '0' for _, code in codes) else 0), (codes, returncode, output[-3000:])
    else:
        # The first failure horovodrun reports is rank 0's (after it, horovodrun may SIGTERM the other,
        # which is past the save), and horovodrun fails.
        assert codes[:1] == [('0', str(expected))] and returncode != 0, output[-3000:]
    # (horovodrun itself prints a traceback for any non-zero exit; the ranks print none.)
    rank_lines = '\n'.join(line for line in output.splitlines() if re.match(r'\[\d\]<std', line))
    assert 'Horovod has been shut down' not in rank_lines and 'Traceback' not in rank_lines, rank_lines[-3000:]
    return int(step)


def load_and_read(path):
    reader = tf.train.load_checkpoint(path)
    return reader.get_tensor('global_step')


@pytest.fixture(scope='module')
def one_epoch(corpus, tmp_path_factory):
    """A checkpoint directory after one epoch of 8 steps with validation: train-8 and best_dev-8. Dev is
    the 8 training samples, so the next epoch surely improves the dev loss and saves best_dev-16."""
    directory = tmp_path_factory.mktemp('one_epoch')
    run_command(deepspeech_command(*kill_test_flags(corpus, directory, 1)), timeout=240)
    return directory


def kill_test_flags(corpus, directory, epochs):
    return train_flags(corpus, directory, '--dev_files', corpus / 'train.csv', '--limit_train', 8,
                       '--limit_dev', 8, '--epochs', epochs, '--checkpoint_secs', 100000)


def best_dev_record(checkpoints):
    with open(str(checkpoints / 'best_dev_loss.json')) as record_file:
        return json.load(record_file)



# Each moment of the second epoch (steps 9-16, then the train save, validation and the best_dev save of
# step 16) where a SIGKILL can come, with the train step the next run must resume from and the best_dev
# checkpoint it must use. (Inside the Saver's own write TensorFlow writes the data and index files under
# temporary names and renames each into place, so a kill there leaves what 'before-train-state' leaves,
# minus complete files.)
@pytest.mark.parametrize('moment, resume, best', [
    ('after-train-step 4', 8, 8),               # mid-epoch
    ('before-train-state 1', 8, 8),             # train-16 complete, `checkpoint` still names train-8
    ('before-best-record 1', 16, 8),            # best_dev-16 complete but its loss not recorded
    ('before-best-state 1', 16, 16),            # recorded, `best_dev_checkpoint` still names best_dev-8
    ('after-best-state 1', 16, 16),             # the whole save done
])
def test_sigkill_at_each_moment_of_a_save_leaves_loadable_checkpoints_and_never_a_worse_best_dev(
        corpus, one_epoch, tmp_path, moment, resume, best):
    checkpoints = tmp_path / 'checkpoints'
    shutil.copytree(str(one_epoch / 'checkpoints'), str(checkpoints))
    first_best_loss = best_dev_record(checkpoints)['dev_loss']
    command = deepspeech_command(*kill_test_flags(corpus, tmp_path, 1))
    what, arg = moment.split()
    killed = run_command([sys.executable, CRASH_AT, what, int(arg)] + command[1:], timeout=240, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.output[-5000:]
    assert 'Traceback' not in killed.output, killed.output[-5000:]

    # The state files name checkpoints relative to their folder: the copied folder names its own files.
    assert os.path.dirname(state(checkpoints)) == str(checkpoints)
    assert load_and_read(state(checkpoints)) == resume
    assert load_and_read(state(checkpoints, 'best_dev_checkpoint')) == (16 if what == 'after-best-state' else 8)
    record = best_dev_record(checkpoints)
    assert os.path.exists(str(checkpoints / record['checkpoint']) + '.index')    # complete, if newer
    # The same command again: resumes from the last complete train checkpoint, adopts a complete and
    # recorded best_dev, and never replaces the best_dev with a worse one.
    rerun = run_command(deepspeech_command(*kill_test_flags(corpus, tmp_path, 1)), timeout=240)
    assert start_step(rerun.output) == resume
    assert ('did not name the last best_dev checkpoint' in rerun.output) == (what == 'before-best-state')
    losses = [first_best_loss] + [float(loss) for loss in
                                  re.findall(r'Saved new best validating model with loss (\S+)', rerun.output)]
    final = best_dev_record(checkpoints)
    assert load_and_read(state(checkpoints, 'best_dev_checkpoint')) >= best
    assert final['dev_loss'] <= first_best_loss and losses == sorted(losses, reverse=True), (losses, final)


@pytest.mark.parametrize('how', ['SIGKILL', 'SIGSTOP'])
def test_dead_or_frozen_rank_ends_the_job_leaving_a_checkpoint_a_rerun_resumes_from(corpus, tmp_path, how):
    # What a user lowers to notice a frozen rank sooner (Horovod's default is 30 s); a frozen rank is
    # noticed only after it, so it is most of the frozen case's time. Not lower: Horovod 0.28.1 uses the
    # same timeout for the ranks' rendezvous in hvd.init(), so the ranks' start may differ by up to it.
    timeout = 10
    flags = train_flags(corpus, tmp_path, '--checkpoint_secs', 1)
    command = HOROVOD_GLOO + deepspeech_command('--horovod', *flags)
    env = {'HOROVOD_GLOO_TIMEOUT_SECONDS': str(timeout)}
    run = Run(command, tmp_path / 'log', env=env)
    run.wait_for(r'Finished training epoch 1', timeout=180)
    ranks = rank_pids(str(tmp_path / 'checkpoints'))
    os.kill(ranks[1], getattr(signal, how))
    sent = time.time()
    try:
        returncode = run.wait(60 if how == 'SIGKILL' else timeout + 40)
    finally:
        if how == 'SIGSTOP':
            try:
                os.kill(ranks[1], signal.SIGKILL)
            except ProcessLookupError:
                pass
    took = time.time() - sent
    output = run.output()
    print('horovodrun exited {} {:.1f} s after {} of rank 1'.format(returncode, took, how))
    assert returncode != 0
    assert 'Horovod detected that one or more processes exited with non-zero status' in output, output[-3000:]
    if how == 'SIGKILL':    # horovodrun names the lost rank: the first to fail, killed by signal 9
        assert 'Process name: 1\nExit code: 137' in output, output[-3000:]
    else:                   # rank 0 names the timeout; the frozen rank is then SIGKILLed by horovodrun
        assert took >= timeout - 1, 'detected before HOROVOD_GLOO_TIMEOUT_SECONDS: {:.1f} s'.format(took)
        assert 'Timed out waiting {}ms'.format(timeout * 1000) in output, output[-3000:]
    last = tf.train.latest_checkpoint(str(tmp_path / 'checkpoints'))
    assert last and load_and_read(last) > 0
    if how == 'SIGSTOP':
        return      # the checkpoint it leaves is one the killed rank's rerun below shows loadable: the same resume
    # The same command again: resumes from the last checkpoint and finishes (one epoch here).
    rerun = list(command)
    rerun[rerun.index('--epochs') + 1] = 1
    done = run_command(rerun, timeout=240, env=env)
    assert start_step(done.output) == int(load_and_read(last))
    assert 'Finished training epoch' in done.output


@pytest.fixture
def small_disk(tmp_path):
    """mount(size): a tmpfs of `size` mounted as tmp_path/checkpoints (needs root), unmounted afterwards."""
    mounted = []

    def mount(size):
        target = tmp_path / 'checkpoints'
        target.mkdir(exist_ok=True)
        result = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size={}'.format(size), 'tmpfs', str(target)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if result.returncode != 0:
            pytest.skip('cannot mount a small tmpfs (needs root): ' + result.stdout.strip())
        mounted.append(target)
        return target

    yield mount
    for target in mounted:
        subprocess.run(['umount', '-l', str(target)])


def fill(directory):
    """Write a file into `directory` until the disk is full; returns its path."""
    filler = os.path.join(str(directory), 'filler')
    with open(filler, 'wb') as out:
        try:
            while True:
                out.write(b'\0' * 65536)
                out.flush()
        except OSError:
            pass
    return filler


def test_too_small_checkpoint_disk_fails_at_start(corpus, tmp_path, small_disk):
    disk = small_disk('200k')
    result = run_command(deepspeech_command(*train_flags(corpus, tmp_path)), timeout=120, check=False)
    assert result.returncode == 1, result.output[-3000:]
    assert re.search(r'{} has 0\.\d MB free, but saving checkpoints needs about \d+\.\d MB'.format(disk),
                     result.output), result.output[-3000:]
    assert 'Training from global step' not in result.output
    assert not [name for name in os.listdir(str(disk)) if name.startswith(('train', 'best_dev', 'checkpoint'))]


def test_disk_full_at_save_time_stops_training_and_keeps_the_previous_checkpoint(corpus, tmp_path, small_disk):
    disk = small_disk('8m')
    flags = train_flags(corpus, tmp_path, '--dev_files', corpus / 'dev.csv')
    run = Run(deepspeech_command(*flags), tmp_path / 'log')
    run.wait_for(r'Saved new best validating model', timeout=180)
    filler = fill(disk)
    assert run.wait(120) == 1, run.output()[-3000:]
    output = run.output()
    message = re.search(r'could not save the (train|best_dev) checkpoint of step (\d+) to {}: .*No space left on '
                        r'device.*previous checkpoints are intact'.format(disk), output)
    assert message, output[-3000:]
    assert 'Traceback' not in output, output[-3000:]
    last, best = state(disk), state(disk, 'best_dev_checkpoint')
    assert load_and_read(last) > 0 and load_and_read(best) > 0
    assert int(load_and_read(last)) < int(message.group(2))
    assert not [n for n in os.listdir(str(disk)) if n.startswith('{}-{}'.format(*message.groups()))], \
        'partial files of the failed save were left: {}'.format(os.listdir(str(disk)))
    os.remove(filler)
    assert resume_step(corpus, tmp_path) == int(load_and_read(last))


def test_rank_that_finds_a_file_gone_bad_ends_the_job_and_the_rerun_resumes(corpus, tmp_path):
    data = tmp_path / 'data'
    shutil.copytree(str(corpus), str(data))
    wavs = sorted(str(data / name) for name in os.listdir(str(data)) if name.endswith('.wav'))
    flags = train_flags(data, tmp_path, '--checkpoint_secs', 1)
    command = HOROVOD_GLOO + deepspeech_command('--horovod', *flags)
    run = Run(command, tmp_path / 'log')
    run.wait_for(r'Finished training epoch 1', timeout=180)
    for wav in wavs:        # every file goes bad, whichever rank reads it next
        shutil.move(wav, wav + '.good')
        with open(wav, 'wb') as bad:
            bad.write(b'not a wav file')
    sent = time.time()
    returncode = run.wait(60)
    output = run.output()
    print('horovodrun exited {} {:.1f} s after the files went bad'.format(returncode, time.time() - sent))
    assert returncode != 0
    assert re.search(r'audio changed during training: {} row \d+: {}/\S+\.wav: cannot decode audio'
                     .format(data / 'train.csv', data), output), output[-3000:]
    assert re.search(r'Process name: [01]\nExit code: 1\n', output), output[-3000:]
    assert re.search(r'\[[01]\]<stderr>:E 1 problem\(s\) in the input data', output), output[-3000:]
    last = tf.train.latest_checkpoint(str(tmp_path / 'checkpoints'))
    assert last and load_and_read(last) > 0
    for wav in wavs:
        shutil.move(wav + '.good', wav)
    rerun = list(command)
    rerun[rerun.index('--epochs') + 1] = 1
    done = run_command(rerun, timeout=240)
    assert start_step(done.output) == int(load_and_read(last))


def epoch_loss(output, epoch=0):
    return float(re.search(r'Finished training epoch {} - loss: ([\d.]+)'.format(epoch), output).group(1))


def test_epoch_resumed_after_ctrl_c_reports_the_whole_epochs_loss(corpus, tmp_path):
    """Ctrl-C after step 3 of epoch 0, then the command again with another --learning_rate: the resumed run
    says where it resumed, that it trains --epochs more (and --total_epochs), that it keeps the checkpoint's
    learning rate, and its epoch 0 loss is that of an uninterrupted run (not the mean of steps 4 on)."""
    uninterrupted = tmp_path / 'uninterrupted'
    flags = train_flags(corpus, uninterrupted)
    flags[flags.index('--epochs') + 1] = 1
    expected = epoch_loss(run_command(deepspeech_command(*flags), timeout=240).output)
    run = Run(signal_at_step(3, signal.SIGINT) + deepspeech_command(*train_flags(corpus, tmp_path))[1:],
              tmp_path / 'log-sigint')
    assert run.wait(240) == 130, run.output()
    flags = train_flags(corpus, tmp_path, '--learning_rate', 0.002)
    flags[flags.index('--epochs') + 1] = 1
    output = run_command(deepspeech_command(*flags), timeout=240).output
    assert re.search(r'Resuming mid-epoch: epoch 0 at step 3 of \d+; its loss will be the mean over the whole epoch',
                     output), output
    assert 'Training --epochs 1 more epoch(s), up to epoch 1;' in output and '--total_epochs' in output
    assert re.search(r'W continuing with the learning rate 0.001 of checkpoint \S+train-3, not --learning_rate '
                     r'0.002; add --force_initialize_learning_rate', output), output
    assert epoch_loss(output) == pytest.approx(expected, rel=1e-4), output
