"""bin/slurm/train.sbatch as a user submits it, on a two-node Slurm cluster (tests/helpers/slurm_cluster.py:
slurmctld, a slurmd in each network-namespace host, munge): a job trains as a `-H localhost:2` run does,
a time limit ends in a save and a requeue that goes on where the job stopped, and a node whose slurmd
dies gets its job requeued. The ranks are started by srun --mpi=pmix (Horovod over MPI through PMIx);
the first test also by horovodrun inside the allocation (Gloo, over the ssh stand-in).

Every wait is bounded; the cluster's daemons are stopped by pid whatever happens."""
import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.suite import PYTHON_BIN, ROOT, TRACE, deepspeech_command, make_corpus, run_horovod, tiny_model_flags
from test_horovod import changes_under, saved_variables, traced_calls
from test_multihost import losses

from tests.helpers import netns_hosts
from tests.helpers import slurm_cluster

pytestmark = pytest.mark.slow
SBATCH = os.path.join(ROOT, 'bin', 'slurm', 'train.sbatch')
# the file's #SBATCH lines are for a GPU cluster; these fit the test cluster (1 CPU per node)
TEST_CLUSTER_OPTIONS = ['--nodes=2', '--ntasks-per-node=1', '--cpus-per-task=1', '--gpus-per-task=0']
ENDED = ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY')


@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    reason = slurm_cluster.unavailable()
    if reason:
        pytest.skip('a two-node Slurm cluster: ' + reason)
    with slurm_cluster.slurm_cluster(tmp_path_factory.mktemp('slurm')) as cluster:
        yield cluster


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    """60 utterances (49 train, 5 dev): 24 steps an epoch on 2 ranks of batch 1."""
    return make_corpus(tmp_path_factory.mktemp('corpus'), 60, 5)


# epochs of the time-limit job: a stop in epoch 1 or 2 (see the test), the rest of that epoch and the next
TIME_LIMIT_EPOCHS = 4


@pytest.fixture(scope='module')
def localhost_run(corpus, tmp_path_factory):
    """The jobs' reference: the same training, uninterrupted, by `horovodrun -H localhost:2`; its output. As many
    epochs as the time-limit job's; the two-node jobs train its first (their later epochs under srun are held
    to it by the time-limit test, under horovodrun across two hosts by test_multihost)."""
    out_dir = tmp_path_factory.mktemp('localhost')
    return run_horovod(2, *training_flags(corpus, out_dir, TIME_LIMIT_EPOCHS), timeout=600).output


def training_flags(corpus, out_dir, total_epochs):
    return tiny_model_flags(out_dir) + ['--train_files', corpus / 'train.csv', '--dev_files', corpus / 'dev.csv',
                                        '--total_epochs', total_epochs]


class Job:
    """A job of bin/slurm/train.sbatch, submitted as a user would from the checkout."""

    def __init__(self, cluster, log, flags, options=(), python=sys.executable, env=None):
        self.cluster, self.log = cluster, log
        trainer_flags = deepspeech_command(*flags)[2:]     # DeepSpeech.py's flags, without the interpreter
        submitted = cluster.command('sbatch', '--parsable', '--output', log, *TEST_CLUSTER_OPTIONS, *options,
                                    SBATCH, *trainer_flags, cwd=ROOT,
                                    env=dict(DS_PYTHON=python, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1',
                                             **(env or {})))
        self.id = submitted.strip().split(';')[0]

    def state(self):
        return self.cluster.job(self.id)

    def output(self):
        """The job's log so far (both runs after a requeue: --open-mode=append); none while pending."""
        try:
            with open(str(self.log)) as log:
                return log.read()
        except FileNotFoundError:
            return ''

    def wait_until(self, condition, what, timeout=300):
        """Poll until condition(job's scontrol fields) holds; fails with the log after `timeout` s."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = self.state()
            if condition(state):
                return state
            time.sleep(0.5)
        raise AssertionError('job {}: no {} within {} s ({}):\n{}'.format(
            self.id, what, timeout, self.state().get('JobState'), self.output()[-5000:]))

    def wait_for_log(self, pattern, timeout=300):
        self.wait_until(lambda state: re.search(pattern, self.output()) or state['JobState'] in ENDED,
                        repr(pattern), timeout)
        match = re.search(pattern, self.output())
        assert match, 'job {} ended before {!r}:\n{}'.format(self.id, pattern, self.output()[-5000:])
        return match

    def wait_for_requeue(self, timeout):
        state = self.wait_until(lambda state: int(state['Restarts']) >= 1 or state['JobState'] in ENDED, 'requeue',
                                timeout)
        assert int(state['Restarts']) == 1, (state, self.output()[-5000:])
        return state

    def start_again(self):
        """Let the requeued job start as soon as it is pending and both nodes are idle. Slurm 22.05 sets a requeued
        job's begin time a job credential's lifetime ahead (AuthInfo's cred_expire, default 120 s; measured
        here: 147 s to the start), so that its new launch credential is newer than the revoked one: the
        nodes reject a job whose credential they revoked in the same second ("Job credential revoked", seen
        when it started at once), hence the 2 s. (A short cred_expire would shorten every step
        credential's lifetime too, which a loaded machine's launches could outlast.)"""
        self.wait_until(lambda state: state['JobState'] == 'PENDING' and self.cluster.idle_nodes() == 2,
                        'the requeue done (the job pending, the nodes idle)', timeout=120)
        time.sleep(2)
        self.cluster.command('scontrol', 'update', 'JobId=' + self.id, 'StartTime=now')

    def tasks(self):
        """The pids of the job's tasks (the ranks: children of a 'slurmstepd: [<job>.<step>]', not of the
        batch step's), on every node."""
        steps = re.compile(r'slurmstepd: \[{}\.\d+\]$'.format(self.id))
        pids = []
        for host in netns_hosts.HOSTS:
            listed = subprocess.run(['ip', 'netns', 'pids', host], stdout=subprocess.PIPE, universal_newlines=True)
            for pid in map(int, listed.stdout.split()):
                with contextlib.suppress(OSError):
                    if steps.match(command_line(parent_pid(pid))):
                        pids.append(pid)
        return pids

    def freeze_tasks(self):
        """SIGSTOP every task of the job (both ranks); returns their pids (SIGCONT them)."""
        pids = self.tasks()
        assert len(pids) == 2, (pids, self.output()[-5000:])
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    def wait_until_ended(self, timeout=300):
        return self.wait_until(lambda state: state['JobState'] in ENDED, 'end', timeout)['JobState']


