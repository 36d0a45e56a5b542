"""Shared test helpers: the checkout's paths and a runner for `python DeepSpeech.py` subprocesses."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'training'))

ALPHABET = os.path.join(ROOT, 'data', 'alphabet.txt')
SMOKE_DIR = os.path.join(ROOT, 'data', 'smoke_test')
SMOKE_CSV = os.path.join(SMOKE_DIR, 'smoke_test.csv')
SMOKE_SINGLE_CSV = os.path.join(SMOKE_DIR, 'smoke_test_single.csv')


def run_deepspeech(*args, timeout=600, check=True):
    """Run DeepSpeech.py in a fresh process, as a user would; returns the CompletedProcess with
    stdout and stderr merged into .output."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1')
    command = [sys.executable, os.path.join(ROOT, 'DeepSpeech.py'), '--alphabet_config_path', ALPHABET,
               '--noshow_progressbar'] + [str(a) for a in args]
    process = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=timeout)
    process.output = process.stdout
    if check and process.returncode != 0:
        raise AssertionError('DeepSpeech.py failed ({}):\n{}'.format(process.returncode, process.output[-5000:]))
    return process


def start_step(output):
    """The global step a run reported it started training from."""
    return int(re.search(r'Training from global step (\d+)', output).group(1))


def tiny_model_flags(tmp_path, n_hidden=32):
    """Flags for a small, fast, deterministic model whose files all go under tmp_path."""
    return ['--n_hidden', n_hidden, '--dropout_rate', 0, '--checkpoint_dir', tmp_path / 'checkpoints',
            '--summary_dir', tmp_path / 'summaries']


@pytest.fixture
def alphabet():
    from deepspeech_training.util.text import load_alphabet
    return load_alphabet(ALPHABET)
