#!/usr/bin/env python3
"""Training throughput of several configurations in one run, each as a real DeepSpeech.py process.

    python -m benchmarks.training --configs "h=512,b=8,lstm=fused,np=1;h=512,b=8,lstm=scan,np=1"

Generates (or reuses) a corpus of --utterances synthetic utterances (benchmarks/make_speech_corpus.py), then
runs `DeepSpeech.py --train_files <corpus>/train.csv` once per configuration (np > 1: under
`horovodrun -np N -H localhost:N ... --horovod`), in a fresh checkpoint/summary directory. A
configuration is comma-separated key=value pairs (benchmarks/common.py): h (--n_hidden), b
(--train_batch_size, per rank), lstm (--lstm_impl), amp (--automatic_mixed_precision=true/false), np (ranks),
name (its label); a key in upper case is set in the environment of the run (e.g. HOROVOD_CYCLE_TIME=5); any
other key is passed on as --key=value (e.g. epochs=2).

Nothing is timed inside the trainer beyond what it already records:
  * step times: the wall times of the step_loss TensorBoard events (summary_dir/train), one per step;
    a step's time is the gap to the previous event; the first --warmup_steps steps of the run and the
    first step of every later epoch (which includes checkpointing) are left out;
  * samples and audio seconds per step: from the trainer's own batch plan (data/batching.py) over the
    length-sorted records, so throughput = samples (audio seconds) of the timed steps / their time;
  * time to first step: launch of the process (horovodrun included) to the first step_loss event;
  * peak RSS per rank: /usr/bin/time -v around each rank;
  * audio bytes read per rank: strace (--seccomp-bpf, so only the traced calls stop) of openat/read
    calls, summing what read() returned on descriptors of .wav files; header reads at start-up count.
    strace slows the training steps (one process at n_hidden 512: 0.21 instead of 0.12 s/step), so
    the reads come from one more run per configuration after the timed ones, itself not timed;
    --no_trace leaves it out. Beside it, "bound MB": (corpus / N + one batch of the largest files) x
    epochs, the most a rank should read.
  * the ceilings: the machine's matmul rates in float32 and bfloat16 (GFLOP/s of a large square
    tf.matmul, all cores, median; the bfloat16 one matters with amp=true), and per configuration the analytic training FLOPs (about 3 x 2 x the multiply-adds of the six
    layers over the padded frames of each batch) divided by the step times.
Each configuration runs --repeats times, round robin (the machine may be shared); the table gives the
median of each measure over the repeats, and the ratio of each configuration's samples/s to the
first one's. Prints the table, writes <out_dir>/benchmark.txt, benchmark.json (every repeat too) and
benchmark.png (throughput per configuration). Default settings: about 3 minutes on 2 cores.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import wave

from benchmarks.common import (ALPHABET, ROOT, deepspeech_command, environment, flags, fmt, folder, label,
                               localhost_launch, parsed_configs, table)

DEFAULT_CONFIGS = 'h=512,b=8,lstm=fused,np=1;h=512,b=8,lstm=scan,np=1;h=512,b=8,lstm=scan,np=2'
SEED = 4568                    # DeepSpeech.py's --random_seed default: the batch plan depends on it
WINDOW, STEP = 512, 320        # audio samples per feature window / step at 16 kHz (32 ms, 20 ms)
N_FEATURES = 19 * 26           # layer_1 input: 19 context frames x 26 MFCCs
RANK_WRAPPER = '''#!/bin/sh
# One rank under /usr/bin/time -v (peak RSS) and, if TRACE=1, strace (audio reads), files per rank.
rank="${HOROVOD_RANK:-${OMPI_COMM_WORLD_RANK:-0}}"
if [ "$TRACE" = 1 ]; then
    exec strace -f -qq --seccomp-bpf -y -s 0 -e trace=openat,read,pread64,readv,preadv \\
        -o "$RUN_DIR/strace.rank$rank" /usr/bin/time -v -o "$RUN_DIR/time.rank$rank" "$@"
fi
exec /usr/bin/time -v -o "$RUN_DIR/time.rank$rank" "$@"
'''


def make_corpus(corpus_dir, utterances):
    """benchmarks/make_speech_corpus.py (it reuses the wavs already there); returns train.csv."""
    subprocess.run([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', corpus_dir,
                    '--count', str(utterances)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(corpus_dir, 'train.csv')


def wav_samples(path):
    with wave.open(path, 'rb') as wav:
        return wav.getnframes(), wav.getframerate()


def corpus_records(train_csv):
    """The train records in the trainer's order (sorted by size) with their sample counts."""
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    records = read_sources([train_csv], load_alphabet(ALPHABET))
    return [(r.audio_path, r.filesize) + wav_samples(r.audio_path) for r in records]


