"""What the test files share: the checkout's paths, runners of `python DeepSpeech.py` (one process or
horovodrun), inputs made on demand (a speech corpus, a KenLM scorer), models trained once per run, the
released clients' environments, and the command line read in process as DeepSpeech.py reads it."""
import contextlib
import fcntl
import os
import pathlib
import re
import signal
import shutil
import subprocess
import sys

import pytest

from deepspeech_training.data.samples import CSV_COLUMNS
from tests.helpers.fast_tier import check_fast_tier_command
from tests.helpers.horovodrun import horovodrun

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Python a test runs beside the package (helper scripts, -c programs) finds deepspeech_training through this
# (the tests through pytest.ini's pythonpath; the entry scripts put training/ on their path themselves).
PACKAGE_ENV = {'PYTHONPATH': os.path.join(ROOT, 'training')}

ALPHABET = os.path.join(ROOT, 'data', 'alphabet.txt')
SMOKE_DIR = os.path.join(ROOT, 'data', 'smoke_test')
SMOKE_CSV = os.path.join(SMOKE_DIR, 'smoke_test.csv')
SMOKE_SINGLE_CSV = os.path.join(SMOKE_DIR, 'smoke_test_single.csv')
CSV_HEADER = ','.join(CSV_COLUMNS)      # the first line of a DeepSpeech CSV


# wraps a rank in strace (tests/helpers/trace_files.sh): which rank touched which file
TRACE = os.path.join(ROOT, 'tests', 'helpers', 'trace_files.sh')

PYTHON_BIN = os.path.dirname(sys.executable)
# bin/build_kenlm.sh (bin/setup.sh --kenlm) puts KenLM's tools into the environment.
KENLM_BIN = os.path.join(os.path.dirname(PYTHON_BIN), 'kenlm', 'bin')
# bin/setup_clients.sh (bin/setup.sh --clients) puts the released clients and DeepSpeech's decoder there.
CLIENTS_DIR = os.environ.get('DS_CLIENTS_DIR', os.path.join(sys.prefix, 'clients'))


def run_command(command, timeout=600, check=True, env=None, cwd=ROOT):
    """Run `command` in its own process group (in `cwd`, the checkout by default), killed whole on
    timeout (a hung Horovod rank must fail the test, not block the suite). Returns the
    CompletedProcess, stdout+stderr in .output."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1', **(env or {}))
    process = subprocess.Popen([str(c) for c in command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError('timed out after {} s: {}\n{}'.format(timeout, ' '.join(map(str, command)),
                                                                   output[-5000:]))
    result = subprocess.CompletedProcess(command, process.returncode, output)
    result.output = output
    if check and process.returncode != 0:
        raise AssertionError('{} failed ({}):\n{}'.format(' '.join(map(str, command[:6])), process.returncode,
                                                          output[-5000:]))
    return result


# TensorFlow's import lines a user should not see (deepspeech_training.entry.import_tensorflow_quietly drops them)
TF_IMPORT_NOISE = ('Unable to register cuDNN', 'Unable to register cuFFT', 'Unable to register cuBLAS', 'TensorRT')


def import_noise(output):
    """The lines of `output` that are TensorFlow's import noise."""
    return [line for line in output.splitlines() if any(word in line for word in TF_IMPORT_NOISE)]


def run_as_user(command, timeout=300, codes=(0,)):
    """`command` with the environment a user has: no TF_CPP_MIN_LOG_LEVEL (run_command sets one)."""
    env = {name: value for name, value in os.environ.items() if name != 'TF_CPP_MIN_LOG_LEVEL'}
    run = subprocess.run([str(c) for c in command], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout)
    assert run.returncode in codes, run.stdout[-5000:]
    return run.stdout


# A directory for the whole run, shared by the xdist workers (they inherit its path from the controller):
# the background image build's files, and models trained once for several files (shared_model).
RUN_DIR = 'DS_TEST_RUN_DIR'


def run_dir(*parts):
    return os.path.join(os.environ[RUN_DIR], *parts)


