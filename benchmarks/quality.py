#!/usr/bin/env python3
"""Model quality of several configurations over several seeds, side by side in one run: greedy, beam and
beam + scorer, on one process or N Horovod ranks, the best-dev checkpoint and the mean of the last K.

    python -m benchmarks.quality --configs "name=np1;name=np2,np=2,b=8" --seeds 4 --scorer --average 5

Generates (or reuses) a corpus with benchmarks/make_speech_corpus.py (test sentences are never train
sentences), then trains and tests every configuration once per seed with `DeepSpeech.py` (`--random_seed`
is the seed), round robin so a change in the machine's load hits every configuration alike. A
configuration is comma-separated key=value pairs (benchmarks/common.py, as benchmarks.training's): name (its
label), np (ranks: `horovodrun -np N -H localhost:N ... --horovod`; without it, --np), upper-case keys
are environment variables, the others flags (h, b, lstm, amp short for some; e.g. flagfile=PATH), which go
after --base_flags.
Under Horovod the trainer multiplies --learning_rate by N (doc/HOROVOD.rst): divide it by N in the flags to
keep the one-process rate.

Each run's best-dev checkpoint is tested (on one process) with greedy decoding (beam width 1, in the training
run itself), with beam search of --beam_width, and with --scorer also beam search plus a KenLM scorer of the
training transcripts (built once per corpus with data/lm/generate_lm.py and bin/generate_scorer_package.py)
at the alpha and beta lm_optimizer.py finds on dev in --lm_trials trials. With --average K the mean of the
run's last K train checkpoints (bin/average_checkpoints.py) is tested the same ways (with the best-dev
checkpoint's alpha and beta), a row of its own ("<label> avg K"); so is the weight average of a
configuration trained with --ema_decay (its `ema/` checkpoint, "<label> ema"), at the alpha and beta found for
it (it is the model such a run delivers, the one its user tunes the scorer for).

Reports per configuration and decoding the test WER and CER (mean and spread over the seeds: one seed tells
little, runs of one configuration differ by several points of WER), the last dev loss, the training wall
time (training and the greedy test); prints the table, writes <out_dir>/quality.txt, quality.json (every run,
with the wall time of its tests and its dev loss per validation against wall time); then the time to quality
(benchmarks/time_to_quality.py): the best dev loss each configuration reached by each of a few wall times,
printed and in time_to_quality.txt, and quality.png, dev loss against wall time (a line per configuration,
mean over seeds) beside each seed's greedy WER (of the weights it delivers) against its wall time. With
--resume, runs already in --out_dir with the same command and tests are reused, so `--seeds 6 --resume` adds
seeds 5-6 to a finished 4-seed benchmark; a run with the same training but other tests (--scorer,
--beam_width, --lm_trials, --average) keeps its training and redoes only its tests. doc/QUALITY.rst has the
recipes it measured.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

from benchmarks import time_to_quality
from benchmarks.common import (ALPHABET, ROOT, deepspeech_command, environment, flags, fmt, folder, label,
                               parsed_configs)

BASE_FLAGS = '--n_hidden 256 --train_batch_size 16 --dev_batch_size 16 --test_batch_size 16 --epochs 30'
TEST_LINE = re.compile(r'Test on .* - WER: ([\d.]+), CER: ([\d.]+), loss: ([\d.]+)')
DEV_LINE = re.compile(r'Finished validating epoch (\d+) on .* - loss: ([\d.]+)')
STEP_LINE = re.compile(r'Finished training epoch (\d+) .* ([\d.]+) s/step')
BEST_LM_WEIGHTS = re.compile(r'Best params: lm_alpha=([-\d.e]+) and lm_beta=([-\d.e]+)')
DECODINGS = ('greedy', 'beam', 'scorer')
# DeepSpeech's train.txt-sized defaults shrunk for a generated corpus: every word, trigrams, a small sort
# buffer, and Kneser-Ney's fallback discounts (a generated text has few words seen exactly once).
LM_FLAGS = ['--top_k', '500000', '--arpa_order', '3', '--max_arpa_memory', '64M', '--arpa_prune', '0',
            '--discount_fallback']


def make_corpus(corpus_dir, utterances):
    if not os.path.exists(os.path.join(corpus_dir, 'test.csv')):
        subprocess.run([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', corpus_dir,
                        '--count', str(utterances)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return {name: os.path.join(corpus_dir, name + '.csv') for name in ('train', 'dev', 'test')}


def make_scorer(corpus_dir):
    """<corpus_dir>/lm/kenlm.scorer from the corpus's training transcripts, made once per corpus (the
    package is written last: a scorer that is there is complete)."""
    lm_dir = os.path.join(corpus_dir, 'lm')
    scorer = os.path.join(lm_dir, 'kenlm.scorer')
    if not os.path.exists(scorer):
        os.makedirs(lm_dir, exist_ok=True)
        for name, command in (('generate_lm', [os.path.join(ROOT, 'data', 'lm', 'generate_lm.py'), '--input_txt',
                                               os.path.join(corpus_dir, 'train_sentences.txt'), '--output_dir',
                                               lm_dir] + LM_FLAGS),
                              ('generate_scorer_package', [os.path.join(ROOT, 'bin', 'generate_scorer_package.py'),
                                                           '--alphabet', ALPHABET, '--lm',
                                                           os.path.join(lm_dir, 'lm.binary'), '--vocab',
                                                           os.path.join(lm_dir, 'vocab-500000.txt'), '--package',
                                                           scorer])):
            log = os.path.join(lm_dir, name + '.txt')
            if run_logged([sys.executable] + command, log)[0] != 0:
                raise SystemExit('making the scorer failed: see {}'.format(log))
    return scorer


def run_logged(command, log_path, env=None):
    """Run `command` in the checkout (with `env` added to the environment), its output into `log_path`;
    (exit code, output, seconds)."""
    started = time.time()
    process = subprocess.run(command, cwd=ROOT, env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
    with open(log_path, 'w') as out:
        out.write(process.stdout)
    return process.returncode, process.stdout, time.time() - started


def measured(output):
    """{'wer', 'cer'} of a test run's output (None each when it printed none)."""
    test = TEST_LINE.search(output)
    return dict(wer=float(test.group(1)) if test else None, cer=float(test.group(2)) if test else None)