def flops_per_frame(n_hidden, n_classes=29):
    """Training FLOPs per (padded) frame: 2 per multiply-add, x3 for forward + the two backward matmuls."""
    h = n_hidden
    macs = N_FEATURES * h + 3 * h * h + 8 * h * h + h * n_classes   # layers 1; 2, 3, 5; LSTM (x and h); 6
    return 3 * 2 * macs


def frame_count(n_samples):
    """MFCC frames of `n_samples` audio samples (as data/audio.py's frame_count)."""
    return 1 + (n_samples - WINDOW) // STEP if n_samples >= WINDOW else 0


def padding_waste(records, batch_size):
    """Padded frames / real frames of one epoch's batches: the trainer's length-sorted batches (in
    shuffled order, which does not change the waste) against batches of randomly drawn samples."""
    from deepspeech_training.data.batching import train_batches
    frames = [frame_count(r[2]) for r in records]

    def waste(batches):
        real = sum(frames[i] for b in batches for i in b)
        return sum(len(b) * max(frames[i] for i in b) for b in batches) / real - 1.0

    order = list(range(len(records)))
    random.Random(SEED).shuffle(order)
    return dict(batch_size=batch_size,
                length_sorted=waste(train_batches(len(records), batch_size, 1, 0, 0, SEED, True)),
                random=waste([order[i:i + batch_size] for i in range(0, len(order), batch_size)]))


def read_bound(records, size, batch, epochs):
    """The most audio one of `size` ranks should read: per epoch, its 1/N share of the corpus plus one
    batch of the largest files (rank r takes the r-th sub-batch of each length-sorted global batch, so
    the later ranks get slightly longer samples; summed over an epoch that is less than one batch)."""
    sizes = sorted(r[1] for r in records)
    return epochs * (sum(sizes) / size + sum(sizes[-batch:]))


def step_plan(records, config, epochs):
    """Per global step (all ranks): (samples, audio seconds, analytic FLOPs), epoch after epoch."""
    from deepspeech_training.data.batching import train_batches
    size, batch = int(config['np']), int(config.get('b', 1))
    per_frame = flops_per_frame(int(config.get('h', 2048)))
    steps = []
    for epoch in range(epochs):
        plans = [train_batches(len(records), batch, size, rank, epoch, SEED, False) for rank in range(size)]
        for batches in zip(*plans):
            samples = seconds = flops = 0
            for indices in batches:
                frames = [frame_count(records[i][2]) for i in indices]
                samples += len(indices)
                seconds += sum(records[i][2] / records[i][3] for i in indices)
                flops += per_frame * len(indices) * max(frames)
            steps.append((samples, seconds, flops))
    return steps


def step_wall_times(summary_dir):
    """{global step: wall time} of the step_loss events the chief wrote."""
    import tensorflow as tf
    from tensorflow.core.util.event_pb2 import Event
    times = {}
    for path in glob.glob(os.path.join(summary_dir, 'train', 'events.out.tfevents.*')):
        for record in tf.data.TFRecordDataset(path):
            event = Event.FromString(record.numpy())
            if any(value.tag == 'step_loss' for value in event.summary.value):
                times[event.step] = event.wall_time
    return times


