#!/usr/bin/env python3
"""Is the input pipeline the bottleneck? Training step time with the real tf.data pipeline against the
same batches precomputed into memory, in one process, epochs alternating.

    python -m benchmarks.pipeline --configs "h=100,b=8;h=2048,b=8"

A configuration is comma-separated key=value pairs (benchmarks/common.py): h (--n_hidden), b
(--train_batch_size), name (its label); any other key is passed on as --key=value (e.g. lstm_impl=fused; feature_cache=PATH: the real pipeline reads the
features from the trainer's --feature_cache, filled by the first pass over the set). For each one the
trainer's own graph pieces are built once: iterators.build_input with two sets behind its one
reinitialisable iterator, the real pipeline (feeding.create_dataset: read audio, MFCCs, padded batch,
context windows) and the same batches held in memory (fetched once from the real pipeline, fed back by a
from_generator dataset), then the trainer's step (train_graph.build_train_graph). Every epoch runs
through step_runner.run_set, the trainer's loop, over --samples utterances of the benchmark corpus (spread
over all lengths, sorted by length as the trainer does); epochs alternate real/cached in ABBA order
(--pairs pairs) after one warm-up epoch, so a change in the load of the (shared) machine hits both alike.

A step's time is the gap between two batches; the first step of an epoch (it includes starting the
iterator and filling the pipeline) is left out of the medians and shown as "1st step". Printed per
configuration: the real pipeline and the cached batches alone (s/batch with no training), median
s/step of each source, their ratio (real / cached: 1.05 means the pipeline costs 5 %) with the
spread of the per-pair ratios, and the ratio of whole epochs. Writes <out_dir>/pipeline.txt and pipeline.json (every epoch's step times).
"""
import argparse
import json
import os
import statistics
import sys
import time

from benchmarks.common import ALPHABET, flags, label, parsed_configs, table
from benchmarks.training import make_corpus

DEFAULT_CONFIGS = 'h=100,b=8;h=2048,b=8'


class CachedBatches:
    """The real pipeline's batches, fetched once, then fed again from memory through the same iterator."""

    def __init__(self):
        self.batches, self.element_spec = [], None

    def real(self, *args, **kwargs):
        from deepspeech_training.data.feeding import create_dataset
        dataset, epoch, first_batch = create_dataset(*args, **kwargs)
        self.element_spec = dataset.element_spec
        return dataset, epoch, first_batch

    def cached(self, *_, **__):
        import tensorflow as tf
        import tensorflow.compat.v1 as tfv1
        epoch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='cached_epoch')
        first_batch = tfv1.placeholder_with_default(tf.constant(0, tf.int64), [], name='cached_first_batch')
        dataset = tf.data.Dataset.from_generator(lambda: iter(self.batches), output_signature=self.element_spec)
        return dataset.prefetch(tf.data.AUTOTUNE), epoch, first_batch


