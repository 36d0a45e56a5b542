"""Run DeepSpeech.py and SIGKILL it (or send it another signal) the Nth time it reaches one moment of
training or of a save, so a fault test strikes at the moment it names instead of at a wall-clock-random
one:

    python crash_at.py MOMENT N [--signal NAME] [--rank R] [--to-horovodrun] DeepSpeech.py [flags...]

The moments are taken at TensorFlow's and Python's own functions (not the trainer's), so they stay put
when the trainer's code moves. The default is SIGKILL to this very process: nothing runs after it.
`--signal SIGINT` sends that instead (the trainer's handler runs); under horovodrun `--rank R` limits
it to one rank, and `--to-horovodrun` sends it to the horovodrun that started this rank.
"""
import os
import runpy
import signal
import sys

import psutil
import tensorflow.compat.v1 as tfv1
from horovod.common import elastic
from tensorflow.python.checkpoint import checkpoint_management


def _send_on(owner, name, matches, nth, send, after=False):
    """Wrap owner.name: at its nth call whose arguments `matches`, send() (before the call, or after it
    returned when `after`)."""
    original = getattr(owner, name)
    seen = [0]

    def wrapper(*args, **kwargs):
        due = False
        if matches(*args, **kwargs):
            seen[0] += 1
            due = seen[0] == nth
        if due and not after:
            send()
        result = original(*args, **kwargs)
        if due and after:
            send()
        return result

    setattr(owner, name, wrapper)


def _horovodrun_pid():
    """The outermost horovodrun above this rank (its middlemen are forks of it, with its command line)."""
    launchers = [p for p in psutil.Process().parents()
                 if any(os.path.basename(part) == 'horovodrun' for part in p.cmdline()[:2])]
    if not launchers:
        raise RuntimeError('not started by horovodrun')
    return launchers[-1].pid


def _sender(signal_name, rank, to_horovodrun):
    """What a moment does: `signal_name` to this process (or its horovodrun), on rank `rank` only if given."""
    signum = getattr(signal, signal_name)
    if rank is not None and int(os.environ.get('HOROVOD_RANK', 0)) != rank:
        return lambda: None
    return lambda: os.kill(_horovodrun_pid() if to_horovodrun else os.getpid(), signum)


def _state_file(name):
    """Matches an update of the checkpoint state file `name` (the Saver's and ours both go through it)."""
    return lambda save_dir, model_checkpoint_path, *args, **kwargs: kwargs.get('latest_filename') == name


def _replaces(filename):
    return lambda source, target, *args, **kwargs: os.path.basename(str(target)) == filename


def _training_step(session, fetches, *args, **kwargs):
    """A Session.run of the trainer's train op (on every rank, where summaries are the chief's only)."""
    return isinstance(fetches, dict) and 'train' in fetches


def _fetches_sum_of_two(session, fetches, *args, **kwargs):
    return 'seam_sum_2' in getattr(fetches, 'name', '')


MOMENTS = {
    # after the Nth training step of this process: mid-epoch, between saves
    'after-train-step': lambda n, send: _send_on(tfv1.Session, 'run', _training_step, n, send, after=True),
    # train checkpoint data and meta graph written, the state file `checkpoint` not yet updated
    'before-train-state': lambda n, send: _send_on(checkpoint_management, 'update_checkpoint_state_internal',
                                                   _state_file('checkpoint'), n, send),
    # best_dev data written, its dev-loss record not yet replaced
    'before-best-record': lambda n, send: _send_on(os, 'replace', _replaces('best_dev_loss.json'), n, send),
    # the record names the new best_dev, the state file `best_dev_checkpoint` does not yet
    'before-best-state': lambda n, send: _send_on(checkpoint_management, 'update_checkpoint_state_internal',
                                                  _state_file('best_dev_checkpoint'), n, send),
    # the whole best_dev save done, nothing after it
    'after-best-state': lambda n, send: _send_on(checkpoint_management, 'update_checkpoint_state_internal',
                                                 _state_file('best_dev_checkpoint'), n, send, after=True),
    # the seam's sum of two values (an epoch's train loss, then each dev set's loss), not yet entered
    'before-pair-sum': lambda n, send: _send_on(tfv1.Session, 'run', _fetches_sum_of_two, n, send),
    # an elastic commit not yet entered (rank 0 commits after its train checkpoint, the others at once)
    'before-commit': lambda n, send: _send_on(elastic.State, 'commit', lambda *args, **kwargs: True, n, send),
}


def main(argv):
    moment, nth, rest = argv[1], int(argv[2]), argv[3:]
    signal_name, rank, to_horovodrun = 'SIGKILL', None, False
    while rest[0].startswith('--'):
        option = rest.pop(0)
        if option == '--signal':
            signal_name = rest.pop(0)
        elif option == '--rank':
            rank = int(rest.pop(0))
        elif option == '--to-horovodrun':
            to_horovodrun = True
        else:
            raise SystemExit('unknown option ' + option)
    MOMENTS[moment](nth, _sender(signal_name, rank, to_horovodrun))
    sys.argv = rest
    runpy.run_path(rest[0], run_name='__main__')


if __name__ == '__main__':
    main(sys.argv)
