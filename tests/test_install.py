"""Installing: the version ranges against the tested pins, bin/setup.sh's choice of packages (CPU and
GPU), and the package built as a wheel, installed into a fresh virtual environment and run through
its console scripts from outside the checkout."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.suite import ROOT, SMOKE_CSV, SMOKE_DIR, run_command

REQUIREMENTS = ('base', 'horovod', 'lm', 'plotting', 'test', 'gpu')
CONSOLE_SCRIPTS = ('deepspeech-train', 'deepspeech-evaluate', 'deepspeech-transcribe', 'deepspeech-lm-optimizer',
                   'deepspeech-generate-lm', 'deepspeech-generate-scorer-package')


def requirement_lines(name):
    with open(os.path.join(ROOT, 'requirements', name + '.txt')) as lines:
        return [Requirement(line) for line in map(str.strip, lines) if line and not line.startswith('#')]


def pinned_versions():
    pins = {}
    with open(os.path.join(ROOT, 'constraints.txt')) as lines:
        for line in map(str.strip, lines):
            if line and not line.startswith('#'):
                name, version = line.split('==')
                pins[canonicalize_name(name)] = version
    return pins


@pytest.mark.parametrize('name', REQUIREMENTS)
def test_every_range_admits_the_tested_version_and_this_environment_has_it(name):
    """A range that excludes the pinned version, or a pin this environment was not built from, means
    the tests ran something other than what the package promises."""
    pins = pinned_versions()
    for requirement in requirement_lines(name):
        key = canonicalize_name(requirement.name)
        assert key in pins, '{} ({}.txt) has no tested version in constraints.txt'.format(requirement, name)
        assert requirement.specifier.contains(pins[key]), '{} excludes the tested {}'.format(requirement, pins[key])
        if name != 'gpu':
            assert metadata.version(requirement.name) == pins[key], 'rebuild the environment: bin/setup.sh'


def test_nothing_pins_what_no_code_imports():
    assert 'pandas' not in pinned_versions()


def setup_dry_run(*args, path=None):
    """bin/setup.sh --dry-run's lines, with `path` as PATH (what it looks for: nvcc, mpicc)."""
    base_python = os.path.join(sys.base_prefix, 'bin', 'python{}.{}'.format(*sys.version_info[:2]))
    env = dict(os.environ, DS_PYTHON=base_python, PATH=path or os.environ['PATH'])
    env.pop('DS_GPU', None)
    env.pop('HOROVOD_GPU_OPERATIONS', None)
    run = subprocess.run(['bash', os.path.join(ROOT, 'bin', 'setup.sh'), '--dry-run'] + list(args), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=True)
    return run.stdout.splitlines(), run.stderr


def test_setup_dry_run_of_the_cpu_environment_names_the_one_running_the_tests():
    """The CPU path's packages and key are what built this environment (bin/run_tests.sh runs the
    tests in the environment bin/setup.sh prints)."""
    lines, _ = setup_dry_run()
    assert '# CPU TensorFlow: pip install -c constraints.txt with' in lines
    assert 'tensorflow>=2.15.1,<2.16' in lines and not any('and-cuda' in line for line in lines)
    assert os.path.realpath(lines[-1]) == os.path.realpath(os.path.join(sys.prefix, 'bin', 'python'))


def test_setup_gpu_flag_asks_for_cuda_tensorflow_and_nccl_when_a_cuda_toolkit_is_there(tmp_path):
    cuda_bin = tmp_path / 'cuda' / 'bin'
    cuda_bin.mkdir(parents=True)
    (cuda_bin / 'nvcc').write_text('#!/bin/sh\nexit 0\n')
    (cuda_bin / 'nvcc').chmod(0o755)
    cpu, _ = setup_dry_run('--horovod', path='/usr/bin:/bin')
    with_cuda, _ = setup_dry_run('--gpu', '--horovod', path='{}:/usr/bin:/bin'.format(cuda_bin))
    no_cuda, warning = setup_dry_run('--gpu', '--horovod', path='/usr/bin:/bin')
    horovod = [line for line in with_cuda if line.startswith('# Horovod with Gloo')]
    assert '# GPU TensorFlow (tensorflow[and-cuda]): pip install -c constraints.txt with' in with_cuda
    assert len(horovod) == 1 and horovod[0].endswith('GPU ops NCCL, compiled against it (--no-build-isolation):')
    assert 'tensorflow[and-cuda]>=2.15.1,<2.16' in with_cuda and 'tensorflow==2.15.1' in with_cuda
    assert not any('NCCL' in line for line in no_cuda) and 'no CUDA toolkit (nvcc) found' in warning
    # three environments, side by side: a GPU build never replaces the CPU one
    assert len({cpu[-1], with_cuda[-1], no_cuda[-1]}) == 3


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """A fresh virtual environment with the package installed from a wheel of this checkout.

    The venv is made from this environment's base interpreter and sees this environment's
    site-packages through a .pth file, and the wheel is installed with --no-deps: TensorFlow and the
    rest are not downloaded or installed again (minutes and gigabytes), yet the package, its data
    and its console scripts come from the wheel alone, as for any user's pip install."""
    root = tmp_path_factory.mktemp('install')
    source = root / 'source'    # built from a copy: the build writes build/ and *.egg-info beside the code
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        '.git', '__pycache__', 'build', '*.egg-info', '.pytest_cache', '.hypothesis'))
    run_command([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '--no-index',
                 '-w', root / 'dist', source], timeout=300)
    wheel, = glob.glob(str(root / 'dist' / 'deepspeech_training-*.whl'))
    venv = root / 'venv'
    base_python = os.path.join(sys.base_prefix, 'bin', 'python{}.{}'.format(*sys.version_info[:2]))
    run_command([base_python, '-m', 'venv', '--without-pip', venv])
    site_packages, = glob.glob(str(venv / 'lib' / 'python*' / 'site-packages'))
    with open(os.path.join(site_packages, 'project_env.pth'), 'w') as pth:
        pth.write(sysconfig.get_paths()['purelib'] + '\n')
    run_command([venv / 'bin' / 'python', '-m', 'pip', 'install', '--no-deps', '--no-index', wheel])
    work = root / 'work'        # a working directory with no data/ and no checkout
    work.mkdir()
    return {'wheel': wheel, 'venv': venv, 'site_packages': site_packages, 'work': work}


