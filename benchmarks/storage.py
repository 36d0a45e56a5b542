#!/usr/bin/env python3
"""Training from a networked filesystem against the local disk, side by side in one run: local WAV files,
then over sshfs at each added round-trip latency the same corpus as WAV files (CSV), as .sdb (WAV
and Opus inside) and as one tar shard, each with 1 and 2 ranks.

    python -m benchmarks.storage            # as root: it makes network namespaces and a FUSE mount

The networked filesystem is real: sshd on the network-namespace host hostB serves the corpus folder,
sshfs mounts it here with its ssh client on hostA, so every read crosses the veth link, through
tests/helpers/delay_relay.py adding --rtts milliseconds of round trip (this kernel has no tc netem;
the round trip the relay adds is measured with 1-byte pings and printed). Every measurement starts
from a fresh mount (nothing cached), as a new job on a cluster would.

Per configuration:
  * input s/epoch: the input pipeline alone (read audio -> features -> batches, no model; the records
    are read before) over one epoch of each rank's batches, the ranks as concurrent processes; the
    slowest rank;
    "of train epoch": that against the training run's epoch (s/step x steps), which it runs ahead of;
  * s/step: a real training run (DeepSpeech.py, horovodrun for 2 ranks), measured as
    benchmarks/training.py measures it (step_loss event times, warm-up steps left out), and its
    ratio to local WAV files with as many ranks, run again at the start of each latency's block (the
    machine may be shared: a baseline minutes away from what it is compared with), the median over
    --repeats; 1st step s: launch to the first step (records, audio check, graph).
Writes <out_dir>/storage.txt, storage.json and storage.png. The machine may be shared: the load
average is printed and kept beside the numbers; ratios from one run are what to compare.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import training as benchmark_training
from benchmarks.common import ROOT, fmt, table

FORMATS = {'wav': 'train.csv', 'sdb-wav': 'train-wav.sdb', 'sdb-opus': 'train-opus.sdb', 'tar': 'train.tar'}
CONVERT = {'sdb-wav': ['--audio_type', 'wav'], 'sdb-opus': ['--audio_type', 'opus'], 'tar': []}
COLUMNS = [('configuration', 'label', '{}'), ('RTT ms', 'measured_rtt_ms', '{:.2f}'),
           ('input s/epoch', 'input_s_per_epoch', '{:.2f}'), ('of train epoch', 'input_share', '{:.0%}'),
           ('timed steps', 'timed_steps', '{:.0f}'),
           ('s/step', 'median_step_s', '{:.3f}'), ('vs local', 'ratio', '{:.2f}x'),
           ('1st step s', 'time_to_first_step_s', '{:.1f}')]


def convert_corpus(corpus_dir, formats):
    """The corpus's train.csv as each of `formats` beside it (bin/data_set_tool.py; kept for the next run)."""
    for name in formats:
        target = os.path.join(corpus_dir, FORMATS[name])
        if name in CONVERT and not os.path.exists(target):
            subprocess.run([sys.executable, os.path.join(ROOT, 'bin', 'data_set_tool.py')] + CONVERT[name] +
                           [os.path.join(corpus_dir, 'train.csv'), target], check=True, stdout=subprocess.DEVNULL)


def input_pass(source, size, rank, batch_size):
    """Seconds this rank's input pipeline takes over one epoch of its batches of `source`, and the batches."""
    import tensorflow.compat.v1 as tfv1
    from benchmarks.pipeline import fetch_all, trainer_settings
    from deepspeech_training import distributed
    from deepspeech_training.data.batching import train_batches
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.flags import create_flags
    from deepspeech_training.data.plans import InputSet
    from deepspeech_training.iterators import build_input
    from deepspeech_training.session import create_session
    tfv1.disable_eager_execution()
    create_flags()
    settings = trainer_settings({'b': batch_size})
    records = read_sources([source], settings.model.alphabet)

    def plan(epoch):
        return train_batches(len(records), batch_size, size, rank, epoch, settings.training.random_seed, False)
    batch, (input_set,) = build_input([InputSet('train', records, plan, batch_size)], settings.model)
    with create_session(distributed.Single()) as session:
        _, seconds = fetch_all(session, input_set, batch)
    return seconds, len(plan(0))


