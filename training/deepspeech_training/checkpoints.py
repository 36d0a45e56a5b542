"""Loading and saving checkpoints in DeepSpeech 0.9's layout.

`train-<step>` (the last `max_to_keep`, state file `checkpoint`) and `best_dev-<step>` (state file
`best_dev_checkpoint`). TensorFlow's Saver writes the data files before it atomically replaces the
state file, so a crash (even SIGKILL) leaves the previous checkpoint loadable. The best dev loss is
kept beside the best_dev checkpoint (`best_dev_loss.json`, tied to its step) so a resumed run never
replaces a better best_dev with a worse one; it is written after the best_dev data files and before
the state file, so a crash between the two leaves a record naming a complete, newer checkpoint, which
the next run adopts. Only the chief reads or writes; other ranks receive the variables
by broadcast, so they need no access to the checkpoint directory. Files damaged from outside (a copy cut
short): a checkpoint that cannot be read is named and skipped for the next intact one, never for fresh
weights; an unreadable state file is rebuilt from the checkpoints present; an unknown best_dev loss is
evaluated again (doc/TRAINING.rst, "Damaged files"). Release checkpoints trained with
cuDNN (DeepSpeech 0.9, Coqui STT) lack the LSTM's Adam moments: `load_cudnn` starts those at zero.
"""
import json
import math
import os
import shutil
from contextlib import contextmanager

import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from google.protobuf import text_format
from tensorflow.python.lib.io import file_io   # the atomic write TensorFlow's own Saver uses for .meta
from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState

from .checkpoint_names import (BEST_DEV, BEST_LOSS_FILE, BEST_STATE, EMA_FOLDER, EPOCH_LOSS, EPOCH_POSITION,
                               FLAGS_FILE, GLOBAL_STEP, LEARNING_RATE, TRAIN, TRAIN_STATE)
from .model import LAYER_NORM_SCOPE, LAYERS_FROM_OUTPUT, LSTM_SCOPE
from .session import create_session
from .util.atomic import atomic_write
from .util.logging import log_info, log_warn

# Trained with cuDNN, a checkpoint holds the LSTM's Adam moments as these flat vectors, not per variable.
CUDNN_OPAQUE_ADAM = ('cudnn_lstm/opaque_kernel/Adam', 'cudnn_lstm/opaque_kernel/Adam_1')
# DeepSpeech 0.9's log lines, word for word, of a checkpoint that loads and of one that is not there.
LOAD_MESSAGES = {'best': ('Loading best validating checkpoint from', 'Could not find best validating checkpoint.'),
                 'last': ('Loading most recent checkpoint from', 'Could not find most recent checkpoint.'),
                 'ema': ('Loading the weight average (--ema_decay) from',
                         'Could not find a weight average (--ema_decay) checkpoint.')}
# Graph collection of the global variables train and best_dev checkpoints leave out: --ema_decay's averages,
# saved apart (ema.py).
SAVED_APART = 'saved_apart'
CUDNN_MISSING = {'{}/{}/{}'.format(LSTM_SCOPE, variable, slot) for variable in ('kernel', 'bias')
                 for slot in ('Adam', 'Adam_1')}


class CheckpointError(RuntimeError):
    pass


def saved_variables():
    """The global variables a train or best_dev checkpoint holds: all but those SAVED_APART."""
    apart = {variable.op.name for variable in tfv1.get_collection(SAVED_APART)}
    return [variable for variable in tfv1.global_variables() if variable.op.name not in apart]


def step_of(path):
    """The global step in a checkpoint name (`best_dev-120` -> 120), -1 if none."""
    try:
        return int(os.path.basename(path).rsplit('-', 1)[1])
    except (AttributeError, IndexError, TypeError, ValueError):
        return -1