def parent_pid(pid):
    with open('/proc/{}/status'.format(pid)) as status:
        return int(re.search(r'^PPid:\s*(\d+)$', status.read(), re.M).group(1))


def command_line(pid):
    with open('/proc/{}/cmdline'.format(pid), 'rb') as cmdline:
        return cmdline.read().replace(b'\0', b' ').decode(errors='replace').strip()


def epochs_finished(output):
    return [int(epoch) for epoch in re.findall(r'Finished training epoch (\d+) ', output)]


@pytest.mark.parametrize('launcher', ['srun', 'horovodrun'])
def test_sbatch_trains_on_two_nodes_as_localhost_does_and_only_rank_0_writes(cluster, corpus, localhost_run, tmp_path,
                                                                            launcher):
    trace_dir = tmp_path / 'traces'
    trace_dir.mkdir()
    traced_python = tmp_path / 'python'
    traced_python.write_text('#!/bin/sh\nexec {} {} "$@"\n'.format(TRACE, sys.executable))
    traced_python.chmod(0o755)
    # horovodrun reaches hostB through the ssh stand-in, first on PATH
    path = os.pathsep.join([os.path.dirname(netns_hosts.SSH), PYTHON_BIN, os.environ['PATH']])
    job = Job(cluster, tmp_path / 'job.log', training_flags(corpus, tmp_path / 'slurm', 1), python=traced_python,
              env={'TRACE_DIR': str(trace_dir), 'DS_LAUNCHER': launcher, 'PATH': path})
    assert job.wait_until_ended() == 'COMPLETED', job.output()[-5000:]
    output = job.output()
    for rank in (0, 1):
        # srun does not tag the lines (we do), horovodrun does (we do not)
        tag = '[rank {}] '.format(rank) if launcher == 'srun' else '[{}]<stdout>:'.format(rank)
        assert tag + 'I Rank {} of 2 computes on: CPU only'.format(rank) in output, output[-5000:]
    started_by = {'srun': 'srun (Slurm job {}, step 0, PMIx)'.format(job.id), 'horovodrun': 'horovodrun (Gloo)'}
    assert output.count('started by ' + started_by[launcher]) == 2, output[-5000:]
    assert '1 rank(s) on this host' in output       # one rank on each node
    assert len(losses(output)) == 2                 # an epoch of training and of validation
    assert losses(output) == pytest.approx([entry for entry in losses(localhost_run) if entry[1] == 0], rel=1e-4)
    assert saved_variables(tmp_path / 'slurm' / 'checkpoints')['global_step'] == 24
    assert changes_under(traced_calls(trace_dir, 0), tmp_path / 'slurm'), 'rank 0 wrote nothing at all'
    assert changes_under(traced_calls(trace_dir, 1), tmp_path / 'slurm') == []


