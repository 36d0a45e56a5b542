"""Run DeepSpeech.py and SIGKILL it the Nth time it reaches one moment of training or of a save, so a
fault test kills at the moment it names instead of at a wall-clock-random one:

    python crash_at.py MOMENT N DeepSpeech.py [flags...]

Under horovodrun, CRASH_AT_RANK=R arms it in the process started as rank R only (the others run plainly).

The moments are taken at TensorFlow's and Python's own functions (not the trainer's), so they stay put
when the trainer's code moves. The kill is SIGKILL to this very process: nothing runs after it.
"""
import os
import runpy
import signal
import sys

import tensorflow.compat.v1 as tfv1
from horovod.common import elastic
from tensorflow.python.checkpoint import checkpoint_management


def _kill_on(owner, name, matches, nth, after=False):
    """Wrap owner.name: at its nth call whose arguments `matches`, SIGKILL (before the call, or after
    it returned when `after`)."""
    original = getattr(owner, name)
    seen = [0]

    def wrapper(*args, **kwargs):
        if matches(*args, **kwargs):
            seen[0] += 1
            if seen[0] == nth:
                if after:
                    original(*args, **kwargs)
                os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _state_file(name):
    """Matches an update of the checkpoint state file `name` (the Saver's and ours both go through it)."""
    return lambda save_dir, model_checkpoint_path, *args, **kwargs: kwargs.get('latest_filename') == name


def _replaces(filename):
    return lambda source, target, *args, **kwargs: os.path.basename(str(target)) == filename


def _step_summary(writer, summary, *args, **kwargs):
    return any(value.tag == 'step_loss' for value in summary.value)


def _fetches_sum_of_two(session, fetches, *args, **kwargs):
    return 'seam_sum_2' in getattr(fetches, 'name', '')


MOMENTS = {
    # after the Nth training step's summary: mid-epoch, between saves
    'after-step': lambda n: _kill_on(tfv1.summary.FileWriter, 'add_summary', _step_summary, n, after=True),
    # train checkpoint data and meta graph written, the state file `checkpoint` not yet updated
    'before-train-state': lambda n: _kill_on(checkpoint_management, 'update_checkpoint_state_internal',
                                             _state_file('checkpoint'), n),
    # best_dev data written, its dev-loss record not yet replaced
    'before-best-record': lambda n: _kill_on(os, 'replace', _replaces('best_dev_loss.json'), n),
    # the record names the new best_dev, the state file `best_dev_checkpoint` does not yet
    'before-best-state': lambda n: _kill_on(checkpoint_management, 'update_checkpoint_state_internal',
                                            _state_file('best_dev_checkpoint'), n),
    # the whole best_dev save done, nothing after it
    'after-best-state': lambda n: _kill_on(checkpoint_management, 'update_checkpoint_state_internal',
                                           _state_file('best_dev_checkpoint'), n, after=True),
    # the seam's sum of two values (an epoch's train loss, then each dev set's loss), not yet entered
    'before-pair-sum': lambda n: _kill_on(tfv1.Session, 'run', _fetches_sum_of_two, n),
    # an elastic commit not yet entered (rank 0 commits after its train checkpoint, the others at once)
    'before-commit': lambda n: _kill_on(elastic.State, 'commit', lambda *args, **kwargs: True, n),
}

if __name__ == '__main__':
    moment, nth, script = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if os.environ.get('CRASH_AT_RANK') in (None, os.environ.get('HOROVOD_RANK')):
        MOMENTS[moment](nth)
    sys.argv = sys.argv[3:]
    runpy.run_path(script, run_name='__main__')