class Tester:
    """Tests checkpoints of one run with each decoding, each test a `DeepSpeech.py --test_files` process on
    the run's model flags; its outputs go to the run's folder."""

    def __init__(self, run_dir, model_flags, csvs, seed, args):
        self.run_dir, self.model_flags, self.csvs, self.seed, self.args = run_dir, model_flags, csvs, seed, args

    def _flags(self, checkpoint_dir):
        return ['--checkpoint_dir', checkpoint_dir, '--load_evaluate', 'best', '--noshow_progressbar',
                '--alphabet_config_path', ALPHABET] + self.model_flags

    def test(self, checkpoint_dir, name, *decoding):
        command = ([sys.executable, os.path.join(ROOT, 'DeepSpeech.py'), '--test_files', self.csvs['test']]
                   + self._flags(checkpoint_dir) + list(decoding))
        return measured(run_logged(command, os.path.join(self.run_dir, name + '.txt'))[1])

    def lm_weights(self, checkpoint_dir, name):
        """(alpha, beta) lm_optimizer.py finds on dev for the checkpoint, None if it failed."""
        command = ([sys.executable, os.path.join(ROOT, 'lm_optimizer.py'), '--test_files', self.csvs['dev']]
                   + self._flags(checkpoint_dir) + ['--scorer_path', self.args.scorer_path, '--beam_width',
                                                    str(self.args.beam_width), '--n_trials', str(self.args.lm_trials),
                                                    '--random_seed', str(self.seed)])
        found = BEST_LM_WEIGHTS.search(run_logged(command, os.path.join(self.run_dir, name + '-lm_optimizer.txt'))[1])
        return (float(found.group(1)), float(found.group(2))) if found else None

    def decodings(self, checkpoint_dir, name, greedy=None, lm_weights=None):
        """{decoding: {'wer', 'cer'}} of the checkpoint (`greedy`'s measures if known already), and the
        scorer's (alpha, beta): `lm_weights`, or optimised on dev when None."""
        beam = ['--beam_width', str(self.args.beam_width)]
        results = dict(greedy=greedy or self.test(checkpoint_dir, name + '-greedy', '--beam_width', '1'),
                       beam=self.test(checkpoint_dir, name + '-beam', *beam))
        if self.args.scorer_path:
            lm_weights = lm_weights or self.lm_weights(checkpoint_dir, name)
            if lm_weights:
                results['scorer'] = self.test(checkpoint_dir, name + '-scorer', *beam, '--scorer_path',
                                              self.args.scorer_path, '--lm_alpha', str(lm_weights[0]),
                                              '--lm_beta', str(lm_weights[1]))
        return results, lm_weights


