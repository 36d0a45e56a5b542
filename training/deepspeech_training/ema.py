"""--ema_decay: an exponential moving average of the model's weights, kept beside training and saved as a
checkpoint of its own (doc/QUALITY.rst, "Averaged checkpoints").

The weights of the last steps wander around a minimum; their average often sits nearer to it. The average
follows each update (average = d x average + (1 - d) x weights, d = min(--ema_decay, (1 + step) / (10 +
step)): TensorFlow's num_updates, so the first steps do not keep the random initial weights for long) and
training never reads it: the run trains exactly as without the flag. Its variables (`<weight>/
ExponentialMovingAverage`) are global variables, so rank 0's broadcast gives every rank the same; each rank
applies the same synchronised update to them, so they stay the same without a collective. The train and
best_dev checkpoints leave them out (DeepSpeech's layout, checkpoints.SAVED_APART); rank 0 writes them at
each train checkpoint into `<save_dir>/ema/` as `best_dev-<step>`, under the weights' own names and with the
train checkpoint's other variables, in bin/average_checkpoints.py's layout: test, export and transcription
load that folder as any checkpoint folder.
"""
import os

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .checkpoint_names import BEST_DEV, BEST_STATE, EMA_FOLDER
from .checkpoints import (SAVED_APART, name_alone, op_error_cause, read_state, remove_partial,
                          remove_superseded, save_or_stop, saved_variables, step_of)
from .util.logging import log_info, log_warn

class WeightAverage:
    """The average in the graph: the train op that updates it after each step and its variables by the
    name of the weight they average."""

    def __init__(self, decay, weights, global_step, train_op):
        average = tfv1.train.ExponentialMovingAverage(decay, num_updates=global_step)
        with tf.control_dependencies([train_op]):   # global_step read after the update: 1 at the first step
            self.train_op = average.apply(weights)
        self.shadows = {weight.op.name: average.average(weight) for weight in weights}
        for shadow in self.shadows.values():
            tfv1.add_to_collection(SAVED_APART, shadow)
        self.restart_op = tf.group([average.average(weight).assign(weight) for weight in weights])


class WeightAverageSaver:
    """Writes the average to `<save_dir>/ema/` (rank 0, one checkpoint kept) and brings it back on resume.
    Built after the train graph, so its checkpoint holds every variable a train checkpoint holds."""

    def __init__(self, average, load_dir, save_dir, dist):
        self.average, self.dist = average, dist
        self.load_dir, self.save_dir = os.path.join(load_dir, EMA_FOLDER), os.path.join(save_dir, EMA_FOLDER)
        self.flags_dir = save_dir
        layout = {variable.op.name: variable for variable in saved_variables()}
        layout.update(average.shadows)      # the averages in place of the weights: a model checkpoint
        self.saver = tfv1.train.Saver(var_list=layout, max_to_keep=1, save_relative_paths=True)
        self.restorer = tfv1.train.Saver(var_list=average.shadows)

    @classmethod
    def from_settings(cls, average, checkpoints, dist):
        return cls(average, checkpoints.load_dir, checkpoints.save_dir, dist)

    def save(self, session, step):
        """Write `best_dev-<step>` and name it in the state files, then remove the previous one: a crash
        leaves the previous one named and whole. A failed write stops training as a train checkpoint's does."""
        if not self.dist.is_chief:
            return None
        os.makedirs(self.save_dir, exist_ok=True)
        previous = self._newest(self.save_dir)
        prefix = os.path.join(self.save_dir, '{}-{}'.format(BEST_DEV, step))
        path = save_or_stop(lambda: self._write(session, step), 'the weight average of step {}'.format(step),
                            self.save_dir, lambda: remove_partial(prefix))
        remove_superseded(previous, path)
        return path

    def _write(self, session, step):
        path = self.saver.save(session, os.path.join(self.save_dir, BEST_DEV), global_step=step,
                               write_meta_graph=False, write_state=False)
        name_alone(self.save_dir, path, self.flags_dir)
        return path

    def resume(self, session, step, loaded_checkpoint):
        """On the chief, after the load (the caller broadcasts): the average of `<load_dir>/ema/` when it is
        of the loaded `step`, else the weights as they are now (fresh, or those of `loaded_checkpoint`)."""
        if not self.dist.is_chief:
            return
        path = self._newest(self.load_dir)
        if loaded_checkpoint and path and step_of(path) == step and self._restored(session, path):
            log_info('Restored the weight average (--ema_decay) of step {} from {}'.format(step, path))
            return
        session.run(self.average.restart_op)
        if loaded_checkpoint:
            log_info('The weight average (--ema_decay) restarts from the loaded weights: no readable average of '
                     'step {} in {}'.format(step, self.load_dir))

    def _restored(self, session, path):
        """Whether the averages could be restored from `path` (a damaged one is named in a warning)."""
        try:
            self.restorer.restore(session, path)
            return True
        except (tf.errors.OpError, ValueError) as error:     # ValueError: its .index is missing
            log_warn('cannot load the weight average {}: {}'.format(path, op_error_cause(str(error))))
            return False

    @staticmethod
    def _newest(directory):
        names = read_state(directory, BEST_STATE)
        return os.path.join(directory, names[0]) if names else None
