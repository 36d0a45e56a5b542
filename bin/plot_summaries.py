#!/usr/bin/env python
"""Draw a run's TensorBoard summaries as one PNG: train and dev loss per epoch, and the effective
learning rate per step (a panel of its own only when the rate changed; a constant rate is named in the loss
panel's title), for a look at a run before reading its logs.

    python bin/plot_summaries.py --summary_dir my/summaries --output run.png"""
import argparse
import glob
import math
import os
import sys
from collections import defaultdict

import matplotlib
matplotlib.use('Agg')   # no screen needed
import matplotlib.pyplot as plt  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.entry import quiet_tensorflow  # noqa: E402
quiet_tensorflow('2')
from matplotlib import ticker  # noqa: E402
import tensorflow.compat.v1 as tfv1  # noqa: E402


def read_scalars(event_dir):
    """{tag: [(step, value), ...]} of every events file under `event_dir`, in step order."""
    scalars = defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(event_dir, 'events.out.tfevents.*'))):
        for event in tfv1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars[value.tag][event.step] = value.simple_value   # a resumed run's later value wins
    return {tag: sorted(points.items()) for tag, points in scalars.items()}


def log_ticks(low, high, least=4, most=8):
    """Round values between `low` and `high` for a log axis: under a decade (a short run's loss) linear
    steps, which a log axis that narrow draws almost evenly; else per decade 1, or 1-2-5, or 1-2-3-5, the
    first giving `least` ticks (every other one past `most`)."""
    if high < 10 * low:
        return [t for t in ticker.MaxNLocator(nbins=most - 2).tick_values(low, high) if low <= t <= high]
    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    for subs in ((1,), (1, 2, 5), (1, 2, 3, 5)):
        ticks = [s * 10.0 ** d for d in decades for s in subs if low <= s * 10.0 ** d <= high]
        if len(ticks) >= least:
            break
    return ticks[::math.ceil(len(ticks) / most)]


def plot(summary_dir, output):
    """Write the PNG; returns the figure (its axes: the losses, then the learning rate if it changed)."""
    train, dev = read_scalars(os.path.join(summary_dir, 'train')), read_scalars(os.path.join(summary_dir, 'dev'))
    if 'loss' not in train:
        raise SystemExit('no training summaries under {}/train (is it a --summary_dir?)'.format(summary_dir))
    rate = train.get('learning_rate', [])
    rate_changed = len({value for _, value in rate}) > 1
    if rate_changed:
        figure, (losses, rates) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    else:
        figure, losses = plt.subplots(1, 1, figsize=(8, 4.5))
    for name, scalars in (('train', train), ('dev', dev)):
        if 'loss' in scalars:
            steps, values = zip(*scalars['loss'])
            losses.plot(steps, values, marker='o', label='{} loss (per epoch)'.format(name))
    losses.set_ylabel('CTC loss')
    losses.set_yscale('log')
    # matplotlib's own log ticks label a range under a decade or two with a couple of minor ticks in
    # scientific notation: plain numbers at round values instead.
    losses.yaxis.set_major_locator(ticker.FixedLocator(log_ticks(*losses.get_ylim())))
    losses.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: '{:g}'.format(value)))
    losses.yaxis.set_minor_formatter(ticker.NullFormatter())
    losses.legend()
    losses.grid(True, alpha=0.3)
    if rate_changed:
        steps, values = zip(*rate)
        rates.plot(steps, values, color='tab:green')
        rates.set_ylabel('effective learning rate')
        rates.grid(True, alpha=0.3)
    elif rate:
        losses.set_title('effective learning rate {:g} throughout'.format(rate[0][1]), fontsize='medium')
    (rates if rate_changed else losses).set_xlabel('global step')
    figure.suptitle(os.path.abspath(summary_dir))
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    print('wrote {}'.format(output))
    return figure


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--summary_dir', required=True, help='the --summary_dir of a training run')
    parser.add_argument('--output', default='training.png', help='PNG file to write')
    args = parser.parse_args()
    tfv1.get_logger().setLevel('ERROR')   # summary_iterator's deprecation notice
    plot(args.summary_dir, args.output)


if __name__ == '__main__':
    main()
