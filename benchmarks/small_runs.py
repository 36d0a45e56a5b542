#!/usr/bin/env python3
"""Wall time of whole training runs, the code of several git revisions side by side in one run.

    python -m benchmarks.small_runs --revisions HEAD~3,HEAD [--repeats 3] [--breakdown]

Two jobs, so that a change that helps one and hurts the other shows:
  * overfit: DeepSpeech's CI overfit job (its bin/run-ci-ldc93s1_new.sh): one utterance of ~3 s as
    train, dev and test set, batch 1, n_hidden 100, 200 epochs, --feature_cache, a KenLM scorer for
    the test. Here the utterance is two bundled smoke-test utterances joined (2.8 s, "good morning
    hello world"), the scorer is built from its transcript. Its time goes into what an epoch costs
    besides its one step.
  * real: a generated corpus (benchmarks/make_speech_corpus.py, --utterances), n_hidden 256, batch 16, two
    epochs with validation: the time goes into the steps.
Each revision's code runs from a temporary git worktree (the benchmark's own corpus and scorer are
shared), the jobs alternate between revisions (the machine may be shared) and the table gives the
median wall time of --repeats runs, with the ratio to the first revision. --breakdown also runs the
overfit job once per revision with every Session.run and save timed by kind (iterator start, train
step, dev step, save, ...) and prints where an epoch's wall time goes.
"""
import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import ALPHABET, ROOT
from deepspeech_training.data.samples import CSV_COLUMNS

SMOKE = os.path.join(ROOT, 'data', 'smoke_test')
OVERFIT_TEXT = 'good morning hello world'

# Run inside the trainer's process by --breakdown: time each Session.run by what it runs. Kept as text
# so that it runs against whichever revision's code the job uses.
BREAKDOWN_WRAPPER = r'''
import atexit, collections, json, runpy, sys, time
import tensorflow.compat.v1 as tfv1
spent = collections.defaultdict(float)
counts = collections.Counter()
run = tfv1.Session.run

def kind(fetches):
    if isinstance(fetches, dict):
        return 'train step' if 'train' in fetches else 'eval/test step' if 'losses' in fetches else 'other run'
    name = getattr(fetches, 'name', '')
    if 'initializer' in name or 'MakeIterator' in getattr(getattr(fetches, 'node_def', None), 'op', ''):
        return 'iterator start'
    if name.startswith('save') or '/control_dependency' in name:
        return 'checkpoint data'
    return 'other run'

def timed(self, fetches, *args, **kwargs):
    started = time.perf_counter()
    try:
        return run(self, fetches, *args, **kwargs)
    finally:
        spent[kind(fetches)] += time.perf_counter() - started
        counts[kind(fetches)] += 1

tfv1.Session.run = timed
started = time.perf_counter()
atexit.register(lambda: print('BREAKDOWN ' + json.dumps(dict(total=time.perf_counter() - started,
                                                               spent=spent, counts=counts))))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name='__main__')
'''


def run(command, **kwargs):
    return subprocess.run([str(c) for c in command], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, **kwargs)


def make_overfit_data(work):
    """The joined utterance, its CSV and a scorer of its transcript."""
    data = os.path.join(work, 'overfit')
    os.makedirs(data, exist_ok=True)
    wav = os.path.join(data, 'utterance.wav')
    run(['sox', os.path.join(SMOKE, 'good_morning.wav'), os.path.join(SMOKE, 'hello_world.wav'), wav])
    with open(os.path.join(data, 'overfit.csv'), 'w') as csv:
        csv.write('{}\nutterance.wav,{},{}\n'.format(','.join(CSV_COLUMNS), os.path.getsize(wav), OVERFIT_TEXT))
    with open(os.path.join(data, 'text.txt'), 'w') as text:
        text.write((OVERFIT_TEXT + '\n') * 10)
    run([sys.executable, os.path.join(ROOT, 'data', 'lm', 'generate_lm.py'), '--input_txt',
         os.path.join(data, 'text.txt'), '--output_dir', data, '--top_k', 500, '--arpa_order', 3, '--max_arpa_memory', '64M', '--discount_fallback'])
    run([sys.executable, os.path.join(ROOT, 'bin', 'generate_scorer_package.py'), '--alphabet',
         ALPHABET, '--lm', os.path.join(data, 'lm.binary'), '--vocab',
         os.path.join(data, 'vocab-500.txt'), '--package', os.path.join(data, 'kenlm.scorer')])
    return data