def peak_rss_mb(path):
    try:
        with open(path) as report:
            match = re.search(r'Maximum resident set size \(kbytes\): (\d+)', report.read())
        return int(match.group(1)) / 1024.0 if match else None
    except OSError:
        return None


READ_CALL = re.compile(r'^(\d+)\s+(?:read|pread64|readv|preadv)\(\d+<([^>]*)>.*\)\s+=\s+(\d+)')
OPEN_CALL = re.compile(r'^(\d+)\s+openat\(.*"([^"]+\.wav)".*\)\s+=\s+\d+')
UNFINISHED = re.compile(r'^(\d+)\s+(.*) <unfinished \.\.\.>$')
RESUMED = re.compile(r'^(\d+)\s+<\.\.\. \w+ resumed>(.*)$')


def audio_reads(trace_path):
    """(bytes read from .wav files, .wav opens) in one rank's strace output; None if not traced."""
    if not os.path.exists(trace_path):
        return None, None
    pending, total, opens = {}, 0, 0
    with open(trace_path, errors='replace') as trace:
        for line in trace:
            line = line.rstrip('\n')
            unfinished = UNFINISHED.match(line)
            if unfinished:
                pending[unfinished.group(1)] = unfinished.group(2)
                continue
            resumed = RESUMED.match(line)
            if resumed:
                line = '{} {}{}'.format(resumed.group(1), pending.pop(resumed.group(1), ''), resumed.group(2))
            read = READ_CALL.match(line)
            if read and read.group(2).endswith('.wav'):
                total += int(read.group(3))
            elif OPEN_CALL.match(line):
                opens += 1
    return total, opens


def training_command(config, train_csv, run_dir, epochs, launch=localhost_launch):
    run_flags = ['--train_files', train_csv, '--epochs', str(epochs), '--alphabet_config_path', ALPHABET,
                 '--checkpoint_dir', os.path.join(run_dir, 'checkpoints'), '--summary_dir',
                 os.path.join(run_dir, 'summaries'), '--load_train', 'init', '--noshow_progressbar',
                 '--checkpoint_secs', '1000000', '--max_to_keep', '1']
    return deepspeech_command(run_flags + flags(config), int(config['np']), launch,
                              wrapper=[os.path.join(run_dir, 'rank.sh')])