def test_a_time_limit_saves_requeues_and_the_requeued_job_goes_on_where_it_stopped(cluster, corpus, localhost_run,
                                                                                   tmp_path):
    total_epochs = TIME_LIMIT_EPOCHS
    job = Job(cluster, tmp_path / 'job.log', training_flags(corpus, tmp_path / 'slurm', total_epochs),
              options=['--time=5', '--signal=B:USR1@100'])
    job.wait_for_log(r'Finished training epoch 0 ')
    # slurmctld checks time limits every 30 s (fixed in Slurm's source), so the signal comes up to 30 s (and
    # a little) after the update below: the ranks wait for it frozen (SIGSTOP, as in a long step), which
    # keeps the job in epoch 1 or 2 whatever the machine's speed (70 epochs were needed to outlast the wait
    # unfrozen).
    ranks = job.freeze_tasks()
    try:
        # Now the limit comes 2 minutes after the job's start, so the signal (100 s before) is due, and
        # slurmctld sends it at its next time-limit check: Slurm to the script, the script to srun, srun
        # to the frozen ranks, where it waits until they go on.
        cluster.command('scontrol', 'update', 'JobId=' + job.id, 'TimeLimit=2')
        wait_for_pending(ranks, signal.SIGUSR1, timeout=120)
    finally:
        for pid in ranks:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    job.wait_for_requeue(timeout=120)
    cluster.command('scontrol', 'update', 'JobId=' + job.id, 'TimeLimit=10')   # the rest fits this time
    job.start_again()
    assert job.wait_until_ended() == 'COMPLETED', job.output()[-5000:]
    first, second = job.output().split('job {} run 2 '.format(job.id))
    step = int(re.search(r'Interrupted at global step (\d+), saved ', first).group(1))
    assert 'Exiting with code 138' in first and 'time limit near: requeueing job {}'.format(job.id) in first
    resumed_step, resumed_epoch = (int(n) for n in re.search(r'Training from global step (\d+) \(epoch (\d+)\)',
                                                            second).groups())
    print('job {}: stopped and saved at step {} (epoch {}), resumed there'.format(job.id, step, resumed_epoch))
    assert resumed_step == step and resumed_epoch == step // 24
    # The epochs of both runs are those of one uninterrupted run: the interrupted one finished once.
    assert epochs_finished(first) + epochs_finished(second) == list(range(total_epochs))
    assert saved_variables(tmp_path / 'slurm' / 'checkpoints')['global_step'] == total_epochs * 24
    # The weights after the resumed epoch are those of one run without the stop (no sample of it seen
    # twice or skipped): the validation after it and the next epoch give the same losses.
    resumed = after_epoch(losses(second), resumed_epoch)
    assert len(resumed) == 3, losses(second)[:6]
    assert resumed == pytest.approx(after_epoch(losses(localhost_run), resumed_epoch), rel=1e-4)


def wait_for_pending(pids, signum, timeout):
    """Until `signum` is pending in each of the stopped processes `pids` (sent, waiting for a SIGCONT), or
    one of them was continued (by whoever sent it)."""
    deadline = time.time() + timeout
    while not all(signum in pending or not stopped for pending, stopped in map(pending_signals, pids)):
        assert time.time() < deadline, 'no {} within {} s'.format(signal.Signals(signum).name, timeout)
        time.sleep(0.5)


def pending_signals(pid):
    """The signals sent to the process `pid` and not yet delivered, and whether it is stopped."""
    with open('/proc/{}/status'.format(pid)) as status:
        text = status.read()
    mask = int(re.search(r'^ShdPnd:\s*([0-9a-f]+)$', text, re.M).group(1), 16)
    stopped = re.search(r'^State:\s*T', text, re.M) is not None
    return {signum for signum in range(1, 65) if mask & (1 << (signum - 1))}, stopped


def after_epoch(entries, epoch):
    """Of (set, epoch, loss) entries: the validation of `epoch`, the training and validation of the next."""
    return [entry for entry in entries if entry[1] == epoch + 1 or (entry[1] == epoch and entry[0] != 'training')]


def test_a_node_whose_slurmd_dies_fails_the_job_within_a_minute_and_the_requeued_job_resumes(cluster, corpus,
                                                                                            tmp_path):
    job = Job(cluster, tmp_path / 'job.log', training_flags(corpus, tmp_path / 'slurm', 10000))
    try:
        job.wait_for_log(r'Finished training epoch 0 ')     # a train checkpoint after each epoch
        cluster.kill_slurmd('hostB')
        killed = time.time()
        requeued = job.wait_for_requeue(timeout=90)
        took = time.time() - killed
        print('job {} requeued {:.1f} s after the slurmd of hostB died: {}'.format(job.id, took, requeued['Reason']))
        assert took < 60
        cluster.reboot_node('hostB')        # back in service (ReturnToService=2 makes it usable again)
        job.start_again()
        job.wait_for_log(r'job {} run 2 '.format(job.id))     # the first run's processes are gone by now
        saved = saved_variables(tmp_path / 'slurm' / 'checkpoints')['global_step']
        match = job.wait_for_log(r'job {} run 2 [\s\S]*Training from global step (\d+)'.format(job.id))
        assert int(match.group(1)) == saved > 0
        job.wait_for_log(r'job {} run 2 [\s\S]*Finished training epoch'.format(job.id))
    finally:
        cluster.command('scancel', job.id)


