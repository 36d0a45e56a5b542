"""The training step is built in one place (train_graph.py): the pipeline benchmark and the step profiler
time the trainer's own step; and the settings are the only source of a run after the command line."""
import ast
import collections
import os
from types import SimpleNamespace

import tensorflow.compat.v1 as tfv1

from benchmarks import pipeline as benchmark_pipeline, profile_training_step
from deepspeech_training.distributed import Single
from deepspeech_training.trainer import Trainer
from tests.helpers.suite import ROOT, SMOKE_CSV, settings_from_args

tfv1.disable_eager_execution()
PACKAGE = os.path.join(ROOT, 'training', 'deepspeech_training')
FLAG_READERS = {'config.py', 'flags.py'}
N_HIDDEN = 16


def step_graph(train_op, batch):
    """What running `train_op` computes from the `batch` tensors on: (the count of each op type, the
    global variables with their shapes)."""
    inputs = {tensor.op for tensor in batch}
    seen, todo = set(), [train_op]
    while todo:
        op = todo.pop()
        if op not in seen and op not in inputs:
            seen.add(op)
            todo += [tensor.op for tensor in op.inputs] + list(op.control_inputs)
    variables = sorted((v.op.name, tuple(v.shape.as_list())) for v in tfv1.global_variables())
    return collections.Counter(op.type for op in seen), variables


def trainer_step(tmp_path):
    settings, (train_records, _, _, _) = settings_from_args(
        '--train_files', SMOKE_CSV, '--n_hidden', N_HIDDEN, '--lstm_impl', 'scan', '--checkpoint_dir', tmp_path)
    trainer = Trainer(Single(), settings, train_records, {})
    batch = next(op for op in tfv1.get_default_graph().get_operations() if op.type == 'IteratorGetNext').outputs
    return settings, train_records, step_graph(trainer.step.train_op, batch)


def test_the_benchmark_and_the_profiler_run_the_trainers_step(tmp_path):
    settings, records, trainer = trainer_step(tmp_path)
    step, _, _, batch = benchmark_pipeline.build_graph(settings, records, benchmark_pipeline.CachedBatches())
    benchmark = step_graph(step.train_op, batch)
    step, batch = profile_training_step.build_step(SimpleNamespace(n_hidden=N_HIDDEN, batch=2, frames=20), None)
    profiler = step_graph(step.train_op, batch)
    assert trainer[0]['ApplyAdam'] + trainer[0]['ResourceApplyAdam'] > 0 and trainer[0]['CTCLoss'] == 1
    assert benchmark == trainer
    assert profiler == trainer


def flag_readers():
    """The package's modules that name FLAGS (a read, or an import of it)."""
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith('.py'):
                tree = ast.parse(open(path, encoding='utf-8').read(), path)
                if any(isinstance(node, ast.Name) and node.id == 'FLAGS' or
                       isinstance(node, ast.alias) and node.name == 'FLAGS' for node in ast.walk(tree)):
                    yield os.path.relpath(path, PACKAGE)


def test_only_the_command_line_and_the_settings_read_flags():
    assert set(flag_readers()) <= FLAG_READERS
    assert set(flag_readers()) == FLAG_READERS    # the check sees the readers there are
