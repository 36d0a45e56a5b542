"""Where start-up time goes: the trainer marks the end of each phase (import, read sources, validation,
planning, graph) and, at its first training step, `first_step()` writes a report, only when the
environment asks for one:

  DS_STARTUP_REPORT=<path>   write JSON to <path>.<rank>: seconds from process start (the interpreter's own
                             start included) to the first step, each phase's seconds, peak RSS (and
                             the peak as each phase ended) and the process's read counters (/proc/self/io)
  DS_STARTUP_EXIT=1          end the process right after writing (exit 0): a start-up measurement needs no
                             training. Every rank reaches its first step, so none is left in a collective.

benchmarks/scale.py reads these reports. No TensorFlow here: marks cost a clock read.
"""
import json
import logging
import os
import resource
import sys
import time

from .launchers import env_rank

REPORT = 'DS_STARTUP_REPORT'
EXIT = 'DS_STARTUP_EXIT'
PHASES = ('import', 'read sources', 'validation', 'planning', 'graph', 'first batch')
IO_FIELDS = ('rchar', 'syscr', 'read_bytes')

_marks = {}         # phase -> time.monotonic() when it ended; the first mark of a phase counts
_peaks = {}         # phase -> peak RSS (MB) of the process when it ended: which phase set the peak
_reported = []      # a report is written once per process


def _seconds_since_process_start():
    """How long ago the kernel started this process (/proc/self/stat starttime against /proc/uptime), so
    the interpreter's start and the imports before this module count; None where /proc lacks them."""
    try:
        with open('/proc/self/stat') as stat:
            # the command name (field 2) may hold spaces: count the fields after its closing parenthesis
            started_ticks = int(stat.read().rsplit(')', 1)[1].split()[19])
        with open('/proc/uptime') as uptime:
            return float(uptime.read().split()[0]) - started_ticks / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        return None


_since_start = _seconds_since_process_start()
PROCESS_START = time.monotonic() - (_since_start or 0.0)


def mark(phase):
    """`phase` ended now (the time since the previous phase's end is its duration)."""
    _marks.setdefault(phase, time.monotonic())
    _peaks.setdefault(phase, _peak_rss_mb())


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def phase_seconds():
    """{phase: seconds} of the phases marked, in the order they ended; the first one from process start."""
    durations, previous = {}, PROCESS_START
    for phase, ended in sorted(_marks.items(), key=lambda item: item[1]):
        durations[phase] = ended - previous
        previous = ended
    return durations


def io_counters():
    """The /proc/self/io fields benchmarks compare (bytes and read calls of every file and socket), or {}."""
    try:
        with open('/proc/self/io') as io:
            fields = dict(line.split(':') for line in io.read().splitlines())
        return {name: int(fields[name]) for name in IO_FIELDS}
    except (OSError, ValueError, KeyError):
        return {}


def report(rank):
    """The report of this process: what `first_step()` writes. Its peak RSS is the one read at the last
    mark, not read again: input threads keep allocating meanwhile, and a later reading would exceed every
    phase's peak, so no phase would have reached it."""
    return dict(rank=rank, pid=os.getpid(), seconds_to_first_step=time.monotonic() - PROCESS_START,
                process_start_known=_since_start is not None, phases=phase_seconds(),
                peak_rss_mb=max(_peaks.values(), default=_peak_rss_mb()),
                peak_rss_mb_after=dict(_peaks), io=io_counters())


def first_step(rank=None):
    """The first training step ended: mark it and, once, write the report when DS_STARTUP_REPORT names a
    path, then exit when DS_STARTUP_EXIT=1. Called after every step; only the first one acts."""
    if _reported:
        return
    _reported.append(True)
    mark('first batch')
    path = os.environ.get(REPORT)
    if not path:
        return
    rank = env_rank(os.environ) if rank is None else rank
    with open('{}.{}'.format(path, rank), 'w') as out:
        json.dump(report(rank), out, indent=2)
    if os.environ.get(EXIT) == '1':
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
