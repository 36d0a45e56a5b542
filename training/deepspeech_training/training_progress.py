"""Where training stands besides the variables (TrainingProgress), and where a run from a checkpoint
resumes: pure logic, the values read from the session by the Trainer."""
from dataclasses import dataclass

from .early_stopping import DevTracker
from .util.logging import log_info


@dataclass
class TrainingProgress:
    """Where training stands besides the variables; synced from rank 0 with them, kept over an
    elastic reset (a reset plans the rest of the epoch anew for the new number of ranks)."""
    tracker: DevTracker             # best dev loss and epochs without improvement
    epoch: int = None               # None: not started yet (taken from the synced global_step)
    end_epoch: int = None           # the first epoch this run does not train
    first_epoch: int = None         # where the augmentations' A:B ranges start
    batches_done: int = 0           # of the current epoch, out of ...
    batches_planned: int = 0        # ... the epoch's length when it was planned (0: not planned yet)
    steps_run: int = 0              # by this run, counted alike on every rank (global_step may not be)
    loss_before: tuple = (0.0, 0.0)  # (loss sum, samples) over all ranks of the epoch's batches trained by
                                     # an earlier run (resumed mid-epoch), so the epoch's loss is the whole epoch's


def end_epochs(checkpoint_epoch, epochs, total_epochs):
    """(the first epoch not to train, the first epoch of the augmentations' A:B ranges) for a run that
    resumes at `checkpoint_epoch`: --epochs more, or up to --total_epochs, the same for every rerun of
    the command (a requeued job), which then augments as the first run did."""
    if total_epochs:
        return total_epochs, 0
    return checkpoint_epoch + epochs, checkpoint_epoch


def new_progress(best_dev_loss, training):
    """The progress of a run before its first epoch: a DevTracker from the saved best_dev's loss and the
    early stop and plateau settings of `training` (TrainingSettings)."""
    return TrainingProgress(DevTracker(best_dev_loss, training.es_min_delta,
                                       training.es_epochs if training.early_stop else None,
                                       training.plateau_epochs if training.reduce_lr_on_plateau else None))


def resume(progress, position, epoch_loss, global_step, batches_per_epoch, training):
    """Set where `progress` starts from the checkpoint's (synced) epoch position and epoch loss, or from
    its `global_step` for a checkpoint without them (`batches_per_epoch` of epoch 0), and how far it goes
    (`training`: TrainingSettings); say so. An epoch whose training was done resumes at the next one."""
    epoch, done, planned = (int(value) for value in position)
    if epoch < 0:
        epoch, done, planned = global_step // batches_per_epoch, 0, 0
    elif planned and done == planned:
        epoch, done, planned = epoch + 1, 0, 0
    progress.epoch, progress.batches_done, progress.batches_planned = epoch, done, planned
    progress.loss_before = tuple(float(value) for value in epoch_loss) if done else (0.0, 0.0)
    progress.end_epoch, progress.first_epoch = end_epochs(epoch, training.epochs, training.total_epochs)
    if done:
        log_info('Resuming mid-epoch: epoch {} at step {} of {}{}'.format(
            epoch, done, planned, '; its loss will be the mean over the whole epoch' if progress.loss_before[1] else
            ' (the checkpoint has no loss of the steps done: the epoch\'s loss will be that of the steps run from '
            'here)'))
    if not training.total_epochs and (epoch or done):
        log_info('Training --epochs {} more epoch(s), up to epoch {}; to stop at the same epoch however often the '
                 'command is rerun (a resumed or requeued run), give --total_epochs instead'
                 .format(training.epochs, progress.end_epoch))