def read_state(directory, state_file):
    """The names a state file lists, newest first; [] without one; None when it cannot be read
    (tf.train.get_checkpoint_state would return None for garbage, as for no file: silence)."""
    path = os.path.join(directory, state_file)
    if not tf.io.gfile.exists(path):
        return []
    state = CheckpointState()
    try:
        text_format.Merge(file_io.read_file_to_string(path), state)
    except (text_format.ParseError, UnicodeDecodeError, tf.errors.OpError):
        return None
    if not state.model_checkpoint_path:
        return None
    older = [name for name in reversed(state.all_model_checkpoint_paths) if name != state.model_checkpoint_path]
    return [state.model_checkpoint_path] + older


def present(directory, kind):
    """The checkpoints of `kind` ('train' or 'best_dev') whose .index is in `directory`, newest step first:
    what an unreadable state file is rebuilt from, and what checkpoint averaging reads."""
    prefixes = [index[:-len('.index')] for index in tf.io.gfile.glob(os.path.join(directory, kind + '-*.index'))]
    return sorted((p for p in prefixes if step_of(p) >= 0), key=step_of, reverse=True)


def _located(directory, name):
    """The prefix a state file's `name` stands for: relative to `directory`, or, for the absolute path
    of the machine it was trained on (a downloaded release checkpoint), its namesake in `directory`."""
    path = os.path.join(directory, name)
    moved = os.path.join(directory, os.path.basename(path))
    if not tf.io.gfile.exists(path + '.index') and tf.io.gfile.exists(moved + '.index'):
        return moved
    return path


def _damage(path):
    """Which file of checkpoint `path` is damaged and how, in one phrase, or None when every tensor
    reads: TensorFlow's restore error names neither (`Read less bytes than requested`)."""
    index = path + '.index'
    if not tf.io.gfile.exists(index):
        return '{} is missing'.format(index)
    try:
        reader = tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as error:
        return '{} cannot be read ({})'.format(index, op_error_cause(str(error)))
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, IndexError, ValueError) as error:    # IndexError: a data file cut short
        data = tf.io.gfile.glob(path + '.data-*')
        what = '{} is damaged or incomplete'.format(' / '.join(data)) if data else 'its data file is missing'
        return '{} ({})'.format(what, op_error_cause(str(error)))
    return None


def check_writable(directory, what):
    """Fail at start, not at the first save hours later, when `directory` cannot take files."""
    try:
        os.makedirs(directory, exist_ok=True)
        probe = os.path.join(directory, '.write_test')
        with open(probe, 'w') as out:
            out.write('ok')
        os.remove(probe)
    except OSError as error:
        raise CheckpointError('cannot write {} to {}: {} (choose another directory or free some space)'
                              .format(what, directory, error.strerror)) from None


def checkpoint_bytes():
    """Bytes one checkpoint of the current graph's saved variables takes on disk (data files)."""
    return sum(v.shape.num_elements() * v.dtype.base_dtype.size for v in saved_variables())


def check_space(directory, needed, what):
    """Fail at start when `directory` cannot hold `needed` bytes (a new train and best_dev checkpoint
    are written before the old ones are removed)."""
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise CheckpointError('{} has {:.1f} MB free, but saving {} needs about {:.1f} MB (a train and a best_dev '
                              'checkpoint); free some space or choose another --checkpoint_dir'
                              .format(directory, free / 1e6, what, needed / 1e6))


def op_error_cause(message):
    """The line of a TensorFlow op error that says what failed (it precedes the `[[{{node ...}}]]`
    line; the rest is the graph's Python traceback)."""
    lines = [line.strip() for line in message.splitlines()]
    for before, line in zip(lines, lines[1:]):
        if line.startswith('[[{{node'):
            return before
    return lines[0]


def remove_partial(prefix):
    """Remove what a failed save of `prefix` left behind (its data files and the Saver's temp dir)."""
    for leftover in tf.io.gfile.glob(prefix + '.*') + tf.io.gfile.glob(prefix + '_temp*'):
        if tf.io.gfile.isdir(leftover):
            tf.io.gfile.rmtree(leftover)
        else:
            tf.io.gfile.remove(leftover)


