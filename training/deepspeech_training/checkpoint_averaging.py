"""The mean of a run's last K checkpoints, written as one checkpoint in DeepSpeech 0.9's layout
(bin/average_checkpoints.py; doc/QUALITY.rst, "Averaged checkpoints").

The weights of the last epochs wander around a minimum; their mean often sits nearer to it than any one
of them. The model's float weights are averaged (summed in float64, rounded once, so the result is the
exact mean of the inputs as stored); the optimizer and the loop's bookkeeping (Adam's moments and beta
powers, global_step, learning_rate, the epoch position and loss) and any integer variable are the newest
input's, so a run resumed from the mean continues where the newest one stopped.

The output folder holds `best_dev-<newest step>` (a `.index` and a data file, as our Saver writes them,
without the `.meta` graph no loader reads) and both state files naming it, `best_dev_checkpoint` and
`checkpoint`, so `--load_evaluate best`, `last` and `auto` load it for test, export and transcription; no
`best_dev_loss.json`, since its dev loss is unknown (a training run resumed from it evaluates it first). The
input folder's flags.txt is copied beside it. The inputs must hold the same variables with the same shapes
(one model, one flag set); release checkpoints trained with cuDNN average like ours (their opaque Adam
moments are optimizer state, taken from the newest).
"""
import os

import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .checkpoint_names import BEST_DEV, EPOCH_LOSS, EPOCH_POSITION, GLOBAL_STEP, LEARNING_RATE, TRAIN
from .checkpoints import name_alone, present

KINDS = (TRAIN, BEST_DEV)
# Variables that are state of the optimizer or of the loop, not of the model: copied from the newest input.
NEWEST_STATE = {GLOBAL_STEP, LEARNING_RATE, 'beta1_power', 'beta2_power', EPOCH_POSITION, EPOCH_LOSS}
SLOT_SUFFIXES = ('/Adam', '/Adam_1')


class AveragingError(ValueError):
    pass


def last_checkpoints(directory, kind, count):
    """The prefixes of the `count` newest `kind` checkpoints (by step) whose .index is in `directory`,
    oldest first. Fewer than `count` is an error: a mean of fewer than asked would be silently another
    measurement."""
    if kind not in KINDS:
        raise AveragingError('kind must be one of {}, not {!r}'.format(', '.join(KINDS), kind))
    found = present(directory, kind)
    if len(found) < count:
        raise AveragingError('{} {} checkpoint(s) in {}, {} asked to average (a run keeps the last --max_to_keep '
                             'train checkpoints, default 5, and one best_dev)'.format(len(found), kind, directory,
                                                                                      count))
    return found[:count][::-1]     # oldest first


def is_averaged(name, dtype):
    """A model weight: a float variable that is neither optimizer nor loop state."""
    return dtype.is_floating and name not in NEWEST_STATE and not name.endswith(SLOT_SUFFIXES)


def _layout(reader):
    """{name: (shape, dtype name)} of a checkpoint."""
    dtypes = reader.get_variable_to_dtype_map()
    return {name: (shape, dtypes[name].name) for name, shape in reader.get_variable_to_shape_map().items()}


def _check_same_variables(readers, paths):
    """Every input has the newest's variables, shapes and dtypes, or an error naming the differences."""
    newest = _layout(readers[-1])
    for reader, path in zip(readers[:-1], paths[:-1]):
        layout = _layout(reader)
        differences = ['{} {} vs {}'.format(name, layout.get(name, 'absent'), newest.get(name, 'absent'))
                       for name in sorted(set(layout) | set(newest)) if layout.get(name) != newest.get(name)]
        if differences:
            raise AveragingError('{} and {} hold different variables ({}{}): only checkpoints of one model (same '
                                 '--n_hidden, alphabet, --layer_norm) can be averaged'.format(
                                     path, paths[-1], '; '.join(differences[:4]), '; ...' if len(differences) > 4 else ''))
    return readers[-1].get_variable_to_dtype_map()


def averaged_variables(paths):
    """{name: value}: the mean of `paths`' model weights, the rest from the last (newest) path."""
    readers = [tf.train.load_checkpoint(path) for path in paths]
    dtypes = _check_same_variables(readers, paths)
    values = {}
    for name, dtype in dtypes.items():
        if is_averaged(name, dtype):
            total = sum(reader.get_tensor(name).astype(np.float64) for reader in readers)
            values[name] = (total / len(readers)).astype(dtype.as_numpy_dtype)
        else:
            values[name] = readers[-1].get_tensor(name)
    return values


def write_checkpoint(values, prefix):
    """Write {name: array} to checkpoint `prefix` (TensorFlow's V2 format, as tf.train.Saver writes it)."""
    names = sorted(values)
    with tf.Graph().as_default():
        inputs = [tfv1.placeholder(tf.as_dtype(values[name].dtype), values[name].shape) for name in names]
        save = tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[''] * len(names),
                                 tensors=inputs)
        with tfv1.Session() as session:
            session.run(save, dict(zip(inputs, (values[name] for name in names))))


def average_checkpoints(checkpoint_dir, out_dir, count, kind=TRAIN):
    """Average the last `count` `kind` checkpoints of `checkpoint_dir` into `out_dir` (see above); returns
    (the output prefix, the input prefixes)."""
    if os.path.realpath(out_dir) == os.path.realpath(checkpoint_dir):
        raise AveragingError('the output folder must not be the checkpoint folder {}: its state files would then '
                             'name the mean instead of the run\'s own checkpoints'.format(checkpoint_dir))
    paths = last_checkpoints(checkpoint_dir, kind, count)
    values = averaged_variables(paths)
    os.makedirs(out_dir, exist_ok=True)
    name = '{}-{}'.format(BEST_DEV, int(values.get(GLOBAL_STEP, 0)))
    prefix = os.path.join(out_dir, name)
    write_checkpoint(values, prefix)
    name_alone(out_dir, prefix, checkpoint_dir)     # data first, then the state files naming it
    return prefix, paths
