"""Shared test helpers: the checkout's paths and a runner for `python DeepSpeech.py` subprocesses."""
import faulthandler
import os
import re
import signal
import subprocess
import sys
import threading

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
# bin/build_kenlm.sh puts KenLM's tools into the environment.
KENLM_BIN = os.path.join(os.path.dirname(PYTHON_BIN), 'kenlm', 'bin')


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
    try:
        yield
    finally:
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
        pytest.skip('KenLM tools not built: run bin/build_kenlm.sh')
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
    """In process, as DeepSpeech.py's main() reads its command line `args` (flags.py, config.py, cli.py):
    (Settings, the flags.txt text, cli.read_input's (train records, dev sets, test sets)). FLAGS is
    left unparsed, so each call starts from the defaults."""
    from deepspeech_training import cli
    from deepspeech_training.flags import FLAGS, create_flags
    create_flags()
    FLAGS(['DeepSpeech.py', '--alphabet_config_path', ALPHABET, '--noshow_progressbar'] + [str(a) for a in args])
    try:
        settings = cli.settings_from_flags()
        return settings, FLAGS.flags_into_string(), cli.read_input(settings.model)
    finally:
        FLAGS.unparse_flags()


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