def _dropped(variable, drop_source_layers):
    scopes = LAYERS_FROM_OUTPUT[:drop_source_layers]
    return any(variable.op.name == s or variable.op.name.startswith(s + '/') for s in scopes)


def restore(session, path, drop_source_layers=0, keep=(), load_cudnn=False):
    """Restore every saved variable from `path` but those in `keep` (except the dropped layers,
    which are initialised). A variable the checkpoint lacks is an error, never a silent
    re-initialisation, but for `learning_rate` (as DeepSpeech 0.9: older checkpoints have none), our
    `epoch_position` and `epoch_loss` (DeepSpeech's checkpoints have none) and, with `load_cudnn`, the LSTM's Adam
    moments. Variables the graph lacks are ignored, but for --layer_norm's: without them the model would
    compute something else than it was trained to."""
    variables = [v for v in saved_variables() if v.op.name not in keep]
    in_checkpoint = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    in_graph = {v.op.name for v in saved_variables()}
    unused_norms = sorted(name for name in in_checkpoint if _is_layer_norm(name) and name not in in_graph)
    if unused_norms:
        raise CheckpointError('checkpoint {} was trained with --layer_norm (it holds {}): add --layer_norm'.format(
            path, ', '.join(unused_norms[:4]) + (', ...' if len(unused_norms) > 4 else '')))
    dropped = [v for v in variables if _dropped(v, drop_source_layers)]
    kept = [v for v in variables if not _dropped(v, drop_source_layers)]
    absent = [v for v in kept if v.op.name not in in_checkpoint]
    allowed = {LEARNING_RATE, EPOCH_POSITION, EPOCH_LOSS} | (CUDNN_MISSING if load_cudnn else set())
    missing = [v.op.name for v in absent if v.op.name not in allowed]
    if missing:
        raise _missing_error(path, missing, in_checkpoint)
    to_load = [v for v in kept if v.op.name in in_checkpoint]
    wrong_shape = ['{} {} vs {}'.format(v.op.name, in_checkpoint[v.op.name], v.shape.as_list())
                   for v in to_load if in_checkpoint[v.op.name] != v.shape.as_list()]
    if wrong_shape:
        raise CheckpointError('checkpoint {} has other shapes (checkpoint vs model): {}; check --n_hidden and '
                              'the alphabet'.format(path, '; '.join(wrong_shape)))
    tfv1.train.Saver(to_load).restore(session, path)
    _initialise(session, dropped, 'dropped')
    _initialise(session, absent, 'missing')


def _is_layer_norm(name):
    """A --layer_norm variable itself, not one of its optimizer slots (an evaluation graph has none)."""
    return name.split('/')[-2:] in ([LAYER_NORM_SCOPE, 'beta'], [LAYER_NORM_SCOPE, 'gamma'])


def _trained_with_cudnn(in_checkpoint):
    """The layout of the DeepSpeech 0.9 and Coqui STT release checkpoints: the LSTM's canonical weights,
    but Adam moments only for cuDNN's flat opaque kernel."""
    return (LSTM_SCOPE + '/kernel' in in_checkpoint and not CUDNN_MISSING & set(in_checkpoint)
            and any(name in in_checkpoint for name in CUDNN_OPAQUE_ADAM))


def _missing_error(path, missing, in_checkpoint):
    if CUDNN_MISSING & set(missing) and _trained_with_cudnn(in_checkpoint):
        hint = ('it was trained with cuDNN, like the DeepSpeech 0.9 and Coqui STT release checkpoints (the LSTM\'s '
                'Adam moments are only in cudnn_lstm/opaque_kernel/Adam): add --load_cudnn to start the LSTM\'s '
                'Adam moments at zero')
    elif any(_is_layer_norm(name) for name in missing):
        hint = 'it was trained without --layer_norm: leave that flag out to load it'
    else:
        hint = ('was it made with another --n_hidden, alphabet or model version? (--drop_source_layers '
                're-initialises the last layers for transfer learning)')
    return CheckpointError('checkpoint {} lacks variable(s) {}; {}'.format(path, ', '.join(missing), hint))