def spread_records(records, count):
    """`count` records spread evenly over the length-sorted `records` (still sorted)."""
    if count >= len(records):
        return records
    return [records[i * len(records) // count] for i in range(count)]


def trainer_settings(config):
    """The trainer's Settings of one configuration (its keys as flags, the rest at their defaults)."""
    from deepspeech_training.config import settings_from_args
    return settings_from_args(['--alphabet_config_path', ALPHABET, '--noshow_progressbar'] + flags(config))


def build_graph(settings, records, cache):
    """The trainer's run graph (train_graph.build_training_run) on two sets behind one input, `records` through
    the real pipeline (and the trainer's feature cache) and `cache`'s batches: (the TrainGraph, the real and
    the cached SetIterator, the batch)."""
    import dataclasses
    from deepspeech_training import distributed
    from deepspeech_training.data.plans import train_set
    from deepspeech_training.train_graph import build_training_run

    single = distributed.Single()
    real = dataclasses.replace(train_set(records, single, settings.model, settings.training), name='real',
                               make_dataset=cache.real)
    cached = dataclasses.replace(real, name='cached', feature_cache=None, make_dataset=cache.cached)
    run = build_training_run([real, cached], settings, single)
    return (run.step, *run.iterators, run.batch)


def fetch_all(session, iterator, batch):
    """Every batch of one epoch of `iterator`'s set (no training), and the seconds it took."""
    session.run(iterator.initializer, {iterator.epoch: 0})
    iterator.position = None    # what set_steps starts from next: unknown after this
    feed = iterator.select(session)
    started = time.perf_counter()
    values = [session.run(batch, feed) for _ in range(iterator.n_batches(0))]
    return values, time.perf_counter() - started


def timed_epoch(session, iterator, forward, fetches, feed):
    """One training epoch through step_runner.set_steps, the trainer's loop; the duration of each step, the
    first included."""
    from deepspeech_training.step_runner import set_steps
    times = [time.perf_counter()]
    for _ in set_steps(session, iterator, forward, 0, fetches, feed):
        times.append(time.perf_counter())
    return [b - a for a, b in zip(times, times[1:])]


def measure(config, records, pairs):
    """Pipeline alone, then warm-up, then `pairs` ABBA pairs of real and cached epochs."""
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training import distributed
    from deepspeech_training.session import create_session

    cache = CachedBatches()
    step, real, cached, batch = build_graph(trainer_settings(config), records, cache)
    fetches = step.fetches()
    with create_session(distributed.Single()) as session:
        session.run(tfv1.global_variables_initializer())
        cache.batches, _ = fetch_all(session, real, batch)           # cold: fills the page cache too
        _, pipeline_s = fetch_all(session, real, batch)
        _, cached_alone_s = fetch_all(session, cached, batch)
        timed_epoch(session, cached, step.forward, fetches, step.feed)         # warm-up, not counted
        epochs = {'real': [], 'cached': []}
        for pair in range(pairs):
            order = (real, cached) if pair % 2 == 0 else (cached, real)
            for input_set in order:
                epochs[input_set.name].append(timed_epoch(session, input_set, step.forward, fetches, step.feed))
    return summarise(config, len(cache.batches), pipeline_s, cached_alone_s, epochs)


def summarise(config, n_batches, pipeline_s, cached_alone_s, epochs):
    def steady(epoch):
        return epoch[1:] or epoch

    result = dict(label=label(config), config=config, steps_per_epoch=n_batches,
                  pipeline_s_per_batch=pipeline_s / n_batches, cached_alone_s_per_batch=cached_alone_s / n_batches,
                  epochs=epochs)
    for name, runs in epochs.items():
        result[name + '_s_per_step'] = statistics.median(s for epoch in runs for s in steady(epoch))
        result[name + '_first_step_s'] = statistics.median(epoch[0] for epoch in runs)
        result[name + '_epoch_s'] = statistics.median(sum(epoch) for epoch in runs)
    pair_ratios = [statistics.median(steady(r)) / statistics.median(steady(c))
                   for r, c in zip(epochs['real'], epochs['cached'])]
    result.update(ratio=result['real_s_per_step'] / result['cached_s_per_step'], pair_ratios=pair_ratios,
                  epoch_ratio=result['real_epoch_s'] / result['cached_epoch_s'])
    return result


COLUMNS = [('configuration', 'label', '{}'), ('steps', 'steps_per_epoch', '{:d}'),
           ('pipeline alone s/batch', 'pipeline_s_per_batch', '{:.4f}'),
           ('cached alone s/batch', 'cached_alone_s_per_batch', '{:.4f}'),
           ('real s/step', 'real_s_per_step', '{:.4f}'), ('cached s/step', 'cached_s_per_step', '{:.4f}'),
           ('ratio', 'ratio', '{:.3f}'), ('pair ratios', 'pair_ratios', '{:.3f}'),
           ('real 1st step s', 'real_first_step_s', '{:.3f}'), ('cached 1st step s', 'cached_first_step_s', '{:.3f}'),
           ('epoch ratio', 'epoch_ratio', '{:.3f}')]


def main(argv=None):
    import tempfile
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--configs', default=DEFAULT_CONFIGS, help='";"-separated configurations (see above)')
    parser.add_argument('--utterances', type=int, default=300, help='corpus size (about 80%% go to train.csv)')
    parser.add_argument('--corpus_dir', default=os.path.join(tempfile.gettempdir(), 'deepspeech_benchmark_corpus'))
    parser.add_argument('--samples', type=int, default=96, help='train utterances per epoch, spread over all lengths')
    parser.add_argument('--pairs', type=int, default=5, help='pairs of (real, cached) epochs per configuration')
    parser.add_argument('--out_dir', default='benchmark_results', help='pipeline.txt and pipeline.json')
    args = parser.parse_args(argv)
    configs = parsed_configs(parser, args.configs)
    if min(args.samples, args.pairs) < 1:
        parser.error('--samples and --pairs must be at least 1')
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    import tensorflow as tf
    import tensorflow.compat.v1 as tfv1
    from deepspeech_training.util import logging
    from deepspeech_training.flags import create_flags
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    tfv1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')
    create_flags()
    logging.configure(show_progressbar=False)
    started = time.time()
    train_csv = make_corpus(args.corpus_dir, args.utterances)
    records = spread_records(read_sources([train_csv], load_alphabet(ALPHABET)),
                             args.samples)
    print('{} of the corpus\'s train utterances, {} cores'.format(len(records), os.cpu_count()), flush=True)
    results = []
    for config in configs:
        del config['np']    # one process
        results.append(measure(config, records, args.pairs))
        print('{}: real {:.4f} s/step, cached {:.4f} s/step, ratio {:.3f}'.format(
            results[-1]['label'], results[-1]['real_s_per_step'], results[-1]['cached_s_per_step'],
            results[-1]['ratio']), flush=True)
    text = table(results, COLUMNS)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, 'pipeline.txt'), 'w') as out:
        out.write(text + '\n')
    with open(os.path.join(args.out_dir, 'pipeline.json'), 'w') as out:
        json.dump(dict(cpus=os.cpu_count(), load_average=os.getloadavg(), samples=len(records), pairs=args.pairs,
                       results=results, total_s=time.time() - started), out, indent=2)
    print()
    print(text)
    print('\nratio = real / cached median s/step (1.05: the pipeline costs 5 %); {:.0f} s in all'.format(
        time.time() - started))
    return 0


if __name__ == '__main__':
    sys.exit(main())
