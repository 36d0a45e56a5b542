"""Rank-aware logging and progress bars: infos and bars only on the chief, warnings and errors from
every rank, prefixed with the rank when there is more than one. Infos and bars go to stdout, warnings and
errors to stderr; when stdout carries a result (--one_shot_infer's transcript) everything goes to stderr.

The rank is asked of the process's `dist` (distributed.py) at every message, so an elastic reset that
renumbers the ranks needs no call here."""
import os
import sys

import progressbar

from .launchers import tags_lines
from .ranks import OneProcess, is_chief_rank

_state = {'dist': OneProcess(), 'show_progressbar': True, 'tagged': False, 'logs_to_stderr': False, 'log_level': 1}
# --log_level as DeepSpeech 0.9 read it for its own lines too: a line shows when its level is at least this.
LEVELS = {'I': 1, 'W': 2, 'E': 3}


def configure(dist=None, show_progressbar=True, env=None, logs_to_stderr=False, log_level=1):
    """Log as `dist`'s rank (anything with `rank` and `size`; None: one process); infos and bars to stderr
    too if `logs_to_stderr` (stdout is then the command's result alone); only lines of LEVELS `log_level`
    or above (--log_level: 2 hides the infos, 3 the warnings too, as in DeepSpeech 0.9)."""
    _state.update(dist=dist or OneProcess(), show_progressbar=show_progressbar,
                  tagged=tags_lines(os.environ if env is None else env), logs_to_stderr=logs_to_stderr,
                  log_level=log_level)


def _info_stream():
    return sys.stderr if _state['logs_to_stderr'] else sys.stdout


def _is_chief():
    return is_chief_rank(_state['dist'].rank)


def _emit(level, message, filtered=True):
    if filtered and LEVELS[level] < _state['log_level']:
        return
    dist = _state['dist']
    # Not when the launcher prefixes the line with the rank already ('[1,0]<stdout>:[rank 0] I ...').
    prefix = '[rank {}] '.format(dist.rank) if dist.size > 1 and not _state['tagged'] else ''
    stream = sys.stderr if level != 'I' else _info_stream()
    # One write with its newline: unbuffered (PYTHONUNBUFFERED), print() writes the text and the newline
    # apart, and mpirun, which tags what it reads as it comes, then glues the next line's tag to this one.
    stream.write('{}{} {}\n'.format(prefix, level, message))
    stream.flush()


def log_info(message):
    if _is_chief():
        _emit('I', message)


def log_report(message):
    """A result the command was asked for (the test report): shown whatever --log_level, as DeepSpeech 0.9
    printed it."""
    if _is_chief():
        _emit('I', message, filtered=False)


def log_every_rank(message):
    """An info that differs by rank (what it runs on): one line from each rank, not the chief's alone."""
    _emit('I', message)


def log_warn(message):
    _emit('W', message)


def log_error(message):
    _emit('E', message)


class _Text(progressbar.Variable):
    """A Variable shown as the string it is given (progressbar2's Variable turns a number-like string
    into a float shown with `precision` characters)."""

    def __call__(self, progress, data, format=None):
        value = data['variables'][self.name]
        return self.format.format(name=self.name, formatted_value='-' * self.width if value is None else value)


class Progress:
    """A progressbar2 bar with the running mean loss (unless show_loss=False), shown on the chief only."""

    def __init__(self, label, max_value, unit='Steps', show_loss=True):
        self.label = label
        self.bar = None
        if _is_chief() and _state['show_progressbar']:
            widgets = [label, ' | ', progressbar.Timer(), ' | {}: '.format(unit), progressbar.Counter(), '/',
                       str(max_value)]
            if show_loss:
                # The value is formatted here (update()); the Variable's default precision of 3 would cut
                # that string to three characters ('71.' for 71.364600). Under Horovod the bar shows this
                # rank's (rank 0's) running mean; the epoch line gives the mean over all ranks.
                name = 'Loss' if _state['dist'].size == 1 else 'Rank 0 loss'
                widgets += [' | ', _Text('loss', format=name + ': {formatted_value}')]
            # Under several ranks, a line per update: mpirun gives the ranks a terminal (the bar would then
            # redraw its line with '\r'), but tags and glues what it reads into one endless line.
            to_stderr = _state['logs_to_stderr']
            self.bar = progressbar.ProgressBar(max_value=max_value, widgets=widgets, fd=_info_stream(),
                                               redirect_stdout=not to_stderr, redirect_stderr=to_stderr,
                                               line_breaks=True if _state['dist'].size > 1 else None).start()

    def update(self, step, mean_loss=None):
        if self.bar:
            if mean_loss is None:
                self.bar.update(step)
            else:
                self.bar.update(step, loss='{:.6f}'.format(mean_loss))

    def finish(self):
        if self.bar:
            self.bar.finish()