def _initialise(session, variables, why):
    if variables:
        session.run(tfv1.variables_initializer(variables))
        log_info('Initialised {} {} variable(s): {}'.format(len(variables), why,
                                                           ', '.join(v.op.name for v in variables)))


def name_alone(directory, path, flags_dir):
    """Make both state files of `directory` name checkpoint `path` alone (its data files written before),
    so --load_evaluate best, last and auto all load it, and copy `flags_dir`'s flags.txt beside it."""
    for state_file in (BEST_STATE, TRAIN_STATE):
        point_state_at(directory, path, state_file)
    flags = os.path.join(flags_dir, FLAGS_FILE)
    if os.path.isfile(flags):
        with open(flags, 'rb') as source, atomic_write(os.path.join(directory, FLAGS_FILE), 'wb') as out:
            shutil.copyfileobj(source, out)


def point_state_at(directory, path, state_file):
    """Atomically make `state_file` of `directory` name checkpoint `path` alone, relative to the folder (see
    the Savers), so the folder can be moved."""
    name = os.path.basename(path)
    tfv1.train.update_checkpoint_state(directory, name, [name], latest_filename=state_file)


def save_or_stop(save, description, save_dir, remove_partial_files):
    """Run `save()`; when it fails (a full disk, a lost mount) call `remove_partial_files()` and stop training:
    the state files still name the previous, complete checkpoints."""
    try:
        return save()
    except (tf.errors.OpError, OSError) as error:
        remove_partial_files()
        reason = op_error_cause(error.message) if isinstance(error, tf.errors.OpError) else error.strerror
        raise CheckpointError('could not save {} to {}: {}. Training stopped; the previous checkpoints are '
                              'intact: free some space and rerun the same command to resume from them'.format(
                                  description, save_dir, reason)) from None


def remove_superseded(previous, path):
    """Remove checkpoint `previous`'s files once `path`, which replaces it, is written and named."""
    if previous and os.path.basename(previous) != os.path.basename(path):
        for old in tf.io.gfile.glob(previous + '.*'):
            tf.io.gfile.remove(old)


