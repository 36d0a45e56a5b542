#!/usr/bin/env python3
"""Model quality of several configurations over several seeds, side by side in one run.

    python bin/benchmark_quality.py --configs "float32=;amp=--automatic_mixed_precision" --seeds 3

Generates (or reuses) a corpus with bin/make_speech_corpus.py (test sentences are never train
sentences), then trains and tests every configuration once per seed with `DeepSpeech.py` (`--random_seed`
is the seed), round robin so a change in the machine's load hits every configuration alike. A
configuration is `label=flags`: the flags (space-separated, e.g. a `--flagfile`) go after --base_flags.
Reports per configuration the test WER and CER (mean and spread over the seeds: one seed tells little,
runs of one configuration differ by several points of WER), the last dev loss, training wall time and
steps; prints the table, writes <out_dir>/quality.txt, quality.json (every run) and quality.png (WER
against wall time, a point per seed). Default settings: a few minutes per run on 2 cores. With --resume,
runs already in --out_dir with the same command are reused, so `--seeds 6 --resume` adds seeds 4-6 to a
finished 3-seed benchmark. doc/QUALITY.rst has the recipes it measured.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE_FLAGS = '--n_hidden 256 --train_batch_size 16 --dev_batch_size 16 --test_batch_size 16 --epochs 30 --beam_width 1'
TEST_LINE = re.compile(r'Test on .* - WER: ([\d.]+), CER: ([\d.]+), loss: ([\d.]+)')
DEV_LINE = re.compile(r'Finished validating epoch (\d+) on .* - loss: ([\d.]+)')
STEP_LINE = re.compile(r'Finished training epoch (\d+) .* ([\d.]+) s/step')


def parse_configs(text):
    """'a=--x 1;b=' -> [('a', ['--x', '1']), ('b', [])]"""
    configs = []
    for item in filter(None, (part.strip() for part in text.split(';'))):
        label, _, flags = item.partition('=')
        configs.append((label.strip(), shlex.split(flags)))
    return configs


def make_corpus(corpus_dir, utterances):
    if not os.path.exists(os.path.join(corpus_dir, 'test.csv')):
        subprocess.run([sys.executable, os.path.join(ROOT, 'bin', 'make_speech_corpus.py'), '--out_dir', corpus_dir,
                        '--count', str(utterances)], check=True, stdout=subprocess.DEVNULL)
    return {name: os.path.join(corpus_dir, name + '.csv') for name in ('train', 'dev', 'test')}


def run_once(label, flags, seed, csvs, args):
    """Train and test one configuration with one seed; its measures (kept in the run's result.json, which a
    later run with --resume reuses, so more seeds can be added to a finished benchmark)."""
    run_dir = os.path.join(args.out_dir, 'runs', '{}-seed{}'.format(label, seed))
    result_path = os.path.join(run_dir, 'result.json')
    command = ([sys.executable, os.path.join(ROOT, 'DeepSpeech.py'), '--train_files', csvs['train'],
                '--dev_files', csvs['dev'], '--test_files', csvs['test'], '--random_seed', str(seed),
                '--checkpoint_dir', os.path.join(run_dir, 'checkpoints'), '--summary_dir',
                os.path.join(run_dir, 'summaries'), '--noshow_progressbar', '--load_train', 'init']
               + shlex.split(args.base_flags) + flags)
    run_flags = command[2:]     # the run's identity for --resume: not the interpreter or the checkout's path
    if args.resume and os.path.exists(result_path):
        with open(result_path) as previous:
            result = json.load(previous)
        if result.get('command') == run_flags:
            return dict(result, label=label, reused=True)
    started = time.time()
    process = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    seconds = time.time() - started
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, 'output.txt'), 'w') as out:
        out.write(process.stdout)
    test = TEST_LINE.search(process.stdout)
    dev = [(int(e), float(loss)) for e, loss in DEV_LINE.findall(process.stdout)]
    result = dict(label=label, seed=seed, exit_code=process.returncode, wall_s=seconds,
                  wer=float(test.group(1)) if test else None, cer=float(test.group(2)) if test else None,
                  dev_losses=[loss for _, loss in dev], epochs=len(STEP_LINE.findall(process.stdout)),
                  load_average=os.getloadavg()[0], command=run_flags)
    if process.returncode == 0:
        with open(result_path, 'w') as out:
            json.dump(result, out)
    return result


def summary(label, runs):
    def spread(key):
        values = [r[key] for r in runs if r[key] is not None]
        if not values:
            return None, None
        return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)
    wer, wer_sd = spread('wer')
    cer, cer_sd = spread('cer')
    wall, _ = spread('wall_s')
    last_dev = [r['dev_losses'][-1] for r in runs if r['dev_losses']]
    return dict(label=label, runs=len(runs), failed=sum(r['exit_code'] != 0 for r in runs), wer=wer, wer_sd=wer_sd,
                cer=cer, cer_sd=cer_sd, wall_s=wall, last_dev_loss=statistics.mean(last_dev) if last_dev else None,
                wers=[r['wer'] for r in runs])


def fmt(value, spec):
    return '-' if value is None else spec.format(value)


def table(summaries):
    header = '{:<24} {:>5} {:>16} {:>16} {:>10} {:>10}  {}'.format('configuration', 'runs', 'test WER (sd)',
                                                                  'test CER (sd)', 'dev loss', 'wall s', 'WER per seed')
    lines = [header, '-' * len(header)]
    for s in summaries:
        lines.append('{:<24} {:>5} {:>16} {:>16} {:>10} {:>10}  {}'.format(
            s['label'], s['runs'] - s['failed'], '{} ({})'.format(fmt(s['wer'], '{:.3f}'), fmt(s['wer_sd'], '{:.3f}')),
            '{} ({})'.format(fmt(s['cer'], '{:.3f}'), fmt(s['cer_sd'], '{:.3f}')), fmt(s['last_dev_loss'], '{:.2f}'),
            fmt(s['wall_s'], '{:.0f}'), ' '.join(fmt(w, '{:.3f}') for w in s['wers'])))
    return '\n'.join(lines)


def plot(runs, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label in dict.fromkeys(r['label'] for r in runs):
        mine = [r for r in runs if r['label'] == label and r['wer'] is not None]
        axes.scatter([r['wall_s'] for r in mine], [r['wer'] for r in mine], label=label)
    axes.set_xlabel('training + test wall time (s)')
    axes.set_ylabel('test WER')
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--configs', default='default=', help='";"-separated label=flags (see above)')
    parser.add_argument('--seeds', type=int, default=3, help='runs per configuration, seeds 1..N')
    parser.add_argument('--utterances', type=int, default=300, help='corpus size (about 80%% go to train.csv)')
    parser.add_argument('--corpus_dir', default=os.path.join('/tmp', 'deepspeech_quality_corpus'))
    parser.add_argument('--base_flags', default=BASE_FLAGS, help='flags of every run, before the configuration\'s')
    parser.add_argument('--out_dir', default='quality_results')
    parser.add_argument('--resume', action='store_true',
                        help='reuse the finished runs in --out_dir that had the same command; run only the missing ones')
    args = parser.parse_args(argv)
    configs = parse_configs(args.configs)
    os.makedirs(args.out_dir, exist_ok=True)
    csvs = make_corpus(args.corpus_dir, args.utterances)
    runs = []
    for seed in range(1, args.seeds + 1):
        for label, flags in configs:
            runs.append(run_once(label, flags, seed, csvs, args))
            print('{label} seed {seed}: WER {wer} in {wall_s:.0f} s (exit {exit_code}{reused})'.format(
                **dict(runs[-1], reused=', reused' if runs[-1].get('reused') else '')), flush=True)
    summaries = [summary(label, [r for r in runs if r['label'] == label]) for label, _ in configs]
    text = table(summaries)
    with open(os.path.join(args.out_dir, 'quality.txt'), 'w') as out:
        out.write(text + '\n')
    with open(os.path.join(args.out_dir, 'quality.json'), 'w') as out:
        json.dump(dict(base_flags=args.base_flags, corpus=csvs, load_average=os.getloadavg(), summaries=summaries,
                       runs=runs), out, indent=2)
    plot(runs, os.path.join(args.out_dir, 'quality.png'))
    print()
    print(text)
    return 0 if all(r['exit_code'] == 0 for r in runs) else 1


if __name__ == '__main__':
    sys.exit(main())
