"""What a user reads: the progress bar's loss and the log lines, alone and under a launcher that tags lines."""
import io
import os
import subprocess
import sys

import pytest

from tests.helpers.suite import ROOT
from deepspeech_training.util import logging


class Ranks:
    def __init__(self, rank, size):
        self.rank, self.size = rank, size


class Writes(io.StringIO):
    """A stream that keeps each write() apart, as an unbuffered pipe hands them to mpirun."""

    def __init__(self):
        super().__init__()
        self.writes = []

    def write(self, text):
        self.writes.append(text)
        return super().write(text)


@pytest.fixture
def restore_logging():
    yield
    logging.configure()


BAR = """
import sys
from deepspeech_training.util import logging
class Ranks:
    rank, size = 0, int(sys.argv[1])
logging.configure(Ranks(), show_progressbar=True, env={'OMPI_MCA_orte_tag_output': '1'})
progress = logging.Progress('Epoch 0', 3)
progress.update(1, 71.3646)
progress.update(2, 175.309856)
progress.finish()
"""


def bar_output(ranks):
    """The bar of a process (of `ranks` under a launcher that tags lines) with running losses 71.3646, 175.309856."""
    return subprocess.run([sys.executable, '-c', BAR, str(ranks)], stdout=subprocess.PIPE, check=True,
                          universal_newlines=True, cwd=os.path.join(ROOT, 'training')).stdout


def test_progress_bar_shows_the_full_loss():
    lines = bar_output(1).replace('\r', '\n').splitlines()
    assert any(line.rstrip().endswith('| Loss: 71.364600') for line in lines), lines
    assert any(line.rstrip().endswith('| Loss: 175.309856') for line in lines), lines


def test_progress_bar_of_several_ranks_says_whose_loss_and_breaks_lines():
    out = bar_output(2)
    assert '\r' not in out, repr(out)     # a redraw with '\r' is glued by mpirun to the next line
    assert '| Rank 0 loss: 175.309856\n' in out, out


@pytest.mark.parametrize('env, prefix', [({}, '[rank 1] '), ({'HOROVOD_GLOO_RENDEZVOUS_ADDR': '127.0.0.1'}, ''),
                                         ({'OMPI_MCA_orte_tag_output': '1'}, ''), ({'SLURM_LABELIO': '1'}, '')])
def test_log_lines_are_one_write_and_prefixed_once(monkeypatch, restore_logging, env, prefix):
    stream = Writes()
    monkeypatch.setattr(sys, 'stderr', stream)
    logging.configure(Ranks(1, 2), env=env)
    logging.log_warn('fusion buffer 4194304 bytes')
    assert stream.writes == [prefix + 'W fusion buffer 4194304 bytes\n']