@contextlib.contextmanager
def run_lock(name):
    """An exclusive lock of the whole run (all workers) named `name`."""
    with open(run_dir(name + '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_model(name, *flags, timeout=600):
    """The checkpoint directory of a model trained once for the whole run by `DeepSpeech.py *flags
    --checkpoint_dir <it>` (the first worker to ask trains it, the others wait for it), and that run's
    output. Tests only read it: a test that writes checkpoints copies it first."""
    directory = run_dir('models', name)
    with run_lock('model-' + name):
        if not os.path.isfile(os.path.join(directory, 'output.txt')):
            shutil.rmtree(directory, ignore_errors=True)
            os.makedirs(directory)
            run = run_deepspeech(*flags, '--checkpoint_dir', os.path.join(directory, 'checkpoints'),
                                 '--summary_dir', os.path.join(directory, 'summaries'), timeout=timeout)
            with open(os.path.join(directory, 'output.txt'), 'w') as output:
                output.write(run.output)
    with open(os.path.join(directory, 'output.txt')) as output:
        return pathlib.Path(directory) / 'checkpoints', output.read()


OVERFIT_N_HIDDEN = 100


def overfit_single_utterance():
    """(checkpoint directory, training output) of a model of n_hidden 100 overfit on the one bundled
    utterance (smoke_test_single.csv), shared by the files that need an exact transcript. Trained to a
    margin: the loss was 2.3 after 150 epochs, 0.24 after 200 (where one machine still decoded 'good
    mrning'), 0.056 after 300, so 300 leaves room for a machine that learns slower."""
    return shared_model('overfit_single', '--n_hidden', OVERFIT_N_HIDDEN, '--dropout_rate', 0,
                        '--train_files', SMOKE_SINGLE_CSV, '--epochs', 300)


def traced_calls(trace_dir, rank):
    """The lines of rank `rank`'s strace log written under TRACE."""
    with open(os.path.join(str(trace_dir), 'rank{}.trace'.format(rank))) as trace:
        return trace.read().splitlines()


def deepspeech_command(*args):
    return [sys.executable, os.path.join(ROOT, 'DeepSpeech.py'), '--alphabet_config_path', ALPHABET,
            '--noshow_progressbar'] + [str(a) for a in args]


def run_deepspeech(*args, timeout=600, check=True):
    """Run DeepSpeech.py in a fresh process, as a user would."""
    return run_command(deepspeech_command(*args), timeout=timeout, check=check)


def run_horovod(ranks, *args, launcher='horovodrun', wrapper=(), timeout=600, check=True, env=None):
    """`horovodrun -np N -H localhost:N [wrapper] python DeepSpeech.py --horovod ...` (or mpirun)."""
    if launcher == 'horovodrun':
        launch = horovodrun(ranks, build_check=False)     # Gloo: the mpirun path has its own test
    else:
        launch = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', ranks, '-x', 'PATH']
    return run_command(launch + list(wrapper) + deepspeech_command('--horovod', *args), timeout=timeout,
                       check=check, env=env)


def make_corpus(out_dir, count, seed):
    """A generated corpus of real synthetic speech: train.csv, dev.csv, test.csv in out_dir."""
    run_command([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', out_dir,
                 '--count', count, '--seed', seed])
    return out_dir


def make_scorer(text_file, out_dir, *package_flags):
    """out_dir (a Path)/kenlm.scorer: a trigram KenLM scorer package of the text's 500 most frequent words
    (small generated texts have no singletons, so Kneser-Ney needs --discount_fallback)."""
    if not os.path.isfile(os.path.join(KENLM_BIN, 'lmplz')):
        pytest.skip('KenLM tools not built: run bin/setup.sh --kenlm')
    run_command([sys.executable, os.path.join(ROOT, 'data', 'lm', 'generate_lm.py'), '--input_txt', text_file,
                 '--output_dir', out_dir, '--top_k', 500, '--arpa_order', 3, '--max_arpa_memory', '64M',
                 '--discount_fallback'])
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'generate_scorer_package.py'), '--alphabet', ALPHABET,
                 '--lm', out_dir / 'lm.binary', '--vocab', out_dir / 'vocab-500.txt', '--package',
                 out_dir / 'kenlm.scorer', *package_flags])
    return out_dir / 'kenlm.scorer'


def start_step(output):
    """The global step a run reported it started training from."""
    return int(re.search(r'Training from global step (\d+)', output).group(1))


def tiny_model_flags(tmp_path, n_hidden=32):
    """Flags for a small, fast, deterministic model whose files all go under tmp_path."""
    return ['--n_hidden', n_hidden, '--dropout_rate', 0, '--checkpoint_dir', tmp_path / 'checkpoints',
            '--summary_dir', tmp_path / 'summaries']


def settings_from_args(*args):
    """In process, as DeepSpeech.py's main() reads its command line `args`: (Settings, inputs.read_input's
    (train records, dev sets, test sets, metrics sets)). The global FLAGS is not touched."""
    from deepspeech_training.config import settings_from_args as parse
    from deepspeech_training.inputs import read_input
    check_fast_tier_command(args)
    settings = parse(['--alphabet_config_path', ALPHABET, '--noshow_progressbar', *args])
    return settings, read_input(settings.input, settings.model)


def client_python(client):
    """The client environment's python, or a skip naming what is missing (bin/setup_clients.sh writes why
    it installed nothing, e.g. no Python 3.9 on the machine, to .missing)."""
    python = os.path.join(CLIENTS_DIR, client, 'bin', 'python')
    if not os.path.isfile(os.path.join(CLIENTS_DIR, '.complete')):
        try:
            with open(os.path.join(CLIENTS_DIR, '.missing')) as missing:
                reason = missing.read().strip()
        except OSError:
            reason = 'bin/setup.sh --clients has not run for this environment'
        pytest.skip('released clients not installed in {}: {} (bin/setup.sh --clients)'.format(CLIENTS_DIR, reason))
    return python


def ds_ctcdecoder_output(program, *args):
    """Run `program` with DeepSpeech 0.9.3's own decoder package (imported as d, in its Python 3.9 environment
    beside the clients), the reference ours is held to; its standard output."""
    process = subprocess.run([client_python('ds_ctcdecoder'), '-c', 'import sys, ds_ctcdecoder as d\n' + program]
                             + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=120)
    assert process.returncode == 0, process.stderr
    return process.stdout
