"""Rank-aware logging and progress bars: infos and bars only on the chief, warnings and errors from
every rank, prefixed with the rank when there is more than one."""
import sys

import progressbar

_state = {'rank': 0, 'size': 1, 'show_progressbar': True}


def configure(rank=0, size=1, show_progressbar=True):
    _state.update(rank=rank, size=size, show_progressbar=show_progressbar)


def _emit(level, message):
    prefix = '[rank {}] '.format(_state['rank']) if _state['size'] > 1 else ''
    print('{}{} {}'.format(prefix, level, message), file=sys.stderr if level != 'I' else sys.stdout,
          flush=True)


def log_info(message):
    if _state['rank'] == 0:
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
        if _state['rank'] == 0 and _state['show_progressbar']:
            widgets = [label, ' | ', progressbar.Timer(), ' | {}: '.format(unit), progressbar.Counter(), '/',
                       str(max_value)]
            if show_loss:
                widgets += [' | ', progressbar.Variable('loss', format='Loss: {formatted_value}')]
            self.bar = progressbar.ProgressBar(max_value=max_value, widgets=widgets, fd=sys.stdout,
                                               redirect_stdout=True).start()

    def update(self, step, mean_loss=None):
        if self.bar:
            if mean_loss is None:
                self.bar.update(step)
            else:
                self.bar.update(step, loss='{:.6f}'.format(mean_loss))

    def finish(self):
        if self.bar:
            self.bar.finish()
