#!/usr/bin/env python3
"""Forward and forward+backward time of the LSTM layer alone, per --lstm_impl (doc/PERFORMANCE.rst).

    python -m benchmarks.lstm --time 150 --batch 4 --n_hidden 2048 --repeats 5

Each implementation runs in a fresh process (one graph, one session, the machine's default threads):
one warm-up run, then --repeats timed runs of the forward pass and of the forward pass with the
gradients w.r.t. the input, kernel and bias; the median is printed, with the ratio to the first
implementation. `autodiff` is a reference, not a --lstm_impl: the same loop (tf.scan of matmuls, input
projection hoisted) differentiated by TensorFlow instead of by hand.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import ROOT


def autodiff_lstm(x, seq_length, n_cell, initial_state=None):
    import tensorflow as tf
    from deepspeech_training.model import lstm_variables, zero_state
    n_input = int(x.shape[-1])
    kernel, bias = lstm_variables(n_input, n_cell)
    xw = tf.reshape(tf.matmul(tf.reshape(x, [-1, n_input]), kernel[:n_input]) + bias,
                    [tf.shape(x)[0], -1, 4 * n_cell])
    w_h = kernel[n_input:]

    def step(state, xw_t):
        c, h = state
        i, ci, f, o = tf.split(xw_t + tf.matmul(h, w_h), 4, axis=1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(ci)
        return c, tf.sigmoid(o) * tf.tanh(c)

    cs, h = tf.scan(step, xw, initial_state or zero_state(x, n_cell), swap_memory=False)
    return h, (cs[-1], h[-1])


def measure(impl, steps, batch, n_hidden, repeats):
    """{'forward': [seconds], 'forward_backward': [seconds]} for one implementation, in this process."""
    import numpy as np
    import tensorflow as tf
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training.model import lstm_function
    tfv1.disable_eager_execution()
    lstm = autodiff_lstm if impl == 'autodiff' else lstm_function(impl)
    x = tf.constant(np.random.RandomState(0).randn(steps, batch, n_hidden).astype(np.float32))
    outputs, (c, h) = lstm(x, tf.fill([batch], steps), n_hidden)
    loss = tf.reduce_sum(outputs * outputs) + tf.reduce_sum(c) + tf.reduce_sum(h)
    # fetch (sums of) the gradients themselves: ops behind a control dependency only may be pruned
    gradients = tf.add_n([tf.reduce_sum(g) for g in tf.gradients(loss, [x] + tfv1.trainable_variables())])
    times = {}
    with tfv1.Session() as session:
        session.run(tfv1.global_variables_initializer())
        for name, target in (('forward', loss), ('forward_backward', gradients)):
            session.run(target)
            times[name] = []
            for _ in range(repeats):
                started = time.time()
                session.run(target)
                times[name].append(time.time() - started)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--impls', default='fused,scan,autodiff', help='comma-separated: fused, scan, autodiff')
    parser.add_argument('--time', type=int, default=150, help='time steps')
    parser.add_argument('--batch', type=int, default=4)
    parser.add_argument('--n_hidden', type=int, default=2048, help='cells (and input width)')
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--child', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.time, args.batch, args.n_hidden, args.repeats)))
        return
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    print('T={} batch={} n_hidden={}, median of {} runs after a warm-up, {} cores, load average {:.1f}'.format(
        args.time, args.batch, args.n_hidden, args.repeats, os.cpu_count(), os.getloadavg()[0]))
    results = {}
    for impl in args.impls.split(','):
        output = subprocess.run([sys.executable, '-m', 'benchmarks.lstm', '--child', impl, '--time', str(args.time),
                                 '--batch', str(args.batch), '--n_hidden', str(args.n_hidden), '--repeats',
                                 str(args.repeats)], cwd=ROOT, env=env, check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
        results[impl] = {k: statistics.median(v) for k, v in json.loads(output.splitlines()[-1]).items()}
        base = results[next(iter(results))]
        print('{:9} forward {:8.3f} s ({:5.2f}x)   forward+backward {:8.3f} s ({:5.2f}x)   runs: {}'.format(
            impl, results[impl]['forward'], base['forward'] / results[impl]['forward'],
            results[impl]['forward_backward'], base['forward_backward'] / results[impl]['forward_backward'],
            ', '.join('{:.2f}'.format(t) for t in json.loads(output.splitlines()[-1])['forward_backward'])),
            flush=True)


if __name__ == '__main__':
    main()