def timed_input(source, size, batch_size, timeout):
    """input_pass() of every rank, as concurrent processes; the slowest rank's seconds."""
    processes = [subprocess.Popen([sys.executable, '-m', 'benchmarks.storage', '--input_pass', source, '--size', str(size),
                                   '--rank', str(rank), '--batch_size', str(batch_size)], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
                 for rank in range(size)]
    seconds = []
    for process in processes:
        output, errors = process.communicate(timeout=timeout)
        if process.returncode:
            raise RuntimeError('input pass of {} failed:\n{}'.format(source, errors[-3000:]))
        seconds.append(json.loads(output.splitlines()[-1])['seconds'])
    return max(seconds)


def measure(index, repeat, name, source, size, args, records, mount):
    """One configuration: its input pass and its training run, each on a fresh `mount()` (a context
    manager: the corpus folder, mounted or local)."""
    with mount() as folder:
        input_s = timed_input(os.path.join(folder, source), size, args.batch_size, args.timeout)
    config = dict(np=str(size), h=str(args.n_hidden), b=str(args.batch_size))
    with mount() as folder:
        result = benchmark_training.run_config(index, repeat, config, os.path.join(folder, source), records, args)
    result.update(label='{} np={}'.format(name, size), np=size, input_s_per_epoch=input_s)
    if result.get('median_step_s') and result.get('steps'):
        # what reading costs against what training the same epoch takes: the pipeline runs ahead of the
        # steps (tf.data prefetch), so a share well under 100 % is hidden behind them on a free core
        result['input_share'] = input_s / (result['median_step_s'] * result['steps'])
    print('    input {:.2f} s/epoch'.format(input_s), flush=True)
    return result


def plot(results, path, title):
    """s/step of each configuration relative to local WAV files with as many ranks."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    figure, ax = plt.subplots(figsize=(3 + 0.45 * len(results), 4.5))
    ratios = [r.get('ratio') or 0.0 for r in results]
    ax.bar(range(len(results)), ratios, color=['tab:green' if r['np'] == 1 else 'tab:blue' for r in results])
    ax.axhline(1.1, color='tab:red', linestyle='--', linewidth=1, label='local + 10 %')
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([r['label'] for r in results], rotation=70, ha='right', fontsize=7)
    ax.set_ylabel('s/step / local WAV s/step (same ranks)')
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def target_summary(results, rtt):
    """The issue's target: .sdb or tar at the largest RTT and 2 ranks within 10 % of local s/step."""
    at = [r for r in results if r.get('rtt_ms') == rtt and r['np'] == max(x['np'] for x in results)
          and r.get('ratio')]
    contained = [r for r in at if r['format'] != 'wav']
    if not contained:
        return 'target: not measured (no .sdb / tar configuration at {} ms)'.format(rtt)
    best = min(contained, key=lambda r: r['ratio'])
    wav = [r for r in at if r['format'] == 'wav']
    return 'target (.sdb or tar at {} ms, np={}, within 10 % of local): {}: best {} {:.2f}x{}'.format(
        rtt, best['np'], 'met' if best['ratio'] <= 1.1 else 'NOT met', best['label'], best['ratio'],
        '; networked WAV files {:.2f}x'.format(wav[0]['ratio']) if wav else '')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--rtts', default='0,0.5,2', help='round-trip latencies to add, ms, comma-separated')
    parser.add_argument('--np', default='1,2', help='rank counts, comma-separated')
    parser.add_argument('--formats', default=','.join(FORMATS), help='networked formats: ' + ', '.join(FORMATS))
    parser.add_argument('--n_hidden', type=int, default=512)
    parser.add_argument('--batch_size', type=int, default=8, help='per rank')
    parser.add_argument('--utterances', type=int, default=300, help='corpus size (about 80%% go to train.csv)')
    parser.add_argument('--corpus_dir', default=os.path.join(tempfile.gettempdir(), 'deepspeech_storage_corpus'))
    parser.add_argument('--out_dir', default='benchmark_storage_results')
    parser.add_argument('--warmup_steps', type=int, default=2, help='first steps left out of the step times')
    parser.add_argument('--repeats', type=int, default=1, help='runs of every configuration (round robin); the '
                        'table gives medians, "vs local" the median of the ratios of each repeat')
    parser.add_argument('--timeout', type=float, default=900, help='seconds before a run is killed')
    parser.add_argument('--input_pass', help=argparse.SUPPRESS)     # internal: one rank's input pass
    parser.add_argument('--size', type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument('--rank', type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.input_pass:
        seconds, batches = input_pass(args.input_pass, args.size, args.rank, args.batch_size)
        print(json.dumps(dict(seconds=seconds, batches=batches)))
        return 0
    from tests.helpers import netns_sshfs
    formats = [f.strip() for f in args.formats.split(',') if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        parser.error('unknown format(s) {}: choose from {}'.format(', '.join(unknown), ', '.join(FORMATS)))
    reason = netns_sshfs.unavailable()
    if reason:
        sys.exit('error: a networked filesystem (sshfs between network namespaces): ' + reason)
    rtts = [float(r) for r in args.rtts.split(',') if r.strip()]
    sizes = [int(n) for n in args.np.split(',') if n.strip()]
    args.epochs = 1     # what benchmark_training.run_config reads besides
    args.out_dir = os.path.abspath(args.out_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    started, load_before = time.time(), os.getloadavg()
    train_csv = benchmark_training.make_corpus(args.corpus_dir, args.utterances)
    corpus_dir = os.path.dirname(os.path.abspath(train_csv))
    convert_corpus(corpus_dir, formats)
    records = benchmark_training.corpus_records(train_csv)
    sizes_mb = {f: os.path.getsize(os.path.join(corpus_dir, FORMATS[f])) / 1e6 for f in formats if f != 'wav'}
    sizes_mb['wav'] = sum(r[1] for r in records) / 1e6
    print('corpus: {} train utterances; MB: {}'.format(len(records), ', '.join(
        '{} {:.1f}'.format(f, mb) for f, mb in sizes_mb.items())), flush=True)
    mountpoint = os.path.join(args.out_dir, 'mnt')
    # each latency's block starts with its own local baseline, and the blocks run round robin --repeats
    # times: a ratio compares runs minutes apart, so a change in the load of the (shared) machine shows
    # less in it
    configs = [(rtt, name, size) for rtt in rtts for name in ['local'] + formats for size in sizes]
    runs, measured = [[] for _ in configs], {}
    with netns_sshfs.ssh_server(os.path.join(args.out_dir, 'sshd')) as server:
        for repeat in range(args.repeats):
            for index, (rtt, name, size) in enumerate(configs):
                if rtt not in measured:
                    measured[rtt] = server.added_rtt_ms(rtt)
                    print('{} ms added: a round trip hostA -> hostB takes {:.3f} ms through the relay, {:.3f} ms '
                          'through one adding nothing'.format(rtt, *measured[rtt]), flush=True)
                if name == 'local':
                    run = measure(index, repeat, 'local wav', FORMATS['wav'], size, args, records,
                                  lambda: _local(corpus_dir))
                    run.update(label='local wav np={} (for {} ms)'.format(size, rtt), format='wav', rtt_ms=None)
                else:
                    run = measure(index, repeat, 'sshfs {} ms {}'.format(rtt, name), FORMATS[name], size, args,
                                  records, lambda: server.mount(corpus_dir, mountpoint, rtt))
                    run.update(format=name, rtt_ms=rtt, measured_rtt_ms=measured[rtt][0])
                runs[index].append(run)
                base = runs[configs.index((rtt, 'local', size))][repeat].get('median_step_s')
                if run.get('median_step_s') and base:
                    run['ratio'] = run['median_step_s'] / base
    results = []
    for config_runs in runs:
        result = benchmark_training.median_of_runs(config_runs)
        for key in ('ratio', 'input_s_per_epoch', 'input_share'):
            values = [run[key] for run in config_runs if run.get(key) is not None]
            result[key] = statistics.median(values) if values else None
            result['repeats_' + key] = values
        results.append(result)
    load_after = os.getloadavg()
    text = table(results, COLUMNS)
    summary = target_summary(results, max(rtts)) if rtts else ''
    report = dict(machine=dict(cpus=os.cpu_count(), load_average_before=load_before, load_average_after=load_after),
                  corpus=dict(dir=corpus_dir, train_utterances=len(records), mb=sizes_mb),
                  added_rtt_ms={str(k): dict(through_relay=v[0], through_zero_relay=v[1]) for k, v in measured.items()},
                  settings=dict(n_hidden=args.n_hidden, batch_size=args.batch_size, rtts=rtts, np=sizes,
                                formats=formats, warmup_steps=args.warmup_steps, repeats=args.repeats),
                  command=[os.path.relpath(os.path.abspath(__file__), ROOT)] + (argv or sys.argv[1:]),
                  results=results, target=summary, total_s=time.time() - started)
    with open(os.path.join(args.out_dir, 'storage.json'), 'w') as out:
        json.dump(report, out, indent=2)
    footer = ('n_hidden {}, batch {} per rank, {} train utterances, {} cores; load average {} before, {} after; '
              '{:.0f} s in all'.format(args.n_hidden, args.batch_size, len(records), os.cpu_count(),
                                       fmt(list(load_before)), fmt(list(load_after)), report['total_s']))
    with open(os.path.join(args.out_dir, 'storage.txt'), 'w') as out:
        out.write('\n'.join([text, '', summary, footer]) + '\n')
    plot(results, os.path.join(args.out_dir, 'storage.png'), 'training from sshfs vs local disk, n_hidden {}'.format(
        args.n_hidden))
    print()
    print(text)
    print()
    print(summary)
    print(footer)
    return 0 if all(r.get('exit_code') == 0 for r in results) else 1


class _local:
    """The corpus folder itself, as a context manager like a mount."""

    def __init__(self, folder):
        self.folder = folder

    def __enter__(self):
        return self.folder

    def __exit__(self, *_):
        return False


if __name__ == '__main__':
    sys.exit(main())