class Checkpointer:
    """Savers and the load policies; everything is a no-op or plain init on non-chief ranks (asked of
    `dist` each time: after an elastic reset the chief may be another process)."""

    def __init__(self, load_dir, save_dir, max_to_keep, dist):
        self.load_dir, self.save_dir, self.dist = load_dir, save_dir, dist
        # State files name checkpoints relative to their folder, so a checkpoint folder that is copied or
        # moved (to a cluster, into a release tarball) still names its own files.
        saved = saved_variables()
        self.train_saver = tfv1.train.Saver(saved, max_to_keep=max_to_keep, save_relative_paths=True)
        self.best_saver = tfv1.train.Saver(saved, max_to_keep=1, save_relative_paths=True)
        # Local variables hold Horovod's gradient accumulators; they are never saved.
        self.initializer = tf.group(tfv1.global_variables_initializer(), tfv1.local_variables_initializer())
        self.meta_graphs = {}   # saver -> (graph version, serialised MetaGraphDef)
        self.unreadable_states = set()  # state files already warned about

    @classmethod
    def from_settings(cls, checkpoints, dist):
        """The Checkpointer of `checkpoints` (CheckpointSettings), for the variables of the default graph."""
        return cls(checkpoints.load_dir, checkpoints.save_dir, checkpoints.max_to_keep, dist)

    def _save(self, saver, session, prefix, step, **kwargs):
        """saver.save(), with the `.meta` file written from a MetaGraphDef serialised once per graph
        version: exporting it anew took ~55 ms of a ~68 ms save of a small model (measured with
        cProfile), for the same graph every time. Written after the state file, as the Saver does."""
        path = saver.save(session, prefix, global_step=step, write_meta_graph=False, **kwargs)
        version, meta_graph = self.meta_graphs.get(saver, (None, None))
        if version != session.graph.version:
            with session.graph.as_default():
                meta_graph = saver.export_meta_graph().SerializeToString()
            self.meta_graphs[saver] = (session.graph.version, meta_graph)
        file_io.atomic_write_string_to_file(path + '.meta', meta_graph)
        return path

    @property
    def is_chief(self):
        return self.dist.is_chief

    def _candidates(self, directory, method):
        """The checkpoints of kind 'last' (train-*) or 'best' (best_dev-*) to try: the one its state file
        names, then the older ones, newest first (the state lists only the saves of the run that wrote it,
        so an earlier run's are found among the files present); when the state file cannot be read, those
        present (with a warning, once). A newer file the state does not name (a crash before the state
        was written) is not taken."""
        state_file, kind = (TRAIN_STATE, TRAIN) if method == 'last' else (BEST_STATE, BEST_DEV)
        if method == 'ema':
            directory = os.path.join(directory, EMA_FOLDER)
        names = read_state(directory, state_file)
        if names is None:
            path = os.path.join(directory, state_file)
            if path not in self.unreadable_states:
                self.unreadable_states.add(path)
                log_warn('{} cannot be read (damaged?): using the {}-* checkpoints present instead, newest step '
                         'first; the next save rewrites it'.format(path, kind))
            return present(directory, kind)
        listed = [_located(directory, name) for name in names]
        if not listed:
            return []
        names = {os.path.basename(path) for path in listed}
        older = [path for path in present(directory, kind)
                 if os.path.basename(path) not in names and step_of(path) < step_of(listed[0])]
        return listed[:1] + sorted(listed[1:] + older, key=step_of, reverse=True)

    def _newest(self, directory, method):
        """The newest checkpoint of kind `method` in `directory`, or None."""
        return next(iter(self._candidates(directory, method)), None)

    def _load_first(self, session, methods, drop_source_layers=0, load_cudnn=False, announce=True):
        """Load (or initialise) by the first of `methods` that applies, saying so in DeepSpeech 0.9's
        words (LOAD_MESSAGES) unless not `announce`: users' scripts grep its log for them. A checkpoint
        that cannot be read is named and skipped for the next one; fresh weights ('init') never take the
        place of damaged checkpoints."""
        if not self.is_chief:
            session.run(self.initializer)
            return 'broadcast from rank 0'
        skipped = []
        for method in methods:
            if method == 'init':
                if skipped:
                    break
                log_info('Initializing all variables.')
                session.run(self.initializer)
                return 'init'
            paths = self._candidates(self.load_dir, method)
            loading, missing = LOAD_MESSAGES[method]
            if announce and not paths:
                log_info(missing)
            for path in paths:
                if announce or skipped:
                    log_info('{} {}'.format(loading, path))
                if self._restore_intact(session, path, drop_source_layers, load_cudnn):
                    if skipped:
                        log_warn('loaded {} instead of the damaged {}'.format(path, ', '.join(skipped)))
                    return path
                skipped.append(path)
        if skipped:
            raise CheckpointError('no intact checkpoint to load in {}: {} cannot be read. Put back a good copy of '
                                  'one of them (or point --load_checkpoint_dir at a folder holding one), or give '
                                  '--load_train init to train anew from fresh weights'
                                  .format(self.load_dir, ', '.join(skipped)))
        raise CheckpointError('no {} checkpoint in {} (use --load_train init to start from scratch, or set '
                              '--load_checkpoint_dir)'.format(' or '.join(methods), self.load_dir))

    def _restore_intact(self, session, path, drop_source_layers=0, load_cudnn=False):
        """Restore `path` over freshly initialised variables (so nothing of an earlier, failed attempt
        remains); False, after one line naming the damaged file, when it cannot be read."""
        session.run(self.initializer)
        try:
            restore(session, path, drop_source_layers, load_cudnn=load_cudnn)
            return True
        except tf.errors.OpError as error:
            damage = _damage(path)
            if damage is None:      # the files read: something else failed, say what
                raise CheckpointError('could not restore checkpoint {}: {}'.format(
                    path, op_error_cause(error.message))) from None
            log_warn('cannot load checkpoint {}: {}; skipping it'.format(path, damage))
            return False

    def load_for_training(self, session, method, drop_source_layers=0, load_cudnn=False):
        methods = {'auto': ['last', 'best', 'init']}.get(method, [method])
        return self._load_first(session, methods, drop_source_layers, load_cudnn)

    def load_for_evaluation(self, session, method, average_first=False, announce=True):
        """Load the checkpoint `method` picks ('auto': the weight average first if `average_first`, a run
        with --ema_decay delivering it, then best_dev, then the last); log which unless not `announce` (it was
        said already)."""
        methods = {'auto': ['ema'] * average_first + ['best', 'last']}.get(method, [method])
        return self._load_first(session, methods, announce=announce)

    def reload_best(self, session):
        """Back to the best_dev weights and optimizer state; global_step goes on counting."""
        if not self.is_chief:
            return
        path = self._newest(self.save_dir, 'best')
        try:
            restore(session, path, keep=(GLOBAL_STEP,))
        except tf.errors.OpError as error:
            raise CheckpointError('cannot reload best_dev {} on a plateau: {}. Put back a good copy of it, or remove '
                                  'its files and {} (the next validation then saves a new best_dev), and rerun the '
                                  'same command'.format(path, _damage(path) or op_error_cause(error.message),
                                                        BEST_LOSS_FILE)) from None

    def _save_or_stop(self, kind, step, save):
        name = '{}-{}'.format(kind, step)

        def remove_partial_files():
            if self._recorded_best().get('checkpoint') != name:   # a recorded best_dev is complete: kept
                remove_partial(os.path.join(self.save_dir, name))
        return save_or_stop(save, 'the {} checkpoint of step {}'.format(kind, step), self.save_dir,
                            remove_partial_files)

    def save_train(self, session, global_step):
        if not self.is_chief:
            return None
        os.makedirs(self.save_dir, exist_ok=True)
        step = session.run(global_step)
        return self._save_or_stop(TRAIN, step, lambda: self._save(
            self.train_saver, session, os.path.join(self.save_dir, TRAIN), step, latest_filename=TRAIN_STATE))

    def save_best(self, session, global_step, dev_loss):
        if not self.is_chief:
            return None
        os.makedirs(self.save_dir, exist_ok=True)
        previous = self._newest(self.save_dir, 'best')
        step = session.run(global_step)
        path = self._save_or_stop(BEST_DEV, step, lambda: self._write_best(session, step, dev_loss))
        remove_superseded(previous, path)
        return path

    def _write_best(self, session, step, dev_loss):
        # Data files, then the loss record, then the state file: each step is complete before the next.
        path = self._save(self.best_saver, session, os.path.join(self.save_dir, BEST_DEV), step, write_state=False)
        self._write_record(path, dev_loss)
        point_state_at(self.save_dir, path, BEST_STATE)
        return path

    def _write_record(self, path, dev_loss):
        """Atomically record `dev_loss` as the loss of best_dev checkpoint `path`."""
        with atomic_write(os.path.join(self.save_dir, BEST_LOSS_FILE)) as out:
            json.dump({'checkpoint': os.path.basename(path), 'dev_loss': dev_loss}, out)

    def _adopt_recorded_best(self, record):
        """A crash between the loss record and the state file: the record names a complete best_dev
        newer than the state's; point the state at it."""
        path = os.path.join(self.save_dir, record.get('checkpoint') or 'missing')
        if not tf.io.gfile.exists(path + '.index'):
            return None
        point_state_at(self.save_dir, path, BEST_STATE)
        log_warn('{} did not name the last best_dev checkpoint {}; it does now'.format(BEST_STATE, path))
        return path

    def _read_record(self):
        """best_dev_loss.json's {'checkpoint', 'dev_loss'}; {} without the file; None when it cannot be read."""
        try:
            with open(os.path.join(self.save_dir, BEST_LOSS_FILE), 'rb') as record_file:
                record = json.loads(record_file.read().decode('utf-8'))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):   # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return None
        well_formed = (isinstance(record, dict) and isinstance(record.get('checkpoint'), str)
                       and isinstance(record.get('dev_loss'), (int, float)))
        return record if well_formed else None

    def _recorded_best(self):
        return self._read_record() or {}

    def best_dev_loss(self):
        """The dev loss of the saved best_dev checkpoint, inf when there is none, None when it is not known
        (best_dev_loss.json unreadable or naming another checkpoint): the trainer then evaluates it
        before the first validation compares against it, so a worse model never replaces it."""
        record = self._read_record()
        if record is None:
            log_warn('{} cannot be read (damaged?): the loss of best_dev is not known'.format(
                os.path.join(self.save_dir, BEST_LOSS_FILE)))
            record = {}
        path = self._newest(self.save_dir, 'best')
        if record and (path is None or step_of(record.get('checkpoint')) > step_of(path)):
            path = self._adopt_recorded_best(record) or path
        if path is None:
            return math.inf
        if not tf.io.gfile.exists(path + '.index'):     # its loss would guard a checkpoint that is not there
            log_warn('{} names {}, whose {}.index is missing: the next validation replaces it'.format(
                os.path.join(self.save_dir, BEST_STATE), path, os.path.basename(path)))
            return math.inf
        if record.get('checkpoint') != os.path.basename(path):
            log_warn('the dev loss of {} is not recorded: it will be evaluated on the dev set before the first '
                     'validation compares against it'.format(path))
            return None
        return float(record['dev_loss'])

    @contextmanager
    def best_dev_weights(self, session):
        """On the chief, best_dev's variables for the time of the block (yields whether it could be
        restored), then the variables as they were; elsewhere nothing (yields False). The caller
        broadcasts. The values are kept in memory once: one more copy of the variables, one time."""
        if not self.is_chief:
            yield False
            return
        variables = saved_variables()
        values = session.run(variables)
        path = self._newest(self.save_dir, 'best')
        try:
            restore(session, path)
            restored = True
        except tf.errors.OpError:
            log_warn('cannot load best_dev checkpoint {}: {}; the next validation replaces it'.format(
                path, _damage(path) or 'restore failed'))
            restored = False
        try:
            yield restored
        finally:
            session.run([v.initializer for v in variables],
                        {v.initializer.inputs[1]: value for v, value in zip(variables, values)})

    def record_best_loss(self, dev_loss):
        """Record `dev_loss` (just evaluated) as the current best_dev's, so the next run knows it."""
        if self.is_chief:
            path = self._newest(self.save_dir, 'best')
            self._write_record(path, dev_loss)
            log_info('Recorded the dev loss {:.6f} of {} in {}'.format(dev_loss, path, BEST_LOSS_FILE))


@contextmanager
def open_checkpoint(settings, dist, announce=True):
    """A session (for the default graph, built whole) holding the checkpoint --load_evaluate picks, on
    every rank: the chief loads it (named in the log unless not `announce`), the others receive it."""
    checkpointer = Checkpointer.from_settings(settings.checkpoints, dist)
    broadcast = dist.broadcast_op()
    with create_session(dist, settings.session) as session:
        checkpointer.load_for_evaluation(session, settings.checkpoints.load_evaluate,
                                         average_first=bool(settings.training.ema_decay), announce=announce)
        session.run(broadcast)
        yield session
