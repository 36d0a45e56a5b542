"""What the benchmarks share: the --configs syntax, the text tables, and the commands that start a run of
DeepSpeech.py (one process, or N ranks under horovodrun).

A configuration is comma-separated key=value pairs, configurations are separated by ';':
h (--n_hidden), b (--train_batch_size, per rank), lstm (--lstm_impl), amp (--automatic_mixed_precision),
np (ranks), name (the configuration's label in tables and folder names; by default its pairs); a key in upper
case is set in the environment of the run (e.g. HOROVOD_CYCLE_TIME=5); any other key is passed on as
--key=value (e.g. epochs=2, flagfile=data/recipes/small-corpus.flags)."""
import os
import re
import sys

from tests.helpers.horovodrun import horovodrun

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALPHABET = os.path.join(ROOT, 'data', 'alphabet.txt')
DEEPSPEECH = os.path.join(ROOT, 'DeepSpeech.py')
KEYS = {'h': 'n_hidden', 'b': 'train_batch_size', 'lstm': 'lstm_impl', 'amp': 'automatic_mixed_precision'}
NOT_FLAGS = ('np', 'name')


def parse_configs(text, ranks=1):
    """'h=100,b=8,np=2;name=x,lstm=scan' -> [{'h': '100', 'b': '8', 'np': '2'}, {'name': 'x', 'lstm': 'scan',
    'np': str(ranks)}]; raises ValueError on a pair without a value, np < 1, or two configurations of one label."""
    configs = []
    for item in filter(None, (part.strip() for part in text.split(';'))):
        config = {}
        for pair in filter(None, (p.strip() for p in item.split(','))):
            key, sep, value = pair.partition('=')
            if not sep or not key.strip() or not value.strip():
                raise ValueError('bad configuration item {!r} in {!r}: expected key=value'.format(pair, item))
            config[key.strip()] = value.strip()
        config.setdefault('np', str(ranks))
        if int(config['np']) < 1:
            raise ValueError('np must be at least 1 in {!r}'.format(item))
        configs.append(config)
    if not configs:
        raise ValueError('no configuration given')
    labels = [label(config) for config in configs]
    if len(set(labels)) != len(labels):
        raise ValueError('configuration labels must differ: {}'.format(', '.join(labels)))
    return configs


def parsed_configs(parser, text, ranks=1):
    """parse_configs of a command line's --configs, a malformed one reported as argparse reports a bad argument."""
    try:
        return parse_configs(text, ranks)
    except ValueError as error:
        parser.error(str(error))


def label(config):
    return config.get('name') or ','.join('{}={}'.format(k, v) for k, v in config.items() if k != 'name')


def flags(config):
    """The configuration's DeepSpeech.py flags."""
    return ['--{}={}'.format(KEYS.get(key, key), value) for key, value in config.items()
            if key not in NOT_FLAGS and not key.isupper()]


def environment(config):
    """The configuration's environment variables (its upper-case keys)."""
    return {key: value for key, value in config.items() if key.isupper()}


def localhost_launch(size, command):
    """`horovodrun -np N -H localhost:N command`: N ranks on this machine (horovodrun picks mpirun where MPI is
    installed, as a user's plain horovodrun does)."""
    return horovodrun(size, gloo=False) + command


def gloo_localhost_launch(size, command):
    """The same under Gloo, the launcher this project uses."""
    return horovodrun(size) + command


def deepspeech_command(flags, ranks=1, launch=localhost_launch, wrapper=()):
    """`[wrapper] python DeepSpeech.py flags` on one process, or launch(ranks, that + --horovod)."""
    command = list(wrapper) + [sys.executable, DEEPSPEECH] + list(flags)
    return launch(ranks, command + ['--horovod']) if ranks > 1 else command


def fmt(value, spec='{:.2f}'):
    """A table's cell: '-' for no value, a list as its values joined by '/'."""
    if value is None:
        return '-'
    if isinstance(value, list):
        return '/'.join(fmt(v, spec) for v in value)
    return spec.format(value)


def table(results, columns):
    """A text table of `results` (dicts), one row each; `columns`: (heading, key, format) each, the first
    left-aligned. A result with a non-zero exit_code shows it instead of its measures."""
    rows = [[name for name, _, _ in columns]]
    for result in results:
        if result.get('exit_code', 0) != 0:
            rows.append([result['label'], 'failed: {}'.format(result['exit_code'])] + [''] * (len(columns) - 2))
            continue
        rows.append([fmt(result.get(key), spec) for _, key, spec in columns])
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    lines = ['  '.join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in
                       enumerate(zip(row, widths))) for row in rows]
    lines.insert(1, '-' * len(lines[0]))
    return '\n'.join(lines)


def folder(config):
    """The label as a folder name: no '=' (horovodrun --gloo starts each rank as `env VAR=value ... command`,
    and env would take a wrapper path with '=' in it for one more variable), no ',' or '/'."""
    return re.sub(r'[^\w.-]+', '_', label(config))
