"""Shared test helpers: the checkout's paths and a runner for `python DeepSpeech.py` subprocesses; the
suite's plumbing (doc/TESTING.rst): the fast tier's guard, the order and grouping of the files for
pytest-xdist's workers, a run directory the workers share, and a watchdog for hung tests."""
import contextlib
import faulthandler
import fcntl
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'training'))

ALPHABET = os.path.join(ROOT, 'data', 'alphabet.txt')
SMOKE_DIR = os.path.join(ROOT, 'data', 'smoke_test')
SMOKE_CSV = os.path.join(SMOKE_DIR, 'smoke_test.csv')
SMOKE_SINGLE_CSV = os.path.join(SMOKE_DIR, 'smoke_test_single.csv')


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


# ---------------------------------------------------------------------------------------------------------
# The fast tier (bin/run_tests.sh --fast: the tests not marked slow, and those marked fast) is the edit-test
# loop: it starts no launcher and trains nothing long. Every subprocess a fast-tier test starts, and every
# command line it reads in process (settings_from_args), is checked; a breach fails the test, naming the fix.
FAST_TIER_LAUNCHERS = ('horovodrun', 'mpirun', 'mpiexec', 'srun', 'sbatch')
FAST_TIER_MAX_EPOCHS = 5


class FastTierViolation(AssertionError):
    """A test of the fast tier started what only the full suite may: mark the test (or its file) slow."""


class fast_tier_test:
    """The fast-tier test running in this process, if any (a class attribute: seen by every thread)."""
    nodeid = None


def in_fast_tier(item):
    return item.get_closest_marker('fast') is not None or item.get_closest_marker('slow') is None


def check_fast_tier_command(command):
    """Raise FastTierViolation if the running test is in the fast tier and `command` (a subprocess's argv,
    or a trainer's flags) starts a launcher or trains more than FAST_TIER_MAX_EPOCHS epochs."""
    nodeid = fast_tier_test.nodeid
    if nodeid is None:
        return
    words = shlex.split(command) if isinstance(command, (str, bytes)) else [str(word) for word in command]
    for i, word in enumerate(words):
        name, _, value = word.partition('=')
        if os.path.basename(name) in FAST_TIER_LAUNCHERS:
            raise FastTierViolation('{} is in the fast tier but starts {}: mark it slow (only the full suite '
                                    'starts launchers)'.format(nodeid, os.path.basename(name)))
        if name.lstrip('-') in ('epochs', 'total_epochs'):
            value = value or (words[i + 1] if i + 1 < len(words) else '')
            if value.isdigit() and int(value) > FAST_TIER_MAX_EPOCHS:
                raise FastTierViolation('{} is in the fast tier but trains {} {}: at most {} there; mark it slow'
                                        .format(nodeid, value, name, FAST_TIER_MAX_EPOCHS))


class GuardedPopen(subprocess.Popen):
    """subprocess.Popen (and so subprocess.run) with the fast tier's check of the command line."""

    def __init__(self, args, *more, **options):
        check_fast_tier_command(args)
        super().__init__(args, *more, **options)


subprocess.Popen = GuardedPopen


# ---------------------------------------------------------------------------------------------------------
# Order and grouping for pytest-xdist (bin/run_tests.sh runs `-n <cores> --dist loadgroup
# --no-loadscope-reorder`). A file's tests stay on one worker (its module-scoped fixtures, a trained model or
# a corpus, are made once); the files that make the two network-namespace hosts share one worker (the hosts
# are one machine-wide resource, netns_hosts.py's lock); the slowest files start first so no worker is left
# with a long file at the end, and the Docker image's tests come last: their image is built in the
# background from the start of the run (start_image_build). Costs: doc/TESTING.rst.
# test files, or file::test prefixes, that use the two hosts (tests/helpers/netns_hosts.py)
NETWORK_HOST_TESTS = ('test_multihost', 'test_slurm', 'test_benchmark::test_storage_benchmark')
SLOWEST_FIRST = ['test_faults', 'network_hosts', 'test_horovod', 'test_elastic', 'test_benchmark', 'test_docs',
                 'test_sdb', 'test_decoding', 'test_training', 'test_export', 'test_release_checkpoints',
                 'test_validation', 'test_mixed_precision', 'test_layer_norm', 'test_recipes', 'test_feature_cache',
                 'test_install']
LAST = ['test_docker']


def xdist_group(item):
    module = item.module.__name__.rpartition('.')[2]
    test = '{}::{}'.format(module, item.name)
    return 'network_hosts' if any(test.startswith(prefix) for prefix in NETWORK_HOST_TESTS) else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each test's group as an xdist_group mark (before xdist reads the marks), then the slowest groups first,
    the image's last, the others in file order."""
    def rank(item):
        group = xdist_group(item)
        if group in LAST:
            return len(SLOWEST_FIRST) + 1
        return SLOWEST_FIRST.index(group) if group in SLOWEST_FIRST else len(SLOWEST_FIRST)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
    items.sort(key=rank)     # stable: file order within a rank


# ---------------------------------------------------------------------------------------------------------
# A directory for the whole run, shared by the xdist workers (they inherit its path from the controller):
# the background image build's files, and models trained once for several files (shared_model).
RUN_DIR = 'DS_TEST_RUN_DIR'


def pytest_configure(config):
    if not hasattr(config, 'workerinput') and RUN_DIR not in os.environ:
        os.environ[RUN_DIR] = tempfile.mkdtemp(prefix='deepspeech-tests-')
        config.owns_run_dir = True


def pytest_unconfigure(config):
    if getattr(config, 'owns_run_dir', False):
        stop_image_build()
        shutil.rmtree(os.environ.pop(RUN_DIR), ignore_errors=True)


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


