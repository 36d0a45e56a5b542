"""A job across two hosts over Ethernet: hostA and hostB are Linux network namespaces joined by a
veth pair (tests/helpers/netns_hosts.py), each with its own address, hostname and /etc/hosts; the launcher runs
in hostA and starts the rank on hostB through an ssh stand-in, as on two machines. Only the file
system and the CPUs are shared, so every byte between the ranks crosses the link.

Every run is bounded by a timeout that kills its whole process group (generous: a run on a machine
loaded 4x over its cores took over 120 s)."""
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from tests.helpers.horovodrun import horovodrun
from tests.helpers.suite import (ROOT, SMOKE_CSV, deepspeech_command, make_corpus, run_command, run_horovod,
                                 tiny_model_flags)
from test_horovod import TRACE, changes_under, saved_variables, traced_calls

from tests.helpers import netns_hosts

pytestmark = pytest.mark.slow
HOSTS = 'hostA:1,hostB:1'
HOROVODRUN = horovodrun(2, hosts=HOSTS, options=['--disable-cache'])
MPIRUN = ['mpirun', '--allow-run-as-root', '-np', 2, '-H', HOSTS, '--mca', 'plm_rsh_agent', netns_hosts.SSH,
          '-x', 'PATH', '-x', 'TF_CPP_MIN_LOG_LEVEL', '-x', 'PYTHONUNBUFFERED', '-x', 'TRACE_DIR']


@pytest.fixture
def hosts():
    reason = netns_hosts.unavailable()
    if reason:
        pytest.skip('two network-namespace hosts: ' + reason)
    with netns_hosts.two_hosts() as addresses:
        yield addresses


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp('corpus'), 16, 3)


def launch_on_host_a(launcher, *args, wrapper=()):
    """The command that starts `launcher ... python DeepSpeech.py --horovod args` in hostA."""
    return netns_hosts.on_host('hostA', list(launcher) + list(wrapper) + deepspeech_command('--horovod', *args))


def launcher_env(**extra):
    return dict(netns_hosts.launcher_env(), **extra)


def losses(output):
    """[(set, epoch, loss)] as the run logged them, training and validation."""
    return [(name, int(epoch), float(loss)) for name, epoch, loss in
            re.findall(r'Finished (.+?) epoch (\d+)(?: on \S+)? - loss: ([\d.]+)', output)]


def training_flags(corpus, out_dir):
    return tiny_model_flags(out_dir) + ['--train_files', corpus / 'train.csv', '--dev_files', corpus / 'dev.csv',
                                        '--train_batch_size', 2, '--dev_batch_size', 2, '--epochs', 2]


def gradient_bytes(checkpoint_dir):
    """float32 bytes of one step's gradients: every model variable but the optimizer's."""
    variables = saved_variables(checkpoint_dir)
    return 4 * sum(value.size for name, value in variables.items()
                   if '/Adam' not in name and name not in ('global_step', 'learning_rate', 'beta1_power',
                                                           'beta2_power'))


@pytest.fixture(scope='module')
def localhost_run(corpus, tmp_path_factory):
    """(output, out_dir) of the same training with -H localhost:2: what both launchers' two-host runs must
    match. Made once: its flags and corpus are the same for both (it was run again by each)."""
    out_dir = tmp_path_factory.mktemp('localhost')
    return run_horovod(2, *training_flags(corpus, out_dir), timeout=600).output, out_dir


@pytest.mark.parametrize('launcher', ['horovodrun', 'mpirun'])
def test_two_hosts_train_as_localhost_does_and_only_rank_0_writes(hosts, corpus, localhost_run, tmp_path, launcher):
    trace_dir = tmp_path / 'traces'
    trace_dir.mkdir()
    before = netns_hosts.bytes_sent()
    remote = run_command(launch_on_host_a(HOROVODRUN if launcher == 'horovodrun' else MPIRUN,
                                          *training_flags(corpus, tmp_path / 'hosts'), wrapper=[TRACE]),
                         timeout=600, env=launcher_env(TRACE_DIR=str(trace_dir)))
    sent = netns_hosts.bytes_sent() - before
    assert 'learning rate 0.001 x 2 rank(s)' in remote.output
    assert '1 rank(s) on this host' in remote.output   # one rank per host, not two on one
    local_output, local_dir = localhost_run
    assert losses(remote.output) == pytest.approx(losses(local_output), rel=1e-4)
    assert len(losses(remote.output)) == 4   # two epochs of training and of validation
    checkpoints = tmp_path / 'hosts' / 'checkpoints'
    steps = saved_variables(checkpoints)['global_step']
    assert steps == saved_variables(local_dir / 'checkpoints')['global_step'] > 0
    # the gradients crossed the link: a 2-rank allreduce sends each rank's half one way and back
    assert sent > steps * gradient_bytes(checkpoints), (sent, steps)
    assert changes_under(traced_calls(trace_dir, 0), tmp_path / 'hosts'), 'rank 0 wrote nothing at all'
    assert changes_under(traced_calls(trace_dir, 1), tmp_path / 'hosts') == []


def test_a_link_that_dies_mid_training_ends_the_job_within_the_gloo_timeout(hosts, tmp_path):
    gloo_timeout = 5
    command = launch_on_host_a(HOROVODRUN, *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV,
                               '--epochs', 10000)
    process = subprocess.Popen([str(c) for c in command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1',
                                        **launcher_env(HOROVOD_GLOO_TIMEOUT_SECONDS=str(gloo_timeout))),
                               universal_newlines=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: [lines.append(line) for line in process.stdout], daemon=True)
    reader.start()
    try:
        deadline = time.time() + 300    # only bounds a hang: a loaded machine starts slowly
        while not any('Finished training epoch 3 ' in line for line in lines):   # a few steps went through
            assert process.poll() is None and time.time() < deadline, ''.join(lines[-50:])
            time.sleep(0.2)
        netns_hosts.set_link(up=False)
        pulled = time.time()
        process.wait(timeout=gloo_timeout + 40)
        elapsed = time.time() - pulled
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        reader.join(10)
    output = ''.join(lines)
    assert process.returncode != 0
    assert elapsed < gloo_timeout + 30, elapsed
    assert 'Timed out waiting {}ms'.format(gloo_timeout * 1000) in output, output[-3000:]
