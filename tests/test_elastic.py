"""Elastic training with real horovodrun (Gloo): a slot removed and re-added mid-training.

The discovery script reads a hosts file the test edits; two host names (localhost and this
machine's name) because an elastic job with one host blacklists it on its first failure."""
import collections
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.helpers.horovodrun import horovodrun
from tests.helpers.suite import ROOT, SMOKE_CSV, deepspeech_command, run_command, tiny_model_flags

pytestmark = pytest.mark.slow
BOTH_HOSTS = 'localhost:1\n{}:1\n'.format(socket.gethostname())
CRASH_AT = os.path.join(ROOT, 'tests', 'helpers', 'crash_at.py')


def elastic_launcher(tmp_path):
    """horovodrun of an elastic job of up to 2 ranks on the hosts listed in tmp_path/hosts (both hosts
    now; the caller may edit it), to be followed by the command each rank runs. Without the per-launch
    Gloo build check (tests/helpers/horovodrun.py): these tests are about the job, not the launcher."""
    hosts = tmp_path / 'hosts'
    hosts.write_text(BOTH_HOSTS)
    discover = tmp_path / 'discover.sh'
    discover.write_text('#!/bin/sh\ncat {}\n'.format(hosts))
    discover.chmod(0o755)
    return horovodrun(2, hosts='', options=['--min-np', 1, '--max-np', 2, '--host-discovery-script', discover],
                      build_check=False)


def elastic_deepspeech(*args):
    return deepspeech_command('--horovod', '--horovod_elastic', *args)


def wait_for(process_log, pattern, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(process_log) as log:
            text = log.read()
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError('no {!r} within {} s:\n{}'.format(pattern, timeout, text[-5000:]))


@contextlib.contextmanager
def elastic_job(command, log_path):
    """Run `command` (an elastic job) with its output in log_path while the body runs, then stop it as a
    user does (SIGTERM to horovodrun), however long each phase lasted, and check that it saved."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
    with open(str(log_path), 'w') as log:
        process = subprocess.Popen([str(c) for c in command], stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    try:
        yield
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        text = log_path.read_text()
        assert 'Interrupted at global step' in text, text[-5000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)


def cache_holders(cache_dir):
    """{feature cache file: [(HOROVOD_HOSTNAME, HOROVOD_RANK) each process holding it open was started with]}."""
    holders = collections.defaultdict(list)
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            files = [os.readlink('/proc/{}/fd/{}'.format(pid, fd)) for fd in os.listdir('/proc/{}/fd'.format(pid))]
            with open('/proc/{}/environ'.format(pid), 'rb') as environ:
                env = dict(item.split('=', 1) for item in environ.read().decode(errors='replace').split('\0')
                           if '=' in item)
        except OSError:     # gone meanwhile
            continue
        for path in files:
            if path.startswith(str(cache_dir)) and not path.endswith('.json'):
                holders[path].append((env.get('HOROVOD_HOSTNAME'), env.get('HOROVOD_RANK')))
    return holders


def test_a_resumed_run_its_augmentation_and_feature_caches_survive_rank_0s_host_leaving_and_coming_back(
        tmp_path):
    """A run resumed at epoch 2 (where its A:B augmentation ranges start): rank 0's host leaves (the old
    rank 1 becomes rank 0) and comes back (a joiner, rank 1). Training goes on, the joiner agrees on the
    ranges' first epoch (the ranks check it before every epoch), and the two processes then alive hold
    two feature cache files, not one."""
    hosts, log_path, cache_dir = tmp_path / 'hosts', tmp_path / 'log', tmp_path / 'cache'
    flags = [*tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--train_batch_size', 1,
             '--augment', 'add[p=1,stddev=0:0.5]', '--feature_cache', cache_dir / 'features']
    run_command(deepspeech_command(*flags, '--epochs', 2))
    command = elastic_launcher(tmp_path) + elastic_deepspeech(*flags, '--epochs', 100000)   # the test stops it
    with elastic_job(command, log_path):
        wait_for(log_path, r'x 2 rank\(s\)', 90)
        wait_for(log_path, r'Finished training epoch 4 ', 60)
        rank_0_host = next(host for holders in cache_holders(cache_dir).values() for host, rank in holders
                           if rank == '0')
        hosts.write_text(''.join(line + '\n' for line in BOTH_HOSTS.split() if not line.startswith(rank_0_host)))
        wait_for(log_path, r'x 1 rank\(s\)', 60)
        hosts.write_text(BOTH_HOSTS)
        wait_for(log_path, r'x 1 rank\(s\)(.|\n)*x 2 rank\(s\)(.|\n)*Finished training epoch', 90)
        holders = cache_holders(cache_dir)
        assert sorted(len(h) for h in holders.values()) == [1, 1], holders
    steps = [int(s) for s in re.findall(r'Training from global step (\d+)', log_path.read_text())]
    assert steps[0] == 6 and steps[1] < steps[2], steps     # no step lost or redone over the resets
    assert 'ranks disagree' not in log_path.read_text()
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'checkpoints')))
    assert reader.get_tensor('learning_rate') == pytest.approx(0.001)     # stored unscaled
    assert reader.get_tensor('global_step') > steps[2]


@pytest.mark.parametrize('moment', ['before-pair-sum 2', 'before-commit 1'])
def test_a_worker_killed_in_a_collective_of_ours_resets_the_job_and_training_goes_on(tmp_path, moment):
    """Rank 1 SIGKILLed before the dev-loss sum of epoch 0 (its second sum of two values), or before its
    first commit, while rank 0 writes epoch 0's train checkpoint: rank 0 fails in that collective, goes
    back to the last commit and trains the remaining epochs alone (the failed host is blacklisted)."""
    crash = [sys.executable, CRASH_AT] + moment.split() + ['--rank', '1']
    command = elastic_launcher(tmp_path) + crash + elastic_deepspeech(
        *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV, '--dev_files', SMOKE_CSV, '--train_batch_size', 1,
        '--epochs', 3)[1:]
    run = run_command(command, timeout=400, check=False)
    rank_0 = '\n'.join(line for line in run.output.splitlines() if line.startswith('[0]<stdout>'))
    assert run.returncode == 0 and 'x 1 rank(s)' in rank_0, run.output[-3000:] + rank_0
    assert 'Finished training epoch 2 ' in rank_0, rank_0


def repeated_smoke_csv(tmp_path, times):
    """The 3 smoke-test utterances `times` times over, as one CSV."""
    rows = open(SMOKE_CSV).read().splitlines()
    csv_path = tmp_path / 'repeated.csv'
    csv_path.write_text('\n'.join([rows[0]] + [os.path.join(os.path.dirname(SMOKE_CSV), row)
                                                for row in rows[1:]] * times) + '\n')
    return csv_path


def test_timed_saves_every_second_do_not_hang_an_elastic_job(tmp_path):
    """--checkpoint_secs 1 over 25 steps an epoch: timed saves (each one an elastic commit, a broadcast)
    come mid-epoch, on rank 0 a save later than on rank 1 unless the ranks agree when to save."""
    command = elastic_launcher(tmp_path) + elastic_deepspeech(
        *tiny_model_flags(tmp_path), '--checkpoint_secs', 1, '--epochs', 2,
        '--train_files', repeated_smoke_csv(tmp_path, 17), '--train_batch_size', 1)
    run = run_command(command, timeout=300)
    assert 'Finished training epoch 1 ' in run.output