def averaged(checkpoint_dir, run_dir, count):
    """The folder of the mean of the run's last `count` train checkpoints, None if it could not be made."""
    out_dir = os.path.join(run_dir, 'averaged')
    command = [sys.executable, os.path.join(ROOT, 'bin', 'average_checkpoints.py'), '--checkpoint_dir', checkpoint_dir,
               '--last', str(count), '--out_dir', out_dir]
    return out_dir if run_logged(command, os.path.join(run_dir, 'average.txt'))[0] == 0 else None


# what train_once measures, kept when --resume redoes only the tests of a run
TRAINING_MEASURES = ('np', 'seed', 'exit_code', 'wall_s', 'dev_losses', 'epochs', 'dev_curve', 'load_average')


def train_once(name, ranks, seed, run_dir, train_flags, config):
    """Train one run (DeepSpeech.py, its greedy test included) in an emptied folder (an interrupted run's
    summaries would otherwise join its dev-loss curve); its measures (TRAINING_MEASURES, its label and the
    greedy test's)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    started = time.time()
    exit_code, output, seconds = run_logged(deepspeech_command(train_flags, ranks), os.path.join(run_dir, 'output.txt'),
                                            environment(config))
    dev = [(int(e), float(loss)) for e, loss in DEV_LINE.findall(output)]
    return dict(label=name, np=ranks, seed=seed, exit_code=exit_code, wall_s=seconds,
                dev_losses=[loss for _, loss in dev], epochs=len(STEP_LINE.findall(output)),
                dev_curve=time_to_quality.dev_curve(os.path.join(run_dir, 'summaries'), started),
                load_average=os.getloadavg()[0], single=dict(greedy=measured(output)))


def run_once(config, seed, csvs, args):
    """Train and test one configuration with one seed; its measures (kept in the run's result.json, which a
    later run with --resume reuses, so more seeds can be added to a finished benchmark)."""
    name, ranks = label(config), int(config['np'])
    run_dir = os.path.join(args.out_dir, 'runs', '{}-seed{}'.format(folder(config), seed))
    result_path = os.path.join(run_dir, 'result.json')
    checkpoint_dir = os.path.join(run_dir, 'checkpoints')
    model_flags = shlex.split(args.base_flags) + flags(config)
    keep = ['--max_to_keep', str(args.average)] if args.average > 5 else []    # DeepSpeech keeps 5
    train_flags = (['--train_files', csvs['train'], '--dev_files', csvs['dev'], '--test_files', csvs['test'],
                    '--random_seed', str(seed), '--checkpoint_dir', checkpoint_dir, '--summary_dir',
                    os.path.join(run_dir, 'summaries'), '--noshow_progressbar', '--load_train', 'init',
                    '--load_evaluate', 'best']     # the greedy test of best_dev, also under --ema_decay
                   + keep + model_flags + ['--beam_width', '1'])
    # the run's identity for --resume (not the interpreter or the checkout's path): its training, then its tests
    training = dict(np=ranks, train=train_flags, env=environment(config))
    identity = dict(training, beam_width=args.beam_width, average=args.average,
                    lm_trials=args.lm_trials if args.scorer_path else None)
    previous = {}
    if args.resume and os.path.exists(result_path):
        with open(result_path) as previous_file:
            previous = json.load(previous_file)
        if previous.get('identity') == identity:
            return dict(previous, label=name, reused=True)
    if {key: previous.get('identity', {}).get(key) for key in training} == training:
        result = {key: previous[key] for key in TRAINING_MEASURES}
        result.update(label=name, identity=identity, retested=True, single=dict(greedy=previous['single']['greedy']))
    else:
        result = train_once(name, ranks, seed, run_dir, train_flags, config)
        result['identity'] = identity
    if result['exit_code'] == 0:
        started = time.time()
        tester = Tester(run_dir, model_flags, csvs, seed, args)
        result['single'], result['lm_weights'] = tester.decodings(checkpoint_dir, 'test', result['single']['greedy'])
        if args.average:
            mean_dir = averaged(checkpoint_dir, run_dir, args.average)
            result['averaged'] = tester.decodings(mean_dir, 'averaged', lm_weights=result['lm_weights'])[0] \
                if mean_dir else {}
        ema_dir = os.path.join(checkpoint_dir, 'ema')     # written by --ema_decay
        if os.path.isdir(ema_dir):
            result['ema'], result['ema_lm_weights'] = tester.decodings(ema_dir, 'ema')
        result['test_s'] = time.time() - started
        with open(result_path, 'w') as out:
            json.dump(result, out)
    return result


def summary(name, ranks, runs, checkpoint, average):
    """Mean and sd over `runs` of each decoding's WER and CER of `checkpoint` ('single': best dev,
    'averaged': the mean of the last `average`, 'ema': the weight average of --ema_decay)."""
    def spread(values):
        values = [v for v in values if v is not None]
        if not values:
            return None, None
        return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)
    measures = {}
    for decoding in DECODINGS:
        for metric in ('wer', 'cer'):
            values = [r.get(checkpoint, {}).get(decoding, {}).get(metric) for r in runs]
            measures[decoding + '_' + metric], measures[decoding + '_' + metric + '_sd'] = spread(values)
    last_dev = [r['dev_losses'][-1] for r in runs if r['dev_losses']]
    wers = [r.get(checkpoint, {}).get('greedy', {}).get('wer') for r in runs]
    names = dict(single=name, averaged='{} avg{}'.format(name, average), ema=name + ' ema')
    return dict(measures, label=names[checkpoint], np=ranks,
                checkpoint=checkpoint, runs=len(runs), failed=wers.count(None),
                wall_s=spread([r['wall_s'] for r in runs])[0] if checkpoint == 'single' else None,
                last_dev_loss=statistics.mean(last_dev) if last_dev and checkpoint == 'single' else None,
                wers=wers)


def wers(measures):
    """'greedy 0.712, beam 0.650' of a checkpoint's {decoding: {'wer', 'cer'}}."""
    return ', '.join('{} {}'.format(d, fmt(m['wer'], '{:.3f}')) for d, m in measures.items()) or '-'


