#!/usr/bin/env python
"""Draw a run's TensorBoard summaries as one PNG: train and dev loss per epoch, and the effective
learning rate per step, for a look at a run before reading its logs.

    python bin/plot_summaries.py --summary_dir my/summaries --output run.png"""
import argparse
import glob
import os
from collections import defaultdict

import matplotlib
matplotlib.use('Agg')   # no screen needed
import matplotlib.pyplot as plt  # noqa: E402
import tensorflow.compat.v1 as tfv1  # noqa: E402


def read_scalars(event_dir):
    """{tag: [(step, value), ...]} of every events file under `event_dir`, in step order."""
    scalars = defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(event_dir, 'events.out.tfevents.*'))):
        for event in tfv1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars[value.tag][event.step] = value.simple_value   # a resumed run's later value wins
    return {tag: sorted(points.items()) for tag, points in scalars.items()}


def plot(summary_dir, output):
    train, dev = read_scalars(os.path.join(summary_dir, 'train')), read_scalars(os.path.join(summary_dir, 'dev'))
    if 'loss' not in train:
        raise SystemExit('no training summaries under {}/train (is it a --summary_dir?)'.format(summary_dir))
    figure, (losses, rates) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for name, scalars in (('train', train), ('dev', dev)):
        if 'loss' in scalars:
            steps, values = zip(*scalars['loss'])
            losses.plot(steps, values, marker='o', label='{} loss (per epoch)'.format(name))
    losses.set_ylabel('CTC loss')
    losses.set_yscale('log')
    losses.legend()
    losses.grid(True, alpha=0.3)
    if 'learning_rate' in train:
        steps, values = zip(*train['learning_rate'])
        rates.plot(steps, values, color='tab:green')
    rates.set_ylabel('effective learning rate')
    rates.set_xlabel('global step')
    rates.grid(True, alpha=0.3)
    figure.suptitle(os.path.abspath(summary_dir))
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    print('wrote {}'.format(output))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--summary_dir', required=True, help='the --summary_dir of a training run')
    parser.add_argument('--output', default='training.png', help='PNG file to write')
    args = parser.parse_args()
    plot(args.summary_dir, args.output)


if __name__ == '__main__':
    main()
