"""Elastic training with real horovodrun (Gloo): a slot removed and re-added mid-training.

The discovery script reads a hosts file the test edits; two host names (localhost and this
machine's name) because an elastic job with one host blacklists it on its first failure."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest
import tensorflow as tf

from conftest import PYTHON_BIN, SMOKE_CSV, deepspeech_command, tiny_model_flags

pytestmark = pytest.mark.slow


def wait_for(process_log, pattern, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(process_log) as log:
            text = log.read()
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError('no {!r} within {} s:\n{}'.format(pattern, timeout, text[-5000:]))


def test_training_survives_a_slot_removed_and_added_again(tmp_path):
    hosts = tmp_path / 'hosts'
    both = 'localhost:1\n{}:1\n'.format(socket.gethostname())
    hosts.write_text(both)
    discover = tmp_path / 'discover.sh'
    discover.write_text('#!/bin/sh\ncat {}\n'.format(hosts))
    discover.chmod(0o755)
    log_path = tmp_path / 'log'
    command = [os.path.join(PYTHON_BIN, 'horovodrun'), '--gloo', '-np', '2', '--min-np', '1', '--max-np', '2',
               '--host-discovery-script', str(discover)] + deepspeech_command(
        '--horovod', '--horovod_elastic', *tiny_model_flags(tmp_path), '--train_files', SMOKE_CSV,
        '--train_batch_size', 1, '--epochs', 100000)    # stopped by the test once the slot is back
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
    with open(log_path, 'w') as log:
        process = subprocess.Popen([str(c) for c in command], stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    try:
        wait_for(log_path, r'x 2 rank\(s\)', 90)
        wait_for(log_path, r'Finished training epoch 2 ', 60)
        hosts.write_text('localhost:1\n')
        wait_for(log_path, r'x 1 rank\(s\)', 60)
        hosts.write_text(both)
        wait_for(log_path, r'x 1 rank\(s\)(.|\n)*x 2 rank\(s\)(.|\n)*Finished training epoch', 90)
        # However long each phase lasts: the job is stopped as a user stops it, and saves.
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        text = log_path.read_text()
        assert 'Interrupted at global step' in text, text[-5000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
    steps = [int(s) for s in re.findall(r'Training from global step (\d+)', log_path.read_text())]
    assert steps[0] == 0 and steps[1] < steps[2], steps     # no step lost or redone over the resets
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / 'checkpoints')))
    assert reader.get_tensor('learning_rate') == pytest.approx(0.001)     # stored unscaled
    assert reader.get_tensor('global_step') > steps[2]
