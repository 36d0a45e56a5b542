"""A pytest plugin that says which modules of training/deepspeech_training the tests ran code of:
`PYTHONPATH=tests/helpers pytest -p modules_exercised ...` (bin/run_tests.sh --fast --modules).

It watches function calls in this process and its threads (sys.settrace, calls only: the hook returns
no local tracer, so lines and C calls cost nothing; no coverage package) and
lists, at the end, each module with the number of its functions that ran; a module none of whose
functions ran (importing it does not count) is listed as NOT EXERCISED. Code run in subprocesses
(DeepSpeech.py runs) is not seen: what it lists is what the tests exercise in process. The hook costs
several times the run time of TensorFlow graph building, so it is removed once every module has been
seen: give the files that reach the last modules first (doc/TESTING.rst) and the count per module is
then a lower bound.
"""
import os
import sys
import threading
from collections import defaultdict

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       'training', 'deepspeech_training') + os.sep

_called = defaultdict(set)


_expected = set()


def _trace(frame, event, _arg):
    code = frame.f_code     # settrace's global hook sees 'call' events only
    if code.co_filename.startswith(PACKAGE) and code.co_name != '<module>':
        _called[code.co_filename].add(code.co_name)
        if _expected <= set(_called):    # all seen: the rest of the run at full speed
            sys.settrace(None)
            threading.settrace(None)


def pytest_configure(config):
    _expected.update(path for path in package_modules() if has_functions(path))
    sys.settrace(_trace)
    threading.settrace(_trace)


def package_modules():
    for directory, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith('.py'):
                yield os.path.join(directory, name)


def has_functions(path):
    with open(path) as source:
        return any(line.lstrip().startswith(('def ', 'class ')) for line in source)


def pytest_terminal_summary(terminalreporter):
    sys.settrace(None)
    threading.settrace(None)
    write = terminalreporter.write_line
    terminalreporter.section('modules of deepspeech_training exercised in process')
    missing = []
    for path in sorted(package_modules()):
        name = os.path.relpath(path, PACKAGE)
        if _called.get(path):
            write('{:40s} {} function(s) ran'.format(name, len(_called[path])))
        elif has_functions(path):
            missing.append(name)
            write('{:40s} NOT EXERCISED'.format(name))
        else:
            write('{:40s} (no functions: imported only)'.format(name))
    write('{} module(s) with functions not exercised{}'.format(len(missing), ': ' + ', '.join(missing) if missing else ''))
