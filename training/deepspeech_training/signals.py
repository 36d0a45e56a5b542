"""Stopping training on a signal: the handler only sets a flag, the train loop reads it between steps and
the ranks agree on it (one allreduce a step), so every rank stops at the same step with a checkpoint."""
import signal
import threading


class Interrupted(Exception):
    """Training stopped on a signal (STOP_SIGNALS) after a train checkpoint of the current step was saved."""

    def __init__(self, exit_code):
        super().__init__('interrupted')
        self.exit_code = exit_code


# What stops training with a checkpoint of the current step: Ctrl-C, a launcher's or scheduler's SIGTERM,
# and SIGUSR1, which Slurm sends before a job's time limit (`--signal=USR1@<s>`, bin/slurm/). The exit
# code says which came (128 + the signal); when the ranks got several, the first of this order wins.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)


class StopRequests:
    """STOP_SIGNALS only set a flag (the handler saves nothing); the train loop reads it between steps,
    and all ranks agree on it so they stop at the same step."""

    def __init__(self):
        self.signum, self.previous = 0, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:   # e.g. SIGINT of a `cmd &` job
                    self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, _frame):
        self.signum = self.signum or signum

    def __exit__(self, exc_type, *_):
        # After an agreed stop the process is on its way out with its code: a launcher's SIGTERM (or a
        # second SIGUSR1) that comes later (horovodrun forwards a signal to the ranks one by one, Slurm
        # signals every task) must not turn that exit into a death by signal (horovodrun then reports 143
        # for a rank that stopped cleanly). Ctrl-C still ends a stuck shutdown.
        for signum, handler in self.previous.items():
            stopping = exc_type is Interrupted and signum != signal.SIGINT
            signal.signal(signum, signal.SIG_IGN if stopping else handler)

    def votes(self):
        """This rank's part of the agreed stop, summed over ranks: one count per stop signal."""
        return [self.signum == signum for signum in STOP_SIGNALS]

    @staticmethod
    def exit_code(summed_votes):
        """From the votes summed over ranks: None (no stop), else 128 + the first signal any rank got."""
        for signum, votes in zip(STOP_SIGNALS, summed_votes):
            if votes:
                return 128 + signum
        return None
