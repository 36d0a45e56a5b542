#!/usr/bin/env python3
"""How start-up time, memory and per-epoch overhead grow with the corpus (issue 31, "a million
utterances"): 10k, 100k and 1M samples as a CSV of WAV files, one .sdb and tar shards (benchmarks/scale_corpus.py
makes them once under --work_dir and reuses them), read from the local disk, over sshfs with added
latency, or over HTTP, by 1, 2, 4 or 8 ranks.

    python -m benchmarks.scale                               # default: local, np 1 and 2, all sizes
    python -m benchmarks.scale --sizes 10000,100000 --storages local,http --np 1

Every run is start-up only: `DeepSpeech.py` (a tiny model: --n_hidden 16, batch 8, one epoch, a tiny dev
CSV, checkpoints in a temporary folder; np > 1 under `horovodrun --gloo -np N -H localhost:N`) with
DS_STARTUP_REPORT and DS_STARTUP_EXIT=1, so each rank writes util/startup.py's report at its first step
and exits. Per configuration (size x source x storage x ranks), from the slowest rank's report:
  * seconds from process start to the first step, split into import, read sources, validation, planning,
    graph and first batch (horovodrun's own start is outside: "wall" is launch to exit);
  * peak RSS at the first step (the largest rank), per sample, and per sample added to the configuration's
    smallest corpus (what a sample costs, without the ~0.6 GB a process starts with), beside the sample index
    the trainer keeps (bytes a sample, measured in process) and the phase by whose end the peak was reached;
  * read calls and bytes (/proc/self/io syscr, rchar: reads of files and pipes; a socket's receives, as
    HTTP's, are not reads there: the requests column counts those) of that rank;
  * HTTP requests (all ranks) for the http storage: a local server here answering Range requests.
Storages: local (the page cache is warm after the first run: what a rerun on one node sees); sshfs
(tests/helpers/netns_sshfs.py: sshd on a network-namespace host, --rtt ms added per round trip, a fresh
mount per run so nothing is cached; root needed); http (sdb and tar only: a CSV lists files, not ranges).
Besides, the per-epoch planning the trainer does outside its steps (data.plans.train_set's and eval_set's
plan functions) is timed in process at each size.

Then each measure's growth against corpus size: k of a least-squares line through (log n, log measure),
measure ~ n^k (k 1: linear; 0: flat). Writes <out_dir>/scale.txt and scale.json; the load average is
printed beside (the machine may be shared).

Cost (2 cores): the default set at 10k/100k takes ~5 minutes, the 1M runs ~2-4 minutes each (CSV: its
validation reads 1M WAV headers); the full matrix (3 sizes x 3 sources x local/sshfs/http x np 1,2,4,8)
is 96 runs, hours: at 1M over sshfs with 2 ms added, a run that opens 1M files costs ~1M round trips
(over half an hour each). Select with --sizes, --sources, --storages and --np.
"""
import argparse
import contextlib
import http.server
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from benchmarks import scale_corpus
from benchmarks.common import ALPHABET, ROOT, deepspeech_command, fmt, gloo_localhost_launch, table
from deepspeech_training.util import startup

STORAGES = ('local', 'sshfs', 'http')
STARTS = ('first', 'second')
PHASE_KEYS = [re.sub(r'\W', '_', phase) for phase in startup.PHASES]
COLUMNS = ([('configuration', 'label', '{}'), ('n', 'n', '{:.0f}')]
           + [(phase, 'phase_' + key, '{:.2f}') for phase, key in zip(startup.PHASES, PHASE_KEYS)]
           + [('total s', 'total_s', '{:.2f}'), ('wall s', 'wall_s', '{:.1f}'), ('RSS MB', 'rss_mb', '{:.0f}'),
              ('B/sample', 'rss_bytes_per_sample', '{:.0f}'),
              ('B/added sample', 'rss_bytes_per_added_sample', '{:.0f}'), ('index B/sample', 'index_bytes', '{:.0f}'),
              ('peak by', 'peak_phase', '{}'), ('read calls', 'read_calls', '{:.0f}'),
              ('read MB', 'read_mb', '{:.1f}'), ('requests', 'requests', '{:.0f}')])
