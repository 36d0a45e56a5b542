"""pytest's plumbing for the suite (doc/TESTING.rst): the fast tier's guard on every subprocess, the order
and grouping of the files for pytest-xdist's workers, a run directory the workers share, the background
image build, a watchdog for hung tests, and the fixtures. What the test files share is in tests/helpers/
(suite.py), imported by module name: pytest.ini puts the checkout and its training/ on the path."""
import faulthandler
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

from tests.helpers.docker_image import start_image_build, stop_image_build
from tests.helpers.fast_tier import GuardedPopen, fast_tier_test, in_fast_tier
from tests.helpers.suite import ALPHABET, RUN_DIR, SMOKE_CSV

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


# The run directory (tests/helpers/suite.py's run_dir), made by the controller, shared by the workers.
def pytest_configure(config):
    if not hasattr(config, 'workerinput') and RUN_DIR not in os.environ:
        os.environ[RUN_DIR] = tempfile.mkdtemp(prefix='deepspeech-tests-')
        config.owns_run_dir = True


def pytest_unconfigure(config):
    if getattr(config, 'owns_run_dir', False):
        stop_image_build()
        shutil.rmtree(os.environ.pop(RUN_DIR), ignore_errors=True)


def pytest_collection_finish(session):
    if any('image' in getattr(item, 'fixturenames', ()) for item in session.items):
        start_image_build()


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