# ---------------------------------------------------------------------------------------------------------
# The Docker image (tests/test_docker.py) is built in the background from the end of collection, beside the
# other tests, by the first process that collects a test needing it; tests/test_docker.py's `image` fixture
# waits for it. Its files: run_dir('image', 'out'|'log'|'rc'|'pid').
IMAGE_BUILD = os.path.join(ROOT, 'bin', 'build_docker_cpu_local.sh')
# vfs keeps every layer as a full copy: measured here ~10 GB under /var/lib/containers for one build.
IMAGE_DISK_GB = 20


def image_build_unavailable():
    """Why the image cannot be built here (None if it can)."""
    free_gb = shutil.disk_usage('/var/lib' if os.path.isdir('/var/lib') else '/').free / 1e9
    if free_gb < IMAGE_DISK_GB:
        return 'building the image needs about {} GB free under /var/lib, {:.1f} GB here'.format(IMAGE_DISK_GB,
                                                                                                 free_gb)
    return None


def pytest_collection_finish(session):
    if any('image' in getattr(item, 'fixturenames', ()) for item in session.items):
        start_image_build()


def start_image_build():
    if image_build_unavailable():
        return
    os.makedirs(run_dir('image'), exist_ok=True)
    try:
        os.close(os.open(run_dir('image', 'started'), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return                                    # another worker started it
    build = subprocess.Popen(['sh', '-c', '"$0" >"$1/out" 2>"$1/log"; echo $? >"$1/rc"', IMAGE_BUILD,
                              run_dir('image')], cwd=ROOT, start_new_session=True)
    with open(run_dir('image', 'pid'), 'w') as pid:
        pid.write(str(build.pid))


def stop_image_build():
    """End a build still running when the run ends (a run stopped early, or -k without the image's tests)."""
    try:
        with open(run_dir('image', 'pid')) as pid:
            os.killpg(int(pid.read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def built_image(timeout):
    """The name of the image built in the background (waiting up to `timeout` s for it), or an
    AssertionError with the build's log."""
    deadline = time.time() + timeout
    while not os.path.isfile(run_dir('image', 'rc')) and time.time() < deadline:
        time.sleep(1)
    with open(run_dir('image', 'log')) as log:
        build_log = log.read()
    assert os.path.isfile(run_dir('image', 'rc')), 'image not built in {} s:\n{}'.format(timeout, build_log[-4000:])
    with open(run_dir('image', 'rc')) as rc, open(run_dir('image', 'out')) as out:
        assert rc.read().strip() == '0', build_log[-4000:]
        return out.read().strip().splitlines()[-1]


# ---------------------------------------------------------------------------------------------------------
# Past pytest-timeout's limit by this much, the watchdog below ends the run.
WATCHDOG_GRACE = 120


def end_hung_run(item, seconds):
    """Print the process tree and every thread's stack, then exit the whole run."""
    item.config.pluginmanager.getplugin('capturemanager').suspend_global_capture(in_=True)   # to the terminal
    sys.stderr.write('\n{} still running after {} s: pytest-timeout could not stop it (stuck outside Python '
                     'code); the processes and stacks:\n'.format(item.nodeid, seconds))
    sys.stderr.flush()
    subprocess.run(['ps', '-N', '--ppid', '2', '--pid', '2', '--forest', '--cols', '240',   # no kernel threads
                    '-o', 'pid,ppid,etimes,pcpu,stat,args'], stdout=sys.stderr.fileno())
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    os._exit(70)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    """pytest-timeout's SIGALRM only takes effect when the main thread runs Python code again, so a test
    stuck in C (an in-process TensorFlow call) would hold the suite until CI's own limit and say nothing.
    Past the test's timeout plus WATCHDOG_GRACE this watchdog thread ends the run with the process tree
    and the stacks (TensorFlow's blocking calls release the GIL, so the thread runs beside them)."""
    marker = item.get_closest_marker('timeout')
    seconds = (marker.args[0] if marker else float(item.config.getini('timeout') or 900)) + WATCHDOG_GRACE
    watchdog = threading.Timer(seconds, end_hung_run, (item, seconds))
    watchdog.daemon = True
    watchdog.start()
    fast_tier_test.nodeid = item.nodeid if in_fast_tier(item) else None
    try:
        yield
    finally:
        fast_tier_test.nodeid = None
        watchdog.cancel()


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
        # --gloo: with MPI installed horovodrun would pick mpirun; the mpirun path has its own test.
        launch = [os.path.join(PYTHON_BIN, 'horovodrun'), '--gloo', '-np', ranks, '-H', 'localhost:{}'.format(ranks)]
    else:
        launch = ['mpirun', '--allow-run-as-root', '--oversubscribe', '-np', ranks, '-x', 'PATH']
    return run_command(launch + list(wrapper) + deepspeech_command('--horovod', *args), timeout=timeout,
                       check=check, env=env)


def make_corpus(out_dir, count, seed):
    """A generated corpus of real synthetic speech: train.csv, dev.csv, test.csv in out_dir."""
    run_command([sys.executable, os.path.join(ROOT, 'bin', 'make_speech_corpus.py'), '--out_dir', out_dir,
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


@pytest.fixture(scope='session')
def speech():
    """The first bundled smoke-test utterance, as float samples at 16 kHz."""
    from deepspeech_training.data.audio import read_audio
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    return read_audio(read_sources([SMOKE_CSV], load_alphabet(ALPHABET))[0].audio_path, 16000)


@pytest.fixture
def alphabet():
    from deepspeech_training.util.text import load_alphabet
    return load_alphabet(ALPHABET)


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