GROWTH = [('total_s', 'total'), ('phase_read_sources', 'read'), ('phase_validation', 'valid'),
          ('phase_planning', 'plan'), ('rss_mb', 'RSS'), ('read_calls', 'calls'), ('read_mb', 'read MB'),
          ('requests', 'requests')]
PLAN_GROWTH = [('train_plan_s', 'train plan'), ('eval_plan_s', 'eval plan')]


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves the files under the server's folder, whole or one `Range: bytes=a-b` at a time, read with
    pread (a 10 GB .sdb is never loaded); counts the requests, as an object store would bill them."""

    def do_GET(self):
        self.server.count()
        path = os.path.join(self.server.folder, self.path.lstrip('/').split('?')[0])
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            self.send_error(404)
            return
        try:
            size = os.fstat(fd).st_size
            wanted = re.fullmatch(r'bytes=(\d+)-(\d*)', self.headers.get('Range', ''))
            first = int(wanted.group(1)) if wanted else 0
            last = min(int(wanted.group(2) or size - 1), size - 1) if wanted else size - 1
            self.send_response(206 if wanted else 200)
            if wanted:
                self.send_header('Content-Range', 'bytes {}-{}/{}'.format(first, last, size))
            self.send_header('Content-Length', str(last - first + 1))
            self.send_header('Accept-Ranges', 'bytes')
            self.end_headers()
            while first <= last:
                chunk = os.pread(fd, min(1 << 20, last - first + 1), first)
                self.wfile.write(chunk)
                first += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass        # the reader hung up: what it had was enough
        finally:
            os.close(fd)

    def log_message(self, *_):
        pass


class RangeServer(http.server.ThreadingHTTPServer):
    """A local HTTP server of `folder` on a free port, counting requests."""
    daemon_threads = True
    request_queue_size = 128    # the validation pass's header reads come 16 at once per rank

    def __init__(self, folder):
        super().__init__(('127.0.0.1', 0), RangeHandler)
        self.folder, self.requests, self.lock = folder, 0, threading.Lock()

    def count(self):
        with self.lock:
            self.requests += 1

    @property
    def url(self):
        return 'http://127.0.0.1:{}'.format(self.server_address[1])


@contextlib.contextmanager
def http_storage(folder):
    """A RangeServer of `folder` running for the block."""
    server = RangeServer(folder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class Storages:
    """Where a run reads the corpus: `place(storage)` is a context manager giving (base path or URL, the
    HTTP server or None). The sshd of the sshfs storage is started on first use and kept for the rest."""

    def __init__(self, work_dir, out_dir, rtt_ms, stack):
        self.work_dir, self.out_dir, self.rtt_ms, self.stack, self.sshd = work_dir, out_dir, rtt_ms, stack, None

    @contextlib.contextmanager
    def place(self, storage):
        if storage == 'local':
            yield self.work_dir, None
        elif storage == 'http':
            with http_storage(self.work_dir) as server:
                yield server.url, server
        else:
            if self.sshd is None:
                from tests.helpers import netns_sshfs
                self.sshd = self.stack.enter_context(netns_sshfs.ssh_server(os.path.join(self.out_dir, 'sshd')))
            with self.sshd.mount(self.work_dir, os.path.join(self.out_dir, 'mnt'), self.rtt_ms) as mountpoint:
                yield mountpoint, None


def run_command(size, train_files, dev_csv, run_dir, cache_dir, args):
    """DeepSpeech.py with a tiny model on `train_files`, checkpoints and summaries in `run_dir`, what the input
    check learns in `cache_dir` (--data_cache_dir)."""
    flags = ['--train_files', ','.join(train_files), '--dev_files', dev_csv, '--n_hidden', str(args.n_hidden),
             '--train_batch_size', str(args.batch_size), '--dev_batch_size', str(args.batch_size), '--epochs', '1',
             '--load_train', 'init', '--alphabet_config_path', ALPHABET, '--noshow_progressbar',
             '--checkpoint_dir', os.path.join(run_dir, 'checkpoints'),
             '--summary_dir', os.path.join(run_dir, 'summaries'), '--data_cache_dir', cache_dir]
    # Gloo (the launcher this project uses): under mpirun, a rank's exit at its first step is an improper end
    return deepspeech_command(flags, size, gloo_localhost_launch)


def launch(command, run_dir, timeout):
    """Run `command` with start-up reports into `run_dir` and exit at the first step; (exit code or
    'timeout', wall seconds, log tail)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1',
               **{startup.REPORT: os.path.join(run_dir, 'startup'), startup.EXIT: '1'})
    started = time.monotonic()
    with open(os.path.join(run_dir, 'log.txt'), 'w') as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)     # a timeout kills horovodrun and its ranks
        try:
            exit_code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            exit_code = 'timeout'
    with open(os.path.join(run_dir, 'log.txt'), errors='replace') as log:
        return exit_code, time.monotonic() - started, log.read()[-2000:]