@pytest.mark.slow
def test_wheel_carries_the_package_its_alphabet_and_console_scripts(installed):
    with zipfile.ZipFile(installed['wheel']) as wheel:
        names = wheel.namelist()
        entry_points = wheel.read(next(n for n in names if n.endswith('entry_points.txt'))).decode()
        requires = wheel.read(next(n for n in names if n.endswith('/METADATA'))).decode()
    assert 'deepspeech_training/data/alphabet.txt' in names and 'deepspeech_training/lm/generate_lm.py' in names
    assert not any(name.startswith(('tests/', 'bin/')) for name in names)
    for script in CONSOLE_SCRIPTS:
        assert re.search(r'^{} = deepspeech_training\.'.format(script), entry_points, re.M), script
    assert 'Requires-Dist: tensorflow<2.16,>=2.15.1' in requires
    assert "Requires-Dist: horovod==0.28.1; extra == \"horovod\"" in requires


@pytest.mark.slow
def test_installed_console_scripts_train_test_and_transcribe_outside_the_checkout(installed):
    """deepspeech-train from a directory with no data/: the default alphabet is the installed
    package's, the run says what it computes on (one line, this one process), trains and tests."""
    venv, work = installed['venv'], installed['work']
    run = run_command([venv / 'bin' / 'deepspeech-train', '--train_files', SMOKE_CSV, '--dev_files', SMOKE_CSV,
                       '--test_files', SMOKE_CSV, '--n_hidden', 32, '--epochs', 2, '--train_batch_size', 1,
                       '--checkpoint_dir', work / 'checkpoints', '--summary_dir', work / 'summaries',
                       '--noshow_progressbar'], cwd=work)
    packaged = os.path.join(installed['site_packages'], 'deepspeech_training', 'data', 'alphabet.txt')
    assert 'I Alphabet: {} (28 labels)'.format(packaged) in run.output
    assert re.findall(r'^.*computes on.*$', run.output, re.M) == [
        'I Rank 0 of 1 computes on: CPU only ({} cores)'.format(os.cpu_count())]
    assert re.search(r'Test on {} - WER: [0-9.]+, CER: [0-9.]+, loss: [0-9.]+'.format(re.escape(SMOKE_CSV)),
                     run.output), run.output[-3000:]

    wav = work / 'hello_world.wav'
    shutil.copy(os.path.join(SMOKE_DIR, 'hello_world.wav'), wav)
    run = run_command([venv / 'bin' / 'deepspeech-transcribe', '--src', wav, '--n_hidden', 32,
                       '--checkpoint_dir', work / 'checkpoints'], cwd=work)
    assert '{}: '.format(wav) in run.output and (work / 'hello_world.tlog').exists()

    for script in ('deepspeech-generate-lm', 'deepspeech-generate-scorer-package'):
        run = run_command([venv / 'bin' / script, '--help'], cwd=work)
        assert 'usage:' in run.output, script
    run = run_command([venv / 'bin' / 'deepspeech-lm-optimizer', '--helpfull'], cwd=work, check=False)
    assert '--n_trials' in run.output and '--lm_alpha_max' in run.output
    run = run_command([venv / 'bin' / 'python', '-m', 'deepspeech_training.train', '--helpfull'], cwd=work,
                      check=False)
    assert '--train_files' in run.output and '--alphabet_config_path' in run.output


def test_default_alphabet_is_the_checkouts_here_and_the_packages_elsewhere(tmp_path, monkeypatch):
    from deepspeech_training.flags import PACKAGE_DIR, alphabet_path
    monkeypatch.chdir(ROOT)
    assert alphabet_path('data/alphabet.txt') == 'data/alphabet.txt'
    monkeypatch.chdir(tmp_path)
    assert alphabet_path('data/alphabet.txt') == os.path.join(PACKAGE_DIR, 'data', 'alphabet.txt')
    # another missing path stays as given, for the flag's check to name it
    assert alphabet_path('my/alphabet.txt') == 'my/alphabet.txt'