def job_flags(job, data, corpus, out, epochs):
    common = ['--alphabet_config_path', ALPHABET, '--noshow_progressbar',
              '--checkpoint_dir', os.path.join(out, 'checkpoints'), '--summary_dir', os.path.join(out, 'summaries')]
    if job == 'overfit':
        csv = os.path.join(data, 'overfit.csv')
        return common + ['--train_files', csv, '--dev_files', csv, '--test_files', csv, '--train_batch_size', 1,
                         '--dev_batch_size', 1, '--test_batch_size', 1, '--n_hidden', 100, '--epochs', epochs,
                         '--feature_cache', os.path.join(out, 'feature_cache'),
                         '--scorer_path', os.path.join(data, 'kenlm.scorer')]
    return common + ['--train_files', os.path.join(corpus, 'train.csv'), '--dev_files',
                     os.path.join(corpus, 'dev.csv'), '--train_batch_size', 16, '--dev_batch_size', 16,
                     '--n_hidden', 256, '--epochs', 2]


def run_job(checkout, job, data, corpus, epochs, breakdown=False):
    """Seconds of one job with `checkout`'s code, and its breakdown (or None)."""
    out = tempfile.mkdtemp(prefix='small_run_')
    try:
        prefix = [sys.executable]
        if breakdown:
            wrapper = os.path.join(out, 'breakdown.py')
            with open(wrapper, 'w') as script:
                script.write(BREAKDOWN_WRAPPER)
            prefix.append(wrapper)
        started = time.perf_counter()
        result = run(prefix + [os.path.join(checkout, 'DeepSpeech.py')] + job_flags(job, data, corpus, out, epochs),
                     cwd=checkout, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
        seconds = time.perf_counter() - started
        lines = [line for line in result.stdout.splitlines() if line.startswith('BREAKDOWN ')]
        return seconds, json.loads(lines[-1][len('BREAKDOWN '):]) if lines else None
    finally:
        shutil.rmtree(out, ignore_errors=True)


def checkouts(revisions, work):
    """{revision: a worktree of it}"""
    trees = {}
    for revision in revisions:
        tree = os.path.join(work, 'tree-' + revision.replace('/', '_').replace('~', '_'))
        run(['git', '-C', ROOT, 'worktree', 'add', '--detach', '--force', tree, revision])
        trees[revision] = tree
    return trees


def breakdown_table(breakdowns, epochs):
    kinds = sorted({k for b in breakdowns.values() for k in b['spent']})
    lines = ['overfit job, ms per epoch ({} epochs; "python etc." is the rest of the wall time: start-up, '
             'graph building, test, the Python between runs)'.format(epochs),
             '{:<18}'.format('') + ''.join('{:>16}'.format(r) for r in breakdowns)]
    for kind in kinds + ['python etc.']:
        cells = []
        for b in breakdowns.values():
            ms = (b['total'] - sum(b['spent'].values()) if kind == 'python etc.' else b['spent'].get(kind, 0)) \
                * 1000 / epochs
            cells.append('{:>16.1f}'.format(ms))
        lines.append('{:<18}'.format(kind) + ''.join(cells))
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--revisions', default='HEAD', help='comma-separated git revisions; the first is the baseline')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--jobs', default='overfit,real')
    parser.add_argument('--utterances', type=int, default=200, help='corpus size of the real job')
    parser.add_argument('--overfit_epochs', type=int, default=200, help="DeepSpeech's CI job runs 200")
    parser.add_argument('--breakdown', action='store_true')
    args = parser.parse_args()
    revisions, jobs = args.revisions.split(','), args.jobs.split(',')
    work = tempfile.mkdtemp(prefix='benchmark_small_runs_')
    trees = checkouts(revisions, work)
    try:
        data = make_overfit_data(work)
        corpus = os.path.join(work, 'corpus')
        if 'real' in jobs:
            run([sys.executable, '-m', 'benchmarks.make_speech_corpus', '--out_dir', corpus,
                 '--count', args.utterances, '--seed', 7])
        seconds = collections.defaultdict(list)
        for repeat in range(args.repeats):
            for job in jobs:
                for revision in revisions:
                    took, _ = run_job(trees[revision], job, data, corpus, args.overfit_epochs)
                    seconds[job, revision].append(took)
                    print('repeat {} {:<8} {:<16} {:7.1f} s'.format(repeat, job, revision, took), flush=True)
        print('\n{:<8} {:<16} {:>10} {:>8}   (median of {} runs)'.format('job', 'revision', 'wall s', 'ratio',
                                                                      args.repeats))
        for job in jobs:
            base = statistics.median(seconds[job, revisions[0]])
            for revision in revisions:
                median = statistics.median(seconds[job, revision])
                print('{:<8} {:<16} {:>10.1f} {:>8.2f}'.format(job, revision, median, median / base))
        if args.breakdown:
            print('\n' + breakdown_table({r: run_job(trees[r], 'overfit', data, corpus, args.overfit_epochs,
                                                      breakdown=True)[1] for r in revisions}, args.overfit_epochs))
    finally:
        for tree in trees.values():
            subprocess.run(['git', '-C', ROOT, 'worktree', 'remove', '--force', tree], stdout=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
