"""Rank-aware logging and progress bars: infos and bars only on the chief, warnings and errors from
every rank, prefixed with the rank when there is more than one. Infos and bars go to stdout, warnings and
errors to stderr; when stdout carries a result (--one_shot_infer's transcript) everything goes to stderr.

The rank is asked of the process's `dist` (distributed.py) at every message, so an elastic reset that
renumbers the ranks needs no call here."""
import sys

import progressbar


class _OneProcess:
    rank, size = 0, 1


_state = {'dist': _OneProcess(), 'show_progressbar': True, 'logs_to_stderr': False}


def configure(dist=None, show_progressbar=True, logs_to_stderr=False):
    """Log as `dist`'s rank (anything with `rank` and `size`; None: one process); infos and bars to stderr
    too if `logs_to_stderr` (stdout is then the command's result alone)."""
    _state.update(dist=dist or _OneProcess(), show_progressbar=show_progressbar, logs_to_stderr=logs_to_stderr)


def _info_stream():
    return sys.stderr if _state['logs_to_stderr'] else sys.stdout


def _is_chief():
    return _state['dist'].rank == 0


def _emit(level, message):
    dist = _state['dist']
    prefix = '[rank {}] '.format(dist.rank) if dist.size > 1 else ''
    print('{}{} {}'.format(prefix, level, message), file=sys.stderr if level != 'I' else _info_stream(),
          flush=True)


def log_info(message):
    if _is_chief():
        _emit('I', message)


def log_every_rank(message):
    """An info that differs by rank (what it runs on): one line from each rank, not the chief's alone."""
    _emit('I', message)


def log_warn(message):
    _emit('W', message)


def log_error(message):
    _emit('E', message)


class Progress:
    """A progressbar2 bar with the running mean loss (unless show_loss=False), shown on the chief only."""

    def __init__(self, label, max_value, unit='Steps', show_loss=True):
        self.label = label
        self.bar = None
        if _is_chief() and _state['show_progressbar']:
            widgets = [label, ' | ', progressbar.Timer(), ' | {}: '.format(unit), progressbar.Counter(), '/',
                       str(max_value)]
            if show_loss:
                widgets += [' | ', progressbar.Variable('loss', format='Loss: {formatted_value}')]
            to_stderr = _state['logs_to_stderr']
            self.bar = progressbar.ProgressBar(max_value=max_value, widgets=widgets, fd=_info_stream(),
                                               redirect_stdout=not to_stderr, redirect_stderr=to_stderr).start()

    def update(self, step, mean_loss=None):
        if self.bar:
            if mean_loss is None:
                self.bar.update(step)
            else:
                self.bar.update(step, loss='{:.6f}'.format(mean_loss))

    def finish(self):
        if self.bar:
            self.bar.finish()
