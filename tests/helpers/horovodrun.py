"""The horovodrun command line, for the tests and the benchmarks: this environment's horovodrun, Gloo unless
asked otherwise (with MPI installed horovodrun would pick mpirun), N ranks on localhost unless hosts are given."""
import os
import sys

HOROVODRUN = os.path.join(os.path.dirname(sys.executable), 'horovodrun')
# the same launcher without its per-launch Gloo build check (that file says why)
UNCHECKED = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'horovodrun_without_build_check', 'horovodrun')


def horovodrun(ranks, hosts=None, gloo=True, options=(), build_check=True):
    """`horovodrun [--gloo] [options] -np N [-H hosts]`, to be followed by the command of a rank. hosts:
    localhost:N if None, no -H if '' (elastic runs name a --host-discovery-script in options instead).
    Without build_check, tests/helpers/horovodrun_without_build_check/horovodrun: 2 s less a Gloo launch."""
    hosts = 'localhost:{}'.format(ranks) if hosts is None else hosts
    launcher = [HOROVODRUN] if build_check else [sys.executable, UNCHECKED]
    return (launcher + ['--gloo'] * gloo + [str(option) for option in options] + ['-np', str(ranks)]
            + (['-H', hosts] if hosts else []))