def summarise(reports, n):
    """The table's measures from the ranks' reports: phases and reads of the slowest rank (the one every
    other waits for at the first step's allreduce), the largest RSS."""
    slowest = max(reports, key=lambda r: r['seconds_to_first_step'])
    rss = max(r['peak_rss_mb'] for r in reports)
    result = {'phase_' + key: slowest['phases'].get(phase) for phase, key in zip(startup.PHASES, PHASE_KEYS)}
    peaks = max(reports, key=lambda r: r['peak_rss_mb'])['peak_rss_mb_after']
    result.update(total_s=slowest['seconds_to_first_step'], rss_mb=rss, rss_bytes_per_sample=rss * 2 ** 20 / n,
                  peak_phase=next(phase for phase, mb in peaks.items() if mb >= rss),
                  read_calls=slowest['io'].get('syscr'), read_mb=slowest['io'].get('rchar', 0) / 1e6)
    return result


def read_json(path):
    with open(path) as report:
        return json.load(report)


def measure(config, args, storages, dev_csv):
    """One start-up run of `config` (n, source, storage, np, start); its result row. A first start has an
    empty --data_cache_dir, a second the one the first filled (what a rerun of the same corpus finds)."""
    n, source, storage, size, start = config
    label = '{} {} np={} {}'.format(source, storage, size, start)
    name = '{}-{}-{}-np{}'.format(n, source, storage, size)
    run_dir, cache_dir = os.path.join(args.out_dir, 'runs', name + '-' + start), os.path.join(args.out_dir, 'cache', name)
    shutil.rmtree(run_dir, ignore_errors=True)
    if start == 'first':
        shutil.rmtree(cache_dir, ignore_errors=True)
    os.makedirs(run_dir)
    print('[{}] n={} ...'.format(label, n), end=' ', flush=True)
    with storages.place(storage) as (base, server):
        files = [base + '/' + path for path in scale_corpus.train_files(args.work_dir, source, n, args.shard_size)]
        command = run_command(size, files, dev_csv, run_dir, cache_dir, args)
        exit_code, wall, log = launch(command, run_dir, args.timeout)
        requests = server.requests if server else None
    result = dict(label=label, n=n, source=source, storage=storage, np=size, start=start, exit_code=exit_code,
                  wall_s=wall,
                  requests=requests, run_dir=run_dir, command=command)
    paths = [os.path.join(run_dir, 'startup.{}'.format(rank)) for rank in range(size)]
    if exit_code != 0 or not all(os.path.exists(p) for p in paths):
        print('failed ({}): see {}\n{}'.format(exit_code, os.path.join(run_dir, 'log.txt'), log), flush=True)
        result['exit_code'] = exit_code or 'no report'
        return result
    result['ranks'] = [read_json(p) for p in paths]
    result.update(summarise(result['ranks'], n))
    print('{:.1f} s to the first step, {:.0f} MB'.format(result['total_s'], result['rss_mb']), flush=True)
    return result


