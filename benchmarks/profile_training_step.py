#!/usr/bin/env python3
"""Where one training step's time goes, float32 against --automatic_mixed_precision, side by side.

    python -m benchmarks.profile_training_step --n_hidden 2048 --batch 8 --frames 180

Builds the trainer's step (train_graph.build_train_graph with the scan LSTM: model, CTC loss, Adam, its
dropout) on random features of one fixed shape, runs --warmup steps, times --repeats steps, then traces one step
(RunOptions FULL_TRACE) and sums each op's time by category: the matmuls outside loops (dense layers,
the LSTM's input projection, all weight gradients), the LSTM loop's per-step matmuls and element-wise gates (forward, and the hand-written backward loop), the
loop's own bookkeeping, CTC, Adam, the casts the bfloat16 rewrite adds, and the rest. A category's share
is of the summed op time (with two threads ops overlap, so the sums exceed the wall time); "bf16 ops"
is the share of that time in ops whose output is bfloat16. Each precision runs in its own process,
so the grappler rewrite of one cannot touch the other. This is what bounds the mixed-precision
speed-up in doc/PERFORMANCE.rst: what stays float32, and how much of the step is not matrix products.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import ROOT

CATEGORIES = ['matmul outside loops', 'LSTM loop matmul', 'LSTM loop element-wise',
              'LSTM loop bookkeeping', 'CTC', 'Adam', 'casts', 'other']
# control flow, slicing and gathering of the while loops: their cost is per time step, whatever the precision
LOOP_BOOKKEEPING = {'Enter', 'Exit', 'Merge', 'Switch', 'NextIteration', 'LoopCond', 'Less', 'Identity', 'Const',
                    'StridedSlice', 'Pack', 'Shape', 'Split', 'ConcatV2'}


def category(name, op):
    """One of CATEGORIES for a node (its full name and op type)."""
    in_loop = '/while/' in name
    if op == 'Cast':
        return 'casts'
    if 'ctc' in name.lower() or op.startswith('CTC'):
        return 'CTC'
    if 'ApplyAdam' in op or name.startswith('Adam') or '/Adam' in name:
        return 'Adam'
    if op in ('MatMul', '_MklMatMul', '_MklNativeMatMul', '_FusedMatMul', '_MklFusedMatMul',
              '_MklNativeFusedMatMul', 'BatchMatMulV2'):
        return 'LSTM loop matmul' if in_loop else 'matmul outside loops'
    if in_loop:
        return 'LSTM loop bookkeeping' if op in LOOP_BOOKKEEPING or op.startswith('TensorArray') else \
            'LSTM loop element-wise'
    return 'other'


def build_step(args, mode):
    """The trainer's run graph (train_graph.build_training_run, scan LSTM) reading random features of one fixed
    shape, fed as the pipeline benchmark feeds cached batches: the TrainingRun. The batches keep the trainer's
    shapes (size and lengths unknown), so no shape is folded into a constant and the step's ops are the
    trainer's."""
    import dataclasses
    import itertools
    import numpy as np
    import tensorflow as tf
    from benchmarks.pipeline import CachedBatches
    from deepspeech_training.config import settings_from_args
    from deepspeech_training.data.plans import InputSet
    from deepspeech_training.distributed import Single
    from deepspeech_training.train_graph import build_training_run
    settings = settings_from_args(['--alphabet_config_path', os.path.join(ROOT, 'data', 'alphabet.txt'),
                                   '--n_hidden', args.n_hidden, '--lstm_impl', 'scan', '--learning_rate', 1e-4,
                                   '--random_seed', 0])
    settings = dataclasses.replace(settings, session=dataclasses.replace(settings.session, mixed_precision=mode))
    rng = np.random.RandomState(0)
    values = (np.arange(args.batch), np.ones(args.batch, np.float32),
              rng.randn(args.batch, args.frames, 19, 26).astype(np.float32), np.full(args.batch, args.frames, np.int32),
              rng.randint(0, 28, size=(args.batch, args.frames // 4)).astype(np.int32),
              np.full(args.batch, args.frames // 4, np.int32))
    random = CachedBatches()
    random.batches = itertools.repeat(values)
    random.element_spec = tuple(tf.TensorSpec([None] * min(v.ndim, 2) + list(v.shape[2:]), tf.as_dtype(v.dtype))
                                for v in values)
    features = InputSet('random features', [], lambda epoch: [list(range(args.batch))], args.batch,
                        make_dataset=random.cached)
    return build_training_run([features], settings, Single())


def profile(mode, args):
    """{'step_s': [...], 'ops': {category: [us, bf16 us]}, 'top': [(us, op type, dtype)]} for one precision."""
    import tensorflow as tf
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training.session import session_config
    tfv1.disable_eager_execution()
    run = build_step(args, mode)
    step = run.step
    result = {'step_s': [], 'ops': collections.defaultdict(lambda: [0, 0]), 'top': collections.Counter()}
    with tfv1.Session(config=session_config(mixed_precision=mode)) as session:
        session.run([tfv1.global_variables_initializer(), run.iterators[0].initializer])
        for _ in range(args.warmup):
            session.run(step.train_op, step.feed)
        for _ in range(args.repeats):
            started = time.time()
            session.run(step.train_op, step.feed)
            result['step_s'].append(time.time() - started)
        metadata = tfv1.RunMetadata()
        session.run(step.train_op, step.feed, options=tfv1.RunOptions(trace_level=tfv1.RunOptions.FULL_TRACE),
                    run_metadata=metadata)
    for device in metadata.step_stats.dev_stats:
        for node in device.node_stats:
            # timeline_label: "name = Op(inputs)"; outputs carry their dtypes
            op = node.timeline_label.split(' = ')[1].split('(')[0] if ' = ' in node.timeline_label else node.node_name
            micros = node.all_end_rel_micros
            bf16 = any(output.tensor_description.dtype == tf.bfloat16.as_datatype_enum for output in node.output)
            entry = result['ops'][category(node.node_name, op)]
            entry[0] += micros
            entry[1] += micros if bf16 else 0
            result['top'][(op, 'bfloat16' if bf16 else 'other')] += micros
    result['ops'] = dict(result['ops'])
    result['top'] = [(us, op, dtype) for (op, dtype), us in result['top'].most_common(args.top)]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--n_hidden', type=int, default=2048)
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--frames', type=int, default=180, help='time steps (feature frames) per sample')
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--top', type=int, default=12, help='op types listed per precision')
    parser.add_argument('--child', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(profile(None if args.child == 'float32' else args.child, args)))
        return
    print('n_hidden {} batch {} frames {}, median of {} steps after {} warm-up, {} cores, load average {:.1f}'.format(
        args.n_hidden, args.batch, args.frames, args.repeats, args.warmup, os.cpu_count(), os.getloadavg()[0]))
    results = {}
    for mode in ('float32', 'bfloat16'):
        command = [sys.executable, '-m', 'benchmarks.profile_training_step', '--child', mode] + sys.argv[1:]
        output = subprocess.run(command, cwd=ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'), check=True,
                                stdout=subprocess.PIPE, universal_newlines=True).stdout
        results[mode] = json.loads(output.splitlines()[-1])
    steps = {mode: statistics.median(r['step_s']) for mode, r in results.items()}
    print('step: float32 {:.3f} s, bfloat16 {:.3f} s ({:.2f}x)'.format(
        steps['float32'], steps['bfloat16'], steps['float32'] / steps['bfloat16']))
    totals = {mode: sum(us for us, _ in r['ops'].values()) for mode, r in results.items()}
    print('\n{:24} {:>12} {:>7}   {:>12} {:>7} {:>9}   {:>7}'.format(
        'op time by category', 'float32 ms', 'share', 'bfloat16 ms', 'share', 'bf16 ops', 'speed-up'))
    for name in CATEGORIES:
        f32 = results['float32']['ops'].get(name, [0, 0])[0]
        b16, b16_bf16 = results['bfloat16']['ops'].get(name, [0, 0])
        if not f32 and not b16:
            continue
        print('{:24} {:12.1f} {:6.1f}%   {:12.1f} {:6.1f}% {:8.0f}%   {:>7}'.format(
            name, f32 / 1e3, 100 * f32 / totals['float32'], b16 / 1e3, 100 * b16 / totals['bfloat16'],
            100 * b16_bf16 / b16 if b16 else 0, '{:.2f}x'.format(f32 / b16) if f32 and b16 else '-'))
    print('{:24} {:12.1f} {:>7}   {:12.1f}'.format('all ops', totals['float32'] / 1e3, '', totals['bfloat16'] / 1e3))
    for mode, result in results.items():
        print('\n{} ops by type (ms, output dtype):'.format(mode))
        for us, op, dtype in result['top']:
            print('  {:10.1f}  {:28} {}'.format(us / 1e3, op, dtype))


if __name__ == '__main__':
    main()