def test_setup_names_a_working_python_for_an_environment_of_ones_own():
    """README's `PY3=$(bin/setup.sh --python | tail -n 1)`: a pyenv shim on PATH may not run, the
    interpreter printed must, and be a 3.10 or 3.11 with venv (tests/test_setup.py: which one)."""
    env = dict(os.environ)
    env.pop('DS_PYTHON', None)
    python = subprocess.run(['bash', os.path.join(ROOT, 'bin', 'setup.sh'), '--python'], env=env, check=True,
                            stdout=subprocess.PIPE, universal_newlines=True).stdout.splitlines()[-1]
    version = subprocess.run([python, '-c', 'import sys, venv; print(sys.version_info[:2])'], check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    assert version in ('(3, 10)', '(3, 11)')


# ---- the top level as DeepSpeech had it: setup.py and requirements.txt -----------------------------------

@pytest.fixture(scope='module')
def fresh_venv(tmp_path_factory):
    """A fresh virtual environment of this environment's Python with its own pip, nothing else but what
    test_editable_install_in_a_fresh_venv installs into it (--no-deps: our package alone, which no
    requirement names, so the dry run beside it resolves as in an empty one)."""
    base_python = os.path.join(sys.base_prefix, 'bin', 'python{}.{}'.format(*sys.version_info[:2]))
    venv = tmp_path_factory.mktemp('fresh') / 'venv'
    run_command([base_python, '-m', 'venv', venv], timeout=120)
    return venv


def test_setup_py_is_a_shim_over_pyproject():
    """`python setup.py --name --version` as DeepSpeech users ran it: the metadata is pyproject.toml's."""
    run = subprocess.run([sys.executable, 'setup.py', '--name', '--version'], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=True)
    assert run.stdout.split() == ['deepspeech_training', '0.1.0']


def test_requirements_txt_is_the_training_set_under_the_tested_pins():
    with open(os.path.join(ROOT, 'requirements.txt')) as lines:
        options = [line.strip() for line in lines if line.strip() and not line.startswith('#')]
    assert options == ['-c constraints.txt', '-r requirements/base.txt', '-r requirements/lm.txt']
    with open(os.path.join(ROOT, 'requirements.txt')) as text:
        assert '--no-build-isolation -c constraints.txt -r requirements/horovod.txt' in text.read()


@pytest.mark.slow
def test_editable_install_in_a_fresh_venv(fresh_venv, tmp_path):
    """pip install --no-deps -e . (DeepSpeech's pip3 install --upgrade -e .) in a fresh venv: the package
    imports from the checkout (a copy: the build writes *.egg-info), and the console scripts are there."""
    source = tmp_path / 'source'
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        '.git', '__pycache__', 'build', '*.egg-info', '.pytest_cache', '.hypothesis'))
    python = fresh_venv / 'bin' / 'python'
    run_command([python, '-m', 'pip', 'install', '--no-deps', '-e', '.'], cwd=source, timeout=300)
    run = run_command([python, '-c', 'import deepspeech_training, deepspeech_training.data as d; '
                       'print(deepspeech_training.__file__); print(d.__file__)'], cwd=tmp_path)
    assert run.output.split() == [str(source / 'training' / 'deepspeech_training' / '__init__.py'),
                                  str(source / 'training' / 'deepspeech_training' / 'data' / '__init__.py')]
    for script in CONSOLE_SCRIPTS:
        path = fresh_venv / 'bin' / script
        assert path.exists(), script
        assert path.read_text().splitlines()[0] == '#!{}'.format(python), script
    listed = run_command([python, '-m', 'pip', 'show', 'deepspeech_training']).output
    assert 'Version: 0.1.0' in listed and 'Editable project location: {}'.format(source) in listed


@pytest.mark.slow
def test_requirements_txt_resolves_to_the_tested_versions_in_a_fresh_venv(fresh_venv, tmp_path):
    """pip install -r requirements.txt --dry-run in a fresh venv: everything it would install is at the
    version of constraints.txt (TensorFlow 2.15.1, flashlight-text 0.0.7, ...), and Horovod is left to its build."""
    report = tmp_path / 'report.json'
    run_command([fresh_venv / 'bin' / 'python', '-m', 'pip', 'install', '-r', os.path.join(ROOT, 'requirements.txt'),
                 '--dry-run', '--quiet', '--report', report], cwd=tmp_path, timeout=600)
    with open(str(report)) as report_file:
        chosen = {canonicalize_name(item['metadata']['name']): item['metadata']['version']
                  for item in json.load(report_file)['install']}
    pins = pinned_versions()
    assert {name: version for name, version in chosen.items() if pins.get(name) != version} == {}
    for name in ('tensorflow', 'flashlight-text', 'numpy', 'optuna', 'librosa', 'opuslib'):
        assert name in chosen, name
    assert 'horovod' not in chosen
