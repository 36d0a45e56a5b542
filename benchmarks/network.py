#!/usr/bin/env python3
"""Training throughput of two ranks on two hosts linked at 10 and 1 Gbit/s, against loopback, in one run.

    python -m benchmarks.network            # as root: it makes network namespaces

The two hosts are network namespaces on this machine (tests/helpers/netns_hosts.py) joined by a veth pair; `tc
tbf` limits each direction of the link to the rate under test, and `horovodrun --gloo -H
hostA:1,hostB:1` runs one rank on each, launched from hostA through the ssh stand-in. The baseline is
`horovodrun --gloo -np 2 -H localhost:2` (loopback, no limit). Each configuration runs with and
without --horovod_fp16_compression, and one intra-op thread per rank everywhere, so the only
difference between two rows is the path the gradients take.

Each run is measured by benchmarks/training.py (step times from the trainer's step_loss events,
warm-up steps left out); the table gives samples/s, its ratio to loopback with the same compression,
the bytes that crossed the link during the run (all of it: the start-up broadcast of the variables
and their Adam slots too) and the TCP rate one stream reaches over the shaped link (2 s, measured
before the runs). Writes <out_dir>/benchmark_network.txt and .json. Default settings: about 6 minutes
on 2 cores. Both hosts share this machine's CPUs, so compute is slower than on two real machines
and the link costs are relatively smaller: the ratios are a lower bound on what a slower link loses
on real hosts only if their step is as slow as here.
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
from benchmarks.common import gloo_localhost_launch, table
from tests.helpers import netns_hosts
from tests.helpers.horovodrun import horovodrun

STREAM_PORT = 5201
# receives one TCP stream on hostA and prints the bytes it got and the seconds they took
STREAM_SINK = '''import socket, time
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", {port}))
server.listen(1)
print("ready", flush=True)
connection, _ = server.accept()
received, started = 0, time.time()
while True:
    data = connection.recv(1 << 20)
    if not data:
        break
    received += len(data)
print(received, time.time() - started)
'''
# sends for `seconds` from hostB
STREAM_SOURCE = '''import socket, time
connection = socket.create_connection(("hostA", {port}))
block, until = bytes(1 << 20), time.time() + {seconds}
while time.time() < until:
    connection.sendall(block)
connection.close()
'''


def two_hosts_launch(size, command):
    hosts = ','.join('{}:1'.format(host) for host in netns_hosts.HOSTS)
    return netns_hosts.on_host('hostA', horovodrun(size, hosts, options=['--disable-cache']) + command)


def stream_gbit_s(seconds=2.0):
    """The rate (Gbit/s) of one TCP stream from hostB to hostA over the link as it is shaped now."""
    sink = subprocess.Popen(netns_hosts.on_host('hostA', [sys.executable, '-c', STREAM_SINK.format(port=STREAM_PORT)]),
                            stdout=subprocess.PIPE, universal_newlines=True)
    try:
        assert sink.stdout.readline().strip() == 'ready'
        subprocess.run(netns_hosts.on_host('hostB', [sys.executable, '-c', STREAM_SOURCE.format(
            port=STREAM_PORT, seconds=seconds)]), check=True, timeout=seconds + 30)
        received, elapsed = sink.communicate(timeout=30)[0].split()
    finally:
        if sink.poll() is None:
            sink.kill()
    return int(received) * 8 / float(elapsed) / 1e9


def netem_works():
    """Whether `tc qdisc add ... netem` (delay, loss) works on this kernel; prints why not."""
    host = next(iter(netns_hosts.HOSTS))
    added = subprocess.run(['tc', '-n', host, 'qdisc', 'add', 'dev', netns_hosts.INTERFACE, 'root', 'netem',
                            'delay', '1ms'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if added.returncode:
        print('note: tc netem is not available here ({}): the link is rate-limited only, without added '
              'latency'.format(added.stdout.strip()), flush=True)
        return False
    netns_hosts.shape(None)
    return True


COLUMNS = [('configuration', 'label', '{}'), ('TCP Gbit/s', 'stream_gbit_s', '{:.2f}'),
           ('timed steps', 'timed_steps', '{:.0f}'), ('s/step', 'median_step_s', '{:.3f}'),
           ('samples/s', 'samples_per_s', '{:.3f}'), ('vs loopback', 'ratio', '{:.2f}x'),
           ('GB over link', 'link_gb', '{:.2f}'), ('1st step s', 'time_to_first_step_s', '{:.1f}'),
           ('RSS MB/rank', 'peak_rss_mb', '{:.0f}')]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--n_hidden', type=int, default=2048)
    parser.add_argument('--batch_size', type=int, default=1, help='per rank')
    parser.add_argument('--rates', default='10000,1000', help='link limits to measure, Mbit/s, comma-separated')
    parser.add_argument('--utterances', type=int, default=16, help='corpus size (about 80%% go to train.csv); '
                        'with 2 ranks x batch 1, one step per 2 train utterances')
    parser.add_argument('--corpus_dir', default=os.path.join(tempfile.gettempdir(), 'deepspeech_network_corpus'))
    parser.add_argument('--out_dir', default='benchmark_network_results')
    parser.add_argument('--repeats', type=int, default=1, help='runs per configuration (round robin)')
    parser.add_argument('--warmup_steps', type=int, default=2, help='first steps left out of the step times')
    parser.add_argument('--timeout', type=float, default=600, help='seconds before a run is killed')
    args = parser.parse_args(argv)
    args.epochs = 1   # what benchmark_training.run_config reads besides
    reason = netns_hosts.unavailable()
    if reason:
        sys.exit('error: two network-namespace hosts: ' + reason)
    args.out_dir = os.path.abspath(args.out_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    os.environ.update(netns_hosts.launcher_env())
    started = time.time()
    train_csv = benchmark_training.make_corpus(args.corpus_dir, args.utterances)
    records = benchmark_training.corpus_records(train_csv)
    rates = [int(rate) for rate in args.rates.split(',') if rate.strip()]
    links = [('loopback', None)] + [('{:g} Gbit/s'.format(rate / 1000), rate) for rate in rates]
    # one thread per rank on both layouts: localhost:2 would get one, hostA:1,hostB:1 two each (oversubscribed)
    model = dict(np='2', h=str(args.n_hidden), b=str(args.batch_size), intra_op_parallelism_threads='1',
                 inter_op_parallelism_threads='1')
    configs = [(link, rate, fp16) for link, rate in links for fp16 in (False, True)]
    runs = [[] for _ in configs]
    sent = [[] for _ in configs]
    with netns_hosts.two_hosts():
        netem = netem_works()
        stream = {}
        for link, rate in links[1:]:
            netns_hosts.shape(rate)
            stream[rate] = stream_gbit_s()
            print('{}: one TCP stream reaches {:.2f} Gbit/s'.format(link, stream[rate]), flush=True)
        for repeat in range(args.repeats):
            for i, (link, rate, fp16) in enumerate(configs):
                config = dict(model, horovod_fp16_compression=str(fp16).lower())
                netns_hosts.shape(rate)
                before = netns_hosts.bytes_sent()
                runs[i].append(benchmark_training.run_config(
                    i, repeat, config, train_csv, records, args,
                    launch=gloo_localhost_launch if rate is None else two_hosts_launch))
                sent[i].append(netns_hosts.bytes_sent() - before)
    results = []
    for (link, rate, fp16), config_runs, config_sent in zip(configs, runs, sent):
        result = benchmark_training.median_of_runs(config_runs)
        result.update(label='{} {}'.format(link, 'fp16' if fp16 else 'fp32'), link=link, link_mbit=rate, fp16=fp16,
                      stream_gbit_s=stream.get(rate), link_gb=None if rate is None else statistics.median(config_sent) / 1e9)
        results.append(result)
    for result in results:
        base = next(r for r in results if r['link_mbit'] is None and r['fp16'] == result['fp16'])
        if result.get('samples_per_s') and base.get('samples_per_s'):
            result['ratio'] = result['samples_per_s'] / base['samples_per_s']
    text = table(results, COLUMNS)
    report = dict(machine=dict(cpus=os.cpu_count(), load_average=os.getloadavg()), netem=netem,
                  settings=dict(vars(args)), command=sys.argv, results=results, total_s=time.time() - started)
    with open(os.path.join(args.out_dir, 'benchmark_network.json'), 'w') as out:
        json.dump(report, out, indent=2)
    with open(os.path.join(args.out_dir, 'benchmark_network.txt'), 'w') as out:
        out.write(text + '\n')
    print()
    print(text)
    print()
    print('n_hidden {}, batch {} per rank, {} train utterances, {} cores shared by both hosts; results in {} '
          '({:.0f} s in all)'.format(args.n_hidden, args.batch_size, len(records), os.cpu_count(), args.out_dir,
                                    report['total_s']))
    return 0 if all(r.get('exit_code') == 0 for r in results) else 1


if __name__ == '__main__':
    sys.exit(main())