def run_config(index, repeat, config, train_csv, records, args, launch=localhost_launch, trace=False):
    """Run one configuration once (np > 1: as launch(np, command) starts it); returns its measurements
    (a dict for the JSON). repeat: the repeat's number (None for the untimed run under strace, trace=True)."""
    run_dir = os.path.join(args.out_dir, 'runs', '{}-{}'.format(index, folder(config)),
                           'reads' if trace else 'repeat{}'.format(repeat))
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, 'rank.sh'), 'w') as script:
        script.write(RANK_WRAPPER)
    os.chmod(os.path.join(run_dir, 'rank.sh'), 0o755)
    epochs = int(config.get('epochs', args.epochs))
    command = training_command(config, train_csv, run_dir, epochs, launch)
    env = dict(os.environ, RUN_DIR=run_dir, TRACE='1' if trace else '0', PYTHONUNBUFFERED='1',
               TF_CPP_MIN_LOG_LEVEL='2')
    env.update(environment(config))
    print('[{}] {} ({})'.format(index, label(config), 'audio reads, under strace, not timed' if trace else
                                'repeat {}/{}'.format(repeat + 1, args.repeats)), flush=True)
    started = time.time()
    with open(os.path.join(run_dir, 'log.txt'), 'w') as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            exit_code = process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            exit_code = 'timeout'
    wall = time.time() - started
    with open(os.path.join(run_dir, 'log.txt'), errors='replace') as log:
        output = log.read()
    result = dict(label=label(config), config=config, command=command, run_dir=run_dir, exit_code=exit_code,
                  wall_s=wall)
    if exit_code != 0:
        print('    failed ({}): see {}\n{}'.format(exit_code, os.path.join(run_dir, 'log.txt'), output[-2000:]),
              flush=True)
        return result

    plan = step_plan(records, config, epochs)
    times = step_wall_times(os.path.join(run_dir, 'summaries'))
    steps = sorted(times)
    per_epoch = len(plan) // epochs
    # the n-th event of the run is plan step n; leave out the warm-up and each epoch's first step
    timed = [s for s in steps if s - steps[0] >= max(args.warmup_steps, 1) and (s - steps[0]) % per_epoch
             and s - 1 in times and s - steps[0] < len(plan)]
    durations = [times[s] - times[s - 1] for s in timed]
    plan_of = {s: plan[s - steps[0]] for s in timed}
    seconds = sum(durations)
    logged = [float(x) for x in re.findall(r'Finished training epoch \d+ .*?([\d.]+) s/step', output)]
    size = int(config['np'])
    rss = [peak_rss_mb(os.path.join(run_dir, 'time.rank{}'.format(r))) for r in range(size)]
    reads = [audio_reads(os.path.join(run_dir, 'strace.rank{}'.format(r))) for r in range(size)]
    result.update(
        steps=len(steps), timed_steps=len(timed),
        median_step_s=statistics.median(durations) if durations else None,
        samples_per_s=sum(plan_of[s][0] for s in timed) / seconds if seconds else None,
        audio_s_per_s=sum(plan_of[s][1] for s in timed) / seconds if seconds else None,
        gflop_per_step=sum(plan_of[s][2] for s in timed) / len(timed) / 1e9 if timed else None,
        gflops=sum(plan_of[s][2] for s in timed) / seconds / 1e9 if seconds else None,
        time_to_first_step_s=times[steps[0]] - started if steps else None,
        logged_s_per_step=logged,
        peak_rss_mb=rss,
        audio_bytes_read=[r[0] for r in reads],
        wav_opens=[r[1] for r in reads],
        corpus_audio_bytes=sum(r[1] for r in records),
        read_bound_bytes=read_bound(records, size, int(config.get('b', 1)), epochs),
        samples_per_epoch=sum(p[0] for p in plan[:per_epoch]))
    if trace:
        print('    audio MB read per rank: {}'.format(fmt([None if r[0] is None else r[0] / 1e6 for r in reads])),
              flush=True)
    else:
        print('    {:.3f} s/step (median of {}), {:.1f} samples/s, first step after {:.1f} s'.format(
            result['median_step_s'] or float('nan'), len(timed), result['samples_per_s'] or float('nan'),
            result['time_to_first_step_s'] or float('nan')), flush=True)
    return result


MEASURES = ['steps', 'timed_steps', 'median_step_s', 'samples_per_s', 'audio_s_per_s', 'gflop_per_step', 'gflops',
            'time_to_first_step_s', 'peak_rss_mb', 'audio_bytes_read', 'wav_opens', 'wall_s', 'logged_s_per_step']


def median_of_runs(runs):
    """One result per configuration: each measure's median over the repeats (per rank for lists);
    the repeats themselves are kept under 'repeats'."""
    result = {k: v for k, v in runs[0].items() if k not in MEASURES + ['run_dir']}
    result['repeats'] = [{k: run.get(k) for k in ['run_dir', 'exit_code'] + MEASURES} for run in runs]
    failed = [run['exit_code'] for run in runs if run['exit_code'] != 0]
    result['exit_code'] = failed[0] if failed else 0
    if failed:
        return result

    def median(values):
        if any(isinstance(v, list) for v in values):
            return [median(list(per_rank)) for per_rank in zip(*values)]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    for key in MEASURES:
        result[key] = median([run.get(key) for run in runs])
    return result


