"""The fast tier's guard. The fast tier (bin/run_tests.sh --fast: the tests not marked slow, and those marked
fast) is the edit-test loop: it starts no launcher and trains nothing long. Every subprocess a fast-tier test
starts, and every command line it reads in process (settings_from_args), is checked; a breach fails the test,
naming the fix. conftest.py installs GuardedPopen and names the running test."""
import os
import shlex
import subprocess

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