def table(summaries):
    """The text table: a column per decoding and metric that has a value, a row per configuration (and its
    averaged checkpoints)."""
    columns = [(d, m) for d in DECODINGS for m in ('wer', 'cer') if any(s[d + '_' + m] is not None for s in summaries)]
    row = '{:<24} {:>3} {:>5} ' + '{:>16} ' * len(columns) + '{:>9} {:>7}  {}'
    header = row.format('configuration', 'np', 'runs', *('{} {} (sd)'.format(d, m.upper()) for d, m in columns),
                        'dev loss', 'wall s', 'greedy WER per seed')
    lines = [header, '-' * len(header)]
    for s in summaries:
        lines.append(row.format(
            s['label'], s['np'], s['runs'] - s['failed'],
            *('{} ({})'.format(fmt(s[d + '_' + m], '{:.3f}'), fmt(s[d + '_' + m + '_sd'], '{:.3f}')) for d, m in columns),
            fmt(s['last_dev_loss'], '{:.2f}'), fmt(s['wall_s'], '{:.0f}'), ' '.join(fmt(w, '{:.3f}') for w in s['wers'])))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--configs', default='name=default', help='";"-separated configurations (see above)')
    parser.add_argument('--np', type=int, default=1, help='ranks of the configurations without @N')
    parser.add_argument('--seeds', type=int, default=3, help='runs per configuration, seeds 1..N')
    parser.add_argument('--utterances', type=int, default=300, help='corpus size (about 80%% go to train.csv)')
    parser.add_argument('--corpus_dir', default=os.path.join('/tmp', 'deepspeech_quality_corpus'))
    parser.add_argument('--base_flags', default=BASE_FLAGS, help='flags of every run, before the configuration\'s')
    parser.add_argument('--beam_width', type=int, default=500,
                        help='beam width of the beam tests (default: what the released clients use)')
    parser.add_argument('--scorer', action='store_true',
                        help='also test with a scorer of the training transcripts, alpha and beta tuned on dev')
    parser.add_argument('--lm_trials', type=int, default=20, help='lm_optimizer.py trials per run (with --scorer)')
    parser.add_argument('--average', type=int, default=0, metavar='K',
                        help='also test the mean of each run\'s last K train checkpoints')
    parser.add_argument('--out_dir', default='quality_results')
    parser.add_argument('--resume', action='store_true',
                        help='reuse the finished runs in --out_dir that had the same command; run only the missing ones')
    args = parser.parse_args(argv)
    configs = parsed_configs(parser, args.configs, args.np)
    os.makedirs(args.out_dir, exist_ok=True)
    csvs = make_corpus(args.corpus_dir, args.utterances)
    args.scorer_path = make_scorer(args.corpus_dir) if args.scorer else None
    runs = []
    for seed in range(1, args.seeds + 1):
        for config in configs:
            runs.append(run_once(config, seed, csvs, args))
            run = runs[-1]
            print('{} seed {}: WER {}{}{} in {:.0f} s (exit {}{})'.format(
                run['label'], seed, wers(run['single']), '; mean of the last {}: {}'.format(args.average, wers(
                    run.get('averaged', {}))) if args.average else '',
                '; weight average: ' + wers(run['ema']) if 'ema' in run else '', run['wall_s'], run['exit_code'],
                ', reused' if run.get('reused') else ', training reused' if run.get('retested') else ''), flush=True)
    summaries = []
    for config in configs:
        mine = [r for r in runs if r['label'] == label(config)]
        checkpoints = ['single'] + ['averaged'] * bool(args.average) + ['ema'] * any('ema' in r for r in mine)
        summaries += [summary(label(config), int(config['np']), mine, checkpoint, args.average)
                      for checkpoint in checkpoints]
    text = table(summaries)
    with open(os.path.join(args.out_dir, 'quality.txt'), 'w') as out:
        out.write(text + '\n')
    with open(os.path.join(args.out_dir, 'quality.json'), 'w') as out:
        json.dump(dict(base_flags=args.base_flags, corpus=csvs, scorer=args.scorer_path, beam_width=args.beam_width,
                       average=args.average, load_average=os.getloadavg(), summaries=summaries, runs=runs), out,
                  indent=2)
    curves = time_to_quality.table(runs)
    with open(os.path.join(args.out_dir, 'time_to_quality.txt'), 'w') as out:
        out.write(curves + '\n')
    time_to_quality.plot(runs, os.path.join(args.out_dir, 'quality.png'))
    print()
    print(text)
    print()
    print(curves)
    return 0 if all(r['exit_code'] == 0 for r in runs) else 1


if __name__ == '__main__':
    sys.exit(main())
