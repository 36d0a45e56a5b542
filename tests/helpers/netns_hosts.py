#!/usr/bin/env python3
"""Two "hosts" on one machine: Linux network namespaces hostA and hostB joined by a veth pair.

A process in a namespace sees only that host's network: its loopback and one interface named
`mh0` on both sides (as two real machines both have eth0: horovodrun keeps the interfaces that
all hosts share, by name). /etc/netns/<host>/hosts, which `ip netns exec` mounts over /etc/hosts,
lets both names resolve inside both. The file system, CPUs and PIDs stay shared, so the same paths
work on both "hosts", as a multi-host job requires. `tests/helpers/netns_ssh/ssh` stands in for ssh between them.

Used by tests/test_multihost.py and benchmarks/network.py; by hand (as root):

    python tests/helpers/netns_hosts.py up      # create; then e.g. ip netns exec hostA horovodrun ...
    python tests/helpers/netns_hosts.py down    # remove
"""
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys

HELPERS = os.path.dirname(os.path.abspath(__file__))
SSH = os.path.join(HELPERS, 'netns_ssh', 'ssh')
HOSTS = {'hostA': '10.77.0.1', 'hostB': '10.77.0.2'}
INTERFACE = 'mh0'
PREFIX_LENGTH = 24
NETNS_ETC = '/etc/netns'
# held while the namespaces exist: a second user (another test run, the benchmark) waits for the first
LOCK = '/run/netns_hosts.lock'


def ip(*args, check=True):
    return subprocess.run(['ip'] + list(args), check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)


def unavailable():
    """Why two namespaces cannot be made here (None if they can)."""
    if os.geteuid() != 0:
        return 'network namespaces need root'
    if not shutil.which('ip') or not shutil.which('tc'):
        return 'ip / tc not found (apt-get install iproute2)'
    probe = 'netns_hosts_probe'
    made = ip('netns', 'add', probe, check=False)
    if made.returncode != 0:
        return 'ip netns add fails here: {}'.format(made.stderr.strip())
    ip('netns', 'del', probe, check=False)
    return None


def remove():
    """Delete both namespaces (their veth ends go with them) and their /etc/netns entries."""
    for host in HOSTS:
        ip('netns', 'del', host, check=False)
        shutil.rmtree(os.path.join(NETNS_ETC, host), ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(NETNS_ETC)   # only if nothing else of anyone's is in it


def create():
    """Make hostA and hostB (after removing any left over by a killed run)."""
    remove()
    (a, a_address), (b, b_address) = HOSTS.items()
    hosts_file = '127.0.0.1 localhost\n' + ''.join('{} {}\n'.format(addr, name) for name, addr in HOSTS.items())
    for host in HOSTS:
        ip('netns', 'add', host)
        os.makedirs(os.path.join(NETNS_ETC, host), exist_ok=True)
        with open(os.path.join(NETNS_ETC, host, 'hosts'), 'w') as out:
            out.write(hosts_file)
        ip('-n', host, 'link', 'set', 'lo', 'up')
    # the pair is made with distinct names in hostA, then one end moves to hostB and takes the common name
    ip('-n', a, 'link', 'add', INTERFACE, 'type', 'veth', 'peer', 'name', INTERFACE + 'b')
    ip('-n', a, 'link', 'set', INTERFACE + 'b', 'netns', b)
    ip('-n', b, 'link', 'set', INTERFACE + 'b', 'name', INTERFACE)
    for host, address in HOSTS.items():
        ip('-n', host, 'addr', 'add', '{}/{}'.format(address, PREFIX_LENGTH), 'dev', INTERFACE)
        ip('-n', host, 'link', 'set', INTERFACE, 'up')


def set_link(up):
    """Plug (True) or pull (False) the cable: hostA's end of the pair goes up or down."""
    ip('-n', next(iter(HOSTS)), 'link', 'set', INTERFACE, 'up' if up else 'down')


def bytes_sent():
    """Bytes hostA and hostB sent each other so far (both directions of the link)."""
    host = next(iter(HOSTS))
    stats = json.loads(ip('-n', host, '-s', '-j', 'link', 'show', INTERFACE).stdout)[0]['stats64']
    return stats['tx']['bytes'] + stats['rx']['bytes']


def shape(rate_mbit):
    """Limit each direction of the link to `rate_mbit` Mbit/s (tc tbf); None removes the limit."""
    for host in HOSTS:
        subprocess.run(['tc', '-n', host, 'qdisc', 'del', 'dev', INTERFACE, 'root'], stderr=subprocess.DEVNULL)
        if rate_mbit:
            # a 10 ms bucket (at least 64 KB, one GSO segment), up to 50 ms of queue before drops
            burst = max(rate_mbit * 1000000 // 8 // 100, 65536)
            subprocess.run(['tc', '-n', host, 'qdisc', 'add', 'dev', INTERFACE, 'root', 'tbf', 'rate',
                            '{}mbit'.format(rate_mbit), 'burst', str(burst), 'latency', '50ms'], check=True)


@contextlib.contextmanager
def two_hosts():
    """hostA and hostB for the duration of the block, removed afterwards whatever happens."""
    with open(LOCK, 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            create()
            yield HOSTS
        finally:
            remove()


def on_host(host, command):
    """`command` (a list) as run on `host`: through the ssh stand-in, as a remote rank is."""
    return [SSH, host, ' '.join(shlex.quote(str(part)) for part in command)]


def launcher_env():
    """What a launcher (horovodrun, mpirun) needs in its environment: `ssh` is tests/helpers/netns_ssh/ssh."""
    return {'PATH': os.path.dirname(SSH) + os.pathsep + os.environ.get('PATH', '')}


def main(argv):
    if len(argv) != 2 or argv[1] not in ('up', 'down'):
        sys.exit(__doc__)
    reason = unavailable()
    if reason:
        sys.exit('error: ' + reason)
    if argv[1] == 'up':
        create()
        print('hostA {} and hostB {} on {}; ssh stand-in: {}'.format(HOSTS['hostA'], HOSTS['hostB'], INTERFACE, SSH))
    else:
        remove()


if __name__ == '__main__':
    main(sys.argv)