def matmul_gflops(size, dtype='float32', repeats=5):
    """Median GFLOP/s of a size x size tf.matmul in `dtype` (eager, every core), over `repeats` runs."""
    import tensorflow as tf
    a = tf.cast(tf.random.uniform([size, size]), dtype)
    b = tf.cast(tf.random.uniform([size, size]), dtype)
    tf.matmul(a, b).numpy()
    rates = []
    for _ in range(repeats):
        started = time.time()
        for _ in range(3):
            c = tf.matmul(a, b)
        c.numpy()
        rates.append(3 * 2 * size ** 3 / (time.time() - started) / 1e9)
    return statistics.median(rates)


COLUMNS = [('configuration', 'label', '{}'), ('timed steps', 'timed_steps', '{:.0f}'), ('s/step', 'median_step_s', '{:.3f}'),
           ('samples/s', 'samples_per_s', '{:.2f}'), ('audio s/s', 'audio_s_per_s', '{:.2f}'),
           ('ratio', 'ratio', '{:.2f}x'), ('1st step s', 'time_to_first_step_s', '{:.1f}'),
           ('RSS MB/rank', 'peak_rss_mb', '{:.0f}'), ('audio MB read/rank', 'audio_mb_read', '{:.2f}'),
           ('bound MB', 'read_bound_mb', '{:.2f}'),
           ('GFLOP/step', 'gflop_per_step', '{:.2f}'), ('GFLOP/s', 'gflops', '{:.1f}')]