@pytest.mark.fast
def test_sigusr1_is_a_stop_request_and_a_second_one_after_the_stop_is_ignored():
    """Slurm's time-limit signal (--signal=USR1@<s>, or forwarded by bin/slurm/train.sbatch) stops training
    as SIGTERM does; after the stop another SIGUSR1 (srun signals every task) must not kill the rank."""
    from deepspeech_training.signals import STOP_SIGNALS, Interrupted, StopRequests
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in STOP_SIGNALS}
    try:
        with pytest.raises(Interrupted):
            with StopRequests() as requests:
                os.kill(os.getpid(), signal.SIGUSR1)
                assert requests.votes() == [False, False, True]
                raise Interrupted(StopRequests.exit_code(requests.votes()))
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGUSR1)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@pytest.mark.fast
@pytest.mark.parametrize('summed_votes, exit_code', [([0, 0, 2], 138), ([0, 1, 1], 143), ([1, 0, 1], 130),
                                                     ([0, 0, 0], None)])
def test_the_exit_code_names_the_first_kind_of_stop_signal_any_rank_got(summed_votes, exit_code):
    """Votes summed over ranks (SIGINT, SIGTERM, SIGUSR1): 128 + the signal, Ctrl-C first."""
    from deepspeech_training.signals import StopRequests
    assert StopRequests.exit_code(summed_votes) == exit_code


SRUN_TASK = {'SLURM_JOB_ID': '7', 'SLURM_STEP_ID': '0', 'SLURM_STEP_NUM_TASKS': '2', 'SLURM_PROCID': '1',
             'PMIX_RANK': '1'}


@pytest.mark.fast
@pytest.mark.parametrize('env, name', [
    (SRUN_TASK, 'srun (Slurm job 7, step 0, PMIx)'),
    ({'HOROVOD_GLOO_RENDEZVOUS_ADDR': '10.77.0.1', 'HOROVOD_RANK': '1', 'SLURM_JOB_ID': '7'}, 'horovodrun (Gloo)'),
    ({'OMPI_COMM_WORLD_RANK': '1'}, 'mpirun'),
    ({'SLURM_JOB_ID': '7', 'SLURM_PROCID': '0'}, None),      # a batch script's own environment: no launcher
])
def test_the_launcher_is_named_from_the_environment_it_left(env, name):
    from deepspeech_training.util.launchers import launcher
    assert launcher(env) == name


@pytest.mark.fast
def test_srun_tasks_that_are_not_one_jobs_ranks_stop_with_the_launch_line_to_use():
    from deepspeech_training.distributed import Horovod, Single, check_slurm_step
    rank1 = Horovod.__new__(Horovod)
    rank1.rank, rank1.size = 1, 2
    check_slurm_step(rank1, SRUN_TASK)              # srun --mpi=pmix ... --horovod: task 1 is rank 1 of 2
    check_slurm_step(Single(), {})                  # no srun at all
    check_slurm_step(Single(), dict(SRUN_TASK, SLURM_STEP_NUM_TASKS='1', SLURM_PROCID='0'))
    for alone in (Single(), Horovod.__new__(Horovod)):      # no --horovod, or srun without --mpi=pmix
        alone.rank, alone.size = 0, 1
        with pytest.raises(SystemExit, match=r'srun started 2 tasks \(this is task 1\) but this process is rank 0 '
                                             r'of 1: .*srun --mpi=pmix'):
            check_slurm_step(alone, SRUN_TASK)


@pytest.mark.fast
@pytest.mark.parametrize('epochs, total_epochs, checkpoint_epoch, end_epoch, first_epoch', [
    (3, 0, 5, 8, 5),      # --epochs counts this run's epochs
    (3, 6, 5, 6, 0),      # --total_epochs: where one uninterrupted run would end, augmenting as it did
    (3, 6, 6, 6, 0),      # a rerun after the end trains nothing
])
def test_total_epochs_ends_a_rerun_where_one_run_would(epochs, total_epochs, checkpoint_epoch, end_epoch, first_epoch):
    from deepspeech_training.training_progress import end_epochs
    assert end_epochs(checkpoint_epoch, epochs, total_epochs) == (end_epoch, first_epoch)
