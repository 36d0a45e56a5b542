"""bin/setup.sh on a fresh machine, the parts that cost little: which Python it trains with when found as
a new user's shell finds it (`env -i`, a fresh HOME, no pyenv on PATH), which ones it refuses, and what the
main job's set-up installs compared with the test set-up's. The full cold run is checked outside the suite
(doc/TESTING.rst, "Set-up")."""
import os
import subprocess

import pytest

from tests.helpers.suite import ROOT

SETUP = os.path.join(ROOT, 'bin', 'setup.sh')
SYSTEM_PYTHON = '/usr/bin/python3'
# What only the tests use, and what only --horovod / --kenlm build with: never in the main job's set-up.
TEST_INFRASTRUCTURE = {'slurm-wlm', 'munge', 'libpmix-dev', 'openssh-server', 'sshfs', 'strace', 'iproute2',
                       'espeak-ng', 'ffmpeg', 'buildah', 'debootstrap'}
BUILD_ONLY = {'cmake', 'g++', 'make', 'openmpi-bin', 'libopenmpi-dev', 'libboost-program-options-dev'}


def fresh_shell_setup(tmp_path, *args, **env):
    """bin/setup.sh as a fresh login would run it: the system PATH only (no pyenv shims), an empty HOME
    and environment cache, no apt-get."""
    home = tmp_path / 'home'
    home.mkdir(exist_ok=True)
    env = dict({'PATH': '/usr/bin:/bin', 'HOME': str(home), 'DS_ENV_CACHE': str(tmp_path / 'cache'),
                'DS_NO_APT': '1'}, **env)
    return subprocess.run(['bash', SETUP] + list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


def version_of(python):
    return subprocess.run([python, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'], check=True,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()


def test_a_fresh_shell_gets_the_system_python_not_a_39(tmp_path):
    """No pyenv on PATH: the machine's /usr/bin/python3 (Debian 12: 3.11), the Python the training
    environment, `--python` and README's own-environment recipe build on."""
    if not os.path.exists(SYSTEM_PYTHON) or version_of(SYSTEM_PYTHON) not in ('3.10', '3.11'):
        pytest.skip('{} is not a Python 3.10 or 3.11 here'.format(SYSTEM_PYTHON))
    run = fresh_shell_setup(tmp_path, '--python')
    assert run.returncode == 0, run.stderr
    python = run.stdout.splitlines()[-1]
    assert python == SYSTEM_PYTHON, run.stdout + run.stderr
    assert version_of(python) in ('3.10', '3.11')


@pytest.mark.parametrize('kind', ['python3.9', 'python3.12', 'missing'])
def test_ds_python_that_is_not_usable_is_refused_with_the_reason(tmp_path, kind):
    """DS_PYTHON names the interpreter by hand; one of another version, or none at all, stops the set-up
    (not a silent fall-back to another Python)."""
    python = tmp_path / kind
    if kind != 'missing':
        # answers the version probe as that Python would
        python.write_text('#!/bin/sh\necho {}\n'.format(kind[len('python'):]))
        python.chmod(0o755)
    run = fresh_shell_setup(tmp_path, '--python', DS_PYTHON=str(python))
    assert run.returncode != 0 and run.stdout == '', run.stdout
    reason = 'is Python {} (supported: 3.10, 3.11)'.format(kind[len('python'):]) if kind != 'missing' \
        else 'does not run'
    assert 'ERROR: DS_PYTHON={} is not usable: {} {}'.format(python, python, reason) in run.stderr, run.stderr


def test_a_real_python39_is_refused(tmp_path):
    """The clients' Python 3.9 (pyenv's here) is never the training environment's."""
    found = subprocess.run(['bash', '-c', '. {}/bin/python_candidates.sh; pyenv_pythons 3.9'.format(ROOT)],
                           stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
    if not found:
        pytest.skip('no Python 3.9 on this machine')
    run = fresh_shell_setup(tmp_path, '--python', DS_PYTHON=found[0])
    assert run.returncode != 0 and 'is Python 3.9 (supported: 3.10, 3.11)' in run.stderr, run.stderr


def debian_packages(tmp_path, *args):
    """The Debian packages `bin/setup.sh --dry-run [args]` says it installs."""
    run = fresh_shell_setup(tmp_path, '--dry-run', *args)
    assert run.returncode == 0, run.stderr
    line, = [line for line in run.stdout.splitlines() if line.startswith('# Debian packages: ')]
    return set(line[len('# Debian packages: '):].split(' (missing:')[0].split())


def test_the_main_setup_installs_no_test_infrastructure_and_builds_nothing(tmp_path):
    main = debian_packages(tmp_path)
    assert {'sox', 'libsndfile1', 'libopus0'} <= main
    assert main & (TEST_INFRASTRUCTURE | BUILD_ONLY) == set()
    run = fresh_shell_setup(tmp_path, '--dry-run')
    assert 'horovod==0.28.1' not in run.stdout.split('# constraints:')[0]
    assert "KenLM" not in run.stdout and 'clients' not in run.stdout
    # the test set-up asks for all of it
    assert TEST_INFRASTRUCTURE | BUILD_ONLY <= debian_packages(tmp_path, '--test')
    assert {'openmpi-bin', 'cmake'} <= debian_packages(tmp_path, '--horovod')
    assert 'openssh-server' not in debian_packages(tmp_path, '--horovod', '--kenlm', '--clients')