def plot(results, path, title):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    labels = [r['label'].replace(',', '\n') for r in results]
    samples = [r.get('samples_per_s') or 0.0 for r in results]
    audio = [r.get('audio_s_per_s') or 0.0 for r in results]
    figure, axes = plt.subplots(1, 2, figsize=(4 + 2.2 * len(results), 4.5))
    for ax, values, name in zip(axes, (samples, audio), ('samples / s', 'audio seconds / s')):
        bars = ax.bar(range(len(values)), values, color='tab:blue')
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel(name)
        for bar, value in zip(bars, values):
            ax.annotate('{:.2f}'.format(value), (bar.get_x() + bar.get_width() / 2, value), ha='center',
                        va='bottom', fontsize=8)
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--configs', default=DEFAULT_CONFIGS, help='";"-separated configurations (see above)')
    parser.add_argument('--utterances', type=int, default=300, help='corpus size (about 80%% go to train.csv)')
    parser.add_argument('--corpus_dir', default=os.path.join(tempfile.gettempdir(), 'deepspeech_benchmark_corpus'))
    parser.add_argument('--out_dir', default='benchmark_results', help='runs, benchmark.json and benchmark.png')
    parser.add_argument('--epochs', type=int, default=1, help='epochs per configuration')
    parser.add_argument('--repeats', type=int, default=3, help='runs per configuration (round robin); the '
                        'table gives the median of each measure')
    parser.add_argument('--warmup_steps', type=int, default=2, help='first steps left out of the step times')
    parser.add_argument('--matmul_size', type=int, default=2048, help='side of the square matmul ceiling')
    parser.add_argument('--timeout', type=float, default=1800, help='seconds before a run is killed')
    parser.add_argument('--no_trace', action='store_true', help='do not strace the ranks (no audio bytes)')
    args = parser.parse_args(argv)
    configs = parsed_configs(parser, args.configs)
    if min(args.repeats, args.epochs, args.utterances) < 1:
        parser.error('--repeats, --epochs and --utterances must be at least 1')
    missing = [tool for tool in ['/usr/bin/time'] + ([] if args.no_trace else ['strace']) if not shutil.which(tool)]
    if missing:
        sys.exit('error: {} not found (apt-get install time strace, or give --no_trace for strace)'
                 .format(' and '.join(missing)))
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')   # this process only (children get 2): CUDA stub noise
    os.makedirs(args.out_dir, exist_ok=True)
    args.out_dir = os.path.abspath(args.out_dir)
    started = time.time()
    train_csv = make_corpus(args.corpus_dir, args.utterances)
    records = corpus_records(train_csv)
    print('corpus: {} train utterances, {:.1f} s of audio, in {}'.format(
        len(records), sum(r[2] / r[3] for r in records), args.corpus_dir), flush=True)
    ceilings = {dtype: matmul_gflops(args.matmul_size, dtype) for dtype in ('float32', 'bfloat16')}
    ceiling = ceilings['float32']
    print('matmul ceilings: {} ({}x{} tf.matmul, {} cores)'.format(
        ', '.join('{} {:.1f} GFLOP/s'.format(d, c) for d, c in ceilings.items()), args.matmul_size, args.matmul_size,
        os.cpu_count()), flush=True)
    # round robin, so that a change in the load of the (shared) machine hits every configuration alike
    runs = [[] for _ in configs]
    for repeat in range(args.repeats):
        for i, config in enumerate(configs):
            runs[i].append(run_config(i, repeat, config, train_csv, records, args))
    results = [median_of_runs(config_runs) for config_runs in runs]
    for i, config in enumerate([] if args.no_trace else configs):
        reads = run_config(i, None, config, train_csv, records, args, trace=True)
        results[i].update(audio_bytes_read=reads.get('audio_bytes_read'), wav_opens=reads.get('wav_opens'),
                          reads_run=dict(run_dir=reads['run_dir'], exit_code=reads['exit_code']))
        if results[i]['exit_code'] == 0:
            results[i]['exit_code'] = reads['exit_code']
    base = results[0].get('samples_per_s')
    for result in results:
        if result.get('samples_per_s') and base:
            result['ratio'] = result['samples_per_s'] / base
        if any(b is not None for b in result.get('audio_bytes_read') or []):
            result['audio_mb_read'] = [None if b is None else b / 1e6 for b in result['audio_bytes_read']]
            result['read_bound_mb'] = result['read_bound_bytes'] / 1e6
    waste = [padding_waste(records, b) for b in sorted({int(c.get('b', 1)) for c in configs})]
    report = dict(machine=dict(cpus=os.cpu_count(), matmul_gflops=ceiling, bfloat16_matmul_gflops=ceilings['bfloat16'],
                               matmul_size=args.matmul_size,
                               load_average=os.getloadavg()),
                  corpus=dict(dir=args.corpus_dir, train_utterances=len(records),
                              audio_seconds=sum(r[2] / r[3] for r in records),
                              audio_bytes=sum(r[1] for r in records)),
                  settings=dict(epochs=args.epochs, warmup_steps=args.warmup_steps, repeats=args.repeats,
                                trace=not args.no_trace),
                  results=results, padding_waste=waste, total_s=time.time() - started)
    with open(os.path.join(args.out_dir, 'benchmark.json'), 'w') as out:
        json.dump(report, out, indent=2)
    text = table(results, COLUMNS) + '\n\npadding waste (padded frames / real frames, one epoch):\n' + '\n'.join(
        '  batch {batch_size}: length-sorted batches {length_sorted:.1%} (in shuffled order too), random batches '
        '{random:.1%}'.format(**w) for w in waste)
    with open(os.path.join(args.out_dir, 'benchmark.txt'), 'w') as out:
        out.write(text + '\n')
    plot(results, os.path.join(args.out_dir, 'benchmark.png'),
         'training throughput, {} train utterances, {} cores'.format(len(records), os.cpu_count()))
    print()
    print(text)
    print()
    print('ceilings: matmul {}; analytic training FLOPs / step time: {}'.format(
        ', '.join('{} {:.1f} GFLOP/s'.format(d, c) for d, c in ceilings.items()),
        ', '.join('{} {} GFLOP/s ({:.0%} of float32, {:.0%} of bfloat16)'.format(
            r['label'], fmt(r.get('gflops'), '{:.1f}'), (r.get('gflops') or 0) / ceiling,
            (r.get('gflops') or 0) / ceilings['bfloat16']) for r in results)))
    print('corpus audio: {:.2f} MB in {} train files; results in {} ({:.0f} s in all)'.format(
        report['corpus']['audio_bytes'] / 1e6, len(records), args.out_dir, report['total_s']))
    return 0 if all(r.get('exit_code') == 0 for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