def plan_pass(source, repeats):
    """In process: the trainer's per-epoch planning (data.plans.train_set's and eval_set's plan functions, as
    the Trainer builds them) over the records of `source`; median seconds of `repeats` epochs each."""
    import tensorflow.compat.v1 as tfv1
    from benchmarks.pipeline import trainer_settings
    from deepspeech_training import distributed
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.flags import create_flags
    from deepspeech_training.data.plans import eval_set, train_set
    tfv1.disable_eager_execution()
    create_flags()
    settings = trainer_settings({'b': 8})
    records = read_sources(source.split(','), settings.model.alphabet)
    dist = distributed.Single()
    plans = dict(train_plan_s=train_set(records, dist, settings.model, settings.training).plan,
                 eval_plan_s=eval_set('dev', records, settings.training.dev_batch_size, dist).plan)

    def seconds(plan, epoch):
        started = time.perf_counter()
        plan(epoch)
        return time.perf_counter() - started
    return dict(n=len(records), **{key: statistics.median(seconds(plan, epoch) for epoch in range(1, repeats + 1))
                                   for key, plan in plans.items()})


def index_bytes(files):
    """In process: bytes a sample of the sample index the trainer keeps of `files` (records.Columns and the
    sorted view's positions: what stays of reading the sources, against which the peak is compared)."""
    from deepspeech_training.data.samples import read_sources
    from deepspeech_training.util.text import load_alphabet
    records = read_sources(files.split(','), load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt')))
    return (records.columns.nbytes + records.positions.nbytes) / len(records)


def measured_index(n, source, args):
    """index_bytes() of the corpus of `n` samples as `source`, in a process of its own."""
    files = ','.join(os.path.join(args.work_dir, f) for f in scale_corpus.train_files(args.work_dir, source, n,
                                                                                      args.shard_size))
    output = subprocess.run([sys.executable, '-m', 'benchmarks.scale', '--index_pass', files], cwd=ROOT, check=True,
                            stdout=subprocess.PIPE, universal_newlines=True, timeout=args.timeout,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')).stdout
    return float(output.splitlines()[-1])


def timed_plans(n, args):
    """plan_pass() of the corpus of `n` samples in a process of its own (its records' memory goes with it)."""
    source = ','.join(os.path.join(args.work_dir, f)
                      for f in scale_corpus.train_files(args.work_dir, args.plan_source, n, args.shard_size))
    output = subprocess.run([sys.executable, '-m', 'benchmarks.scale', '--plan_pass', source], cwd=ROOT,
                            check=True, stdout=subprocess.PIPE, universal_newlines=True, timeout=args.timeout,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')).stdout
    result = json.loads(output.splitlines()[-1])
    print('planning n={}: train {:.2f} ms, eval {:.2f} ms per epoch'.format(n, 1e3 * result['train_plan_s'],
                                                                         1e3 * result['eval_plan_s']), flush=True)
    return result


def add_marginal_memory(rows):
    """rss_bytes_per_added_sample of each row: its RSS above that of the smallest corpus of the same
    configuration, per sample more. What a sample costs, without the ~0.6 GB every process starts with."""
    for row in rows:
        same = [r for r in rows if r['label'] == row['label'] and r.get('rss_mb') and r['n'] < row['n']]
        if same and row.get('rss_mb'):
            base = min(same, key=lambda r: r['n'])
            row['rss_bytes_per_added_sample'] = (row['rss_mb'] - base['rss_mb']) * 2 ** 20 / (row['n'] - base['n'])


def growth_exponent(points):
    """k of measure ~ n^k: the least-squares slope through (log n, log measure); None with fewer than two
    sizes or a measure that is not positive (nothing to fit)."""
    points = [(math.log(n), math.log(v)) for n, v in points if v is not None and v > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return (sum((x - mean_x) * (y - mean_y) for x, y in points)
            / sum((x - mean_x) ** 2 for x, _ in points))


def growth(rows, measures):
    """{label: {measure: k}} over the sizes measured of each configuration label."""
    fits = {}
    for label in dict.fromkeys(r['label'] for r in rows):
        same = [r for r in rows if r['label'] == label and r.get('exit_code', 0) == 0]
        fits[label] = {key: growth_exponent([(r['n'], r.get(key)) for r in same]) for key, _ in measures}
    return fits


def growth_table(fits, measures):
    """The k of each configuration and measure, as a table like the results'."""
    rows = [dict(label=label, **{key: k for key, k in ks.items()}) for label, ks in fits.items()]
    return table([dict(r, exit_code=0) for r in rows],
                                    [('growth k (measure ~ n^k)', 'label', '{}')]
                                    + [(name, key, '{:.2f}') for key, name in measures])


def parse_list(text, kind=str, choices=None):
    """'a,b' -> [kind(a), kind(b)], each checked against `choices`."""
    values = [kind(v.strip()) for v in text.split(',') if v.strip()]
    wrong = [v for v in values if choices and v not in choices]
    if wrong or not values:
        raise argparse.ArgumentTypeError('{!r}: choose from {}'.format(text, ', '.join(map(str, choices or []))))
    return values


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--sizes', default='10000,100000,1000000', type=lambda t: parse_list(t, int))
    parser.add_argument('--sources', default=','.join(scale_corpus.SOURCES),
                        type=lambda t: parse_list(t, str, scale_corpus.SOURCES))
    parser.add_argument('--storages', default='local', type=lambda t: parse_list(t, str, STORAGES))
    parser.add_argument('--np', default='1,2', type=lambda t: parse_list(t, int, (1, 2, 4, 8)))
    parser.add_argument('--starts', default='first,second', type=lambda t: parse_list(t, str, STARTS),
                        help='first: an empty --data_cache_dir; second: the one the first start filled')
    parser.add_argument('--work_dir', default='/work/scale-corpus', help='the corpora, made once, reused')
    parser.add_argument('--shard_size', type=int, default=10000, help='samples per tar shard')
    parser.add_argument('--voices', default=scale_corpus.make_speech_corpus.DEFAULT_VOICES,
                        type=lambda t: parse_list(t), help='espeak-ng voices of the pool (fewer: a smaller pool)')
    parser.add_argument('--out_dir', default='benchmark_scale_results')
    parser.add_argument('--rtt', type=float, default=2.0, help='ms of round trip added over sshfs')
    parser.add_argument('--n_hidden', type=int, default=16)
    parser.add_argument('--batch_size', type=int, default=8, help='per rank')
    parser.add_argument('--plan_source', default='sdb', choices=scale_corpus.SOURCES,
                        help='the corpus the in-process planning reads its records from')
    parser.add_argument('--plan_epochs', type=int, default=3, help='epochs planned (median) per size; 0: '
                        'no planning pass (at 1M it reads the records for minutes)')
    parser.add_argument('--timeout', type=float, default=3600, help='seconds before a run is killed')
    parser.add_argument('--plan_pass', help=argparse.SUPPRESS)     # internal: one size's planning, in process
    parser.add_argument('--index_pass', help=argparse.SUPPRESS)    # internal: one corpus's index, in process
    return parser.parse_args(argv)


def configurations(args):
    """(n, source, storage, np, start) to run, smallest corpus first, a first start before its second; no
    CSV over HTTP (it lists files)."""
    return [(n, source, storage, size, start) for n in sorted(args.sizes) for source in args.sources
            for storage in args.storages for size in args.np for start in args.starts
            if not (source == 'csv' and storage == 'http')]


def planning_lines(plans, fit, source):
    """The in-process planning times and their growth, as lines of the report (none without plans)."""
    if not plans:
        return []
    return (['per-epoch planning in process (data.plans.train_set / eval_set plans, records of {}):'.format(source)]
            + ['  n={}: train {:.2f} ms, eval {:.2f} ms'.format(p['n'], 1e3 * p['train_plan_s'], 1e3 * p['eval_plan_s'])
               for p in plans]
            + ['  growth k: ' + ', '.join('{} {}'.format(name, fmt(fit[key])) for key, name in PLAN_GROWTH), ''])


def write_report(args, rows, plans, disk, loads, started):
    """scale.txt and scale.json in --out_dir; returns the text printed."""
    add_marginal_memory(rows)
    fits = growth(rows, GROWTH)
    plan_fit = growth([dict(p, label='planning') for p in plans], PLAN_GROWTH).get('planning')
    footer = ('n_hidden {}, batch {} per rank, {} cores; corpus MB on disk: {}; load average {} before, {} after; '
              '{:.0f} s in all'.format(args.n_hidden, args.batch_size, os.cpu_count(), '; '.join(
                  '{}: {}'.format(n, ', '.join('{} {:.1f}'.format(s, b / 1e6) for s, b in d.items()))
                  for n, d in disk.items()), fmt(list(loads[0])), fmt(list(loads[1])), time.time() - started))
    text = '\n'.join([table(rows, COLUMNS), '', growth_table(fits, GROWTH), '']
                     + planning_lines(plans, plan_fit, args.plan_source) + [footer])
    report = dict(machine=dict(cpus=os.cpu_count(), load_average_before=loads[0], load_average_after=loads[1]),
                  settings={k: v for k, v in vars(args).items() if k not in ('plan_pass', 'index_pass')},
                  corpus=dict(work_dir=args.work_dir, bytes={str(n): d for n, d in disk.items()}),
                  results=rows, growth=fits, planning=dict(results=plans, growth=plan_fit),
                  total_s=time.time() - started)
    with open(os.path.join(args.out_dir, 'scale.json'), 'w') as out:
        json.dump(report, out, indent=2)
    with open(os.path.join(args.out_dir, 'scale.txt'), 'w') as out:
        out.write(text + '\n')
    return text


def main(argv=None):
    args = parse_args(argv)
    if args.plan_pass:
        print(json.dumps(plan_pass(args.plan_pass, args.plan_epochs)))
        return 0
    if args.index_pass:
        print(index_bytes(args.index_pass))
        return 0
    if 'sshfs' in args.storages:
        from tests.helpers import netns_sshfs
        reason = netns_sshfs.unavailable()
        if reason:
            sys.exit('error: the sshfs storage (sshfs between network namespaces): ' + reason)
    args.out_dir, args.work_dir = os.path.abspath(args.out_dir), os.path.abspath(args.work_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    started, load_before = time.time(), os.getloadavg()
    disk, dev_csv = scale_corpus.make_all(args.work_dir, args.sizes, sorted(set(args.sources) | {args.plan_source}),
                                          args.shard_size, args.voices)
    plans = [timed_plans(n, args) for n in sorted(args.sizes)] if args.plan_epochs else []
    with contextlib.ExitStack() as stack:
        storages = Storages(args.work_dir, args.out_dir, args.rtt, stack)
        rows = [measure(config, args, storages, dev_csv) for config in configurations(args)]
    indexes = {(n, source): measured_index(n, source, args) for n, source in {(r['n'], r['source']) for r in rows}}
    for row in rows:
        row['index_bytes'] = indexes[row['n'], row['source']]
    text = write_report(args, rows, plans, disk, (load_before, os.getloadavg()), started)
    print()
    print(text)
    return 0 if all(r['exit_code'] == 0 for r in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
