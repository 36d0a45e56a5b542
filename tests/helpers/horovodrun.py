"""The horovodrun command line, for the tests and the benchmarks: this environment's horovodrun, Gloo unless
asked otherwise (with MPI installed horovodrun would pick mpirun), N ranks on localhost unless hosts are given."""
import os
import sys

HOROVODRUN = os.path.join(os.path.dirname(sys.executable), 'horovodrun')


def horovodrun(ranks, hosts=None, gloo=True, options=()):
    """`horovodrun [--gloo] [options] -np N [-H hosts]`, to be followed by the command of a rank. hosts:
    localhost:N if None, no -H if '' (elastic runs name a --host-discovery-script in options instead)."""
    hosts = 'localhost:{}'.format(ranks) if hosts is None else hosts
    return ([HOROVODRUN] + ['--gloo'] * gloo + [str(option) for option in options] + ['-np', str(ranks)]
            + (['-H', hosts] if hosts else []))
