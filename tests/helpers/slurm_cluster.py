#!/usr/bin/env python3
"""A two-node Slurm cluster on one machine: slurmctld and one slurmd in hostA, another slurmd in hostB
(the network-namespace hosts of netns_hosts.py), authenticated by one munged whose socket both reach
through the shared file system, which also serves as the cluster's shared checkpoint directory.

Each daemon runs in the foreground as a child of ours (so it is stopped by pid, never by name), in its
host's namespace with that host's hostname, as on two machines: a job step on hostB sees hostB's
network and name. Slurm's own commands reach slurmctld only from inside a namespace: `command()`.

Used by tests/test_slurm.py; by hand (as root), to try bin/slurm/train.sbatch (doc/SLURM.rst):

    python -m tests.helpers.slurm_cluster /tmp/cluster    # from the checkout; up until Ctrl-C; prints how to submit
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

from tests.helpers import netns_hosts

PROGRAMS = ('munged', 'mungekey', 'slurmctld', 'slurmd', 'sbatch', 'scontrol')
CONTROLLER = 'hostA'
# Node failure is noticed SlurmdTimeout after the last answer; slurmctld pings about every
# SlurmdTimeout / 3, but a ping of a dead slurmd retries the refused connection for MessageTimeout
# (default 10 s) before it counts, and the next ping waits for it. Measured with a dead slurmd
# (2026-12-06, SlurmctldDebug=debug2): its node DOWN and its job requeued 26.8 s after the kill with
# SlurmdTimeout=10 and the default MessageTimeout, 18.6 s with MessageTimeout=5, 14.3 s with both 5
# (SlurmdTimeout=5 alone: 26.1 s). 5 s is still far above any round trip on this machine under load.
SLURMD_TIMEOUT = 5
MESSAGE_TIMEOUT = 5

SLURM_CONF = """\
ClusterName=dstest
SlurmctldHost={controller}({controller_address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge/munge.socket
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
TmpFS={dir}/node_tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SchedulerType=sched/builtin
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
JobRequeue=1
ReturnToService=2
SlurmdTimeout={slurmd_timeout}
MessageTimeout={message_timeout}
InactiveLimit=0
KillWait=5
MinJobAge=600
{nodes}
PartitionName=test Nodes={node_names} Default=YES MaxTime=INFINITE State=UP
"""


def unavailable():
    """Why the cluster cannot run here (None if it can)."""
    missing = [name for name in PROGRAMS if not shutil.which(name) and not os.path.exists('/usr/sbin/' + name)]
    if missing:
        return 'Slurm/munge not installed ({} missing: apt-get install slurm-wlm munge)'.format(', '.join(missing))
    return netns_hosts.unavailable()


def _binary(name):
    return shutil.which(name) or '/usr/sbin/' + name


def write_config(directory):
    """slurm.conf for hostA and hostB (1 CPU each: one task a node) under `directory`; returns its path."""
    for sub in ['state', 'munge', 'node_tmp'] + [os.path.join('spool', host) for host in netns_hosts.HOSTS]:
        os.makedirs(os.path.join(directory, sub), exist_ok=True)
    nodes = ''.join('NodeName={} NodeAddr={} CPUs=1 State=UNKNOWN\n'.format(host, address)
                    for host, address in netns_hosts.HOSTS.items())
    path = os.path.join(directory, 'slurm.conf')
    with open(path, 'w') as conf:
        conf.write(SLURM_CONF.format(controller=CONTROLLER, controller_address=netns_hosts.HOSTS[CONTROLLER],
                                     dir=directory, slurmd_timeout=SLURMD_TIMEOUT, message_timeout=MESSAGE_TIMEOUT,
                                     nodes=nodes,
                                     node_names=','.join(netns_hosts.HOSTS)))
    return path


def on_host(host, command, setup=''):
    """`command` (a list) run in `host`'s namespace with `host` as its hostname, after the shell `setup`."""
    return ['ip', 'netns', 'exec', host, 'unshare', '--uts', 'sh', '-c', setup + 'hostname "$0" && exec "$@"',
            host] + [str(part) for part in command]


def node_mounts(directory, host):
    """Shell that makes, in a node's own mount table, what one machine has to itself and loses on a
    reboot: its TmpFS (PMIx puts per-step directories of fixed names there, which the other node's would
    clash with), its spool directory on a tmpfs (a node that died leaves the sockets of its steps there,
    which a requeued step of the same id cannot bind again), and the machine's cgroup v1 hierarchies,
    which slurmd initialises even with proctrack/linuxproc and task/none and which `ip netns exec`
    hides under a fresh /sys. (They go with the node's processes.)"""
    with open('/proc/self/mounts') as mounts:
        hierarchies = [(target, options) for _, target, kind, options, *_ in map(str.split, mounts)
                       if kind == 'cgroup' and target.startswith('/sys/fs/cgroup/')]
    return 'mount -t tmpfs node_tmp {} && mount -t tmpfs node_spool {} && mount -t tmpfs cgroup_root /sys/fs/cgroup && '.format(
        os.path.join(directory, 'node_tmp'), os.path.join(directory, 'spool', host)) + ''.join(
        'mkdir -p {0} && mount -t cgroup -o {1} cgroup {0} && '.format(target, options)
        for target, options in hierarchies)


class Cluster:
    """The daemons of one cluster under `directory`; `start()`, then `stop()` whatever happened."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.conf = write_config(self.directory)
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.daemons = {}     # name -> Popen

    def _start(self, name, command):
        log = open(os.path.join(self.directory, name + '.out'), 'ab')
        self.daemons[name] = subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)
        log.close()

    def start(self):
        munge = os.path.join(self.directory, 'munge')
        key = os.path.join(munge, 'munge.key')
        subprocess.run([_binary('mungekey'), '--create', '--keyfile', key], check=True)
        os.chmod(key, 0o400)
        # --force: as root, with a key and socket outside munge's own directories
        self._start('munged', [_binary('munged'), '--foreground', '--force', '--socket', os.path.join(munge, 'munge.socket'),
                               '--key-file', key, '--pid-file', os.path.join(munge, 'munged.pid'),
                               '--seed-file', os.path.join(munge, 'seed'), '--log-file', os.path.join(munge, 'log')])
        self._wait_for(lambda: os.path.exists(os.path.join(munge, 'munge.socket')), 'munged')
        self._start('slurmctld', on_host(CONTROLLER, [_binary('slurmctld'), '-D', '-i', '-f', self.conf]))
        for host in netns_hosts.HOSTS:
            self.start_slurmd(host)
        self._wait_for(lambda: self.idle_nodes() == len(netns_hosts.HOSTS), 'both nodes idle')
        return self

    def start_slurmd(self, host):
        self._start('slurmd-' + host, on_host(host, [_binary('slurmd'), '-D', '-N', host, '-f', self.conf],
                                              setup=node_mounts(self.directory, host)))

    def reboot_node(self, host):
        """A failed node back in service: what is left of its processes (job steps and tasks that outlived
        its slurmd, all started by us) is SIGKILLed, as a reboot would, and its slurmd started again.
        (Left alive, the old step would answer for the requeued job's step of the same id.)"""
        for pid in subprocess.run(['ip', 'netns', 'pids', host], stdout=subprocess.PIPE,
                                  universal_newlines=True).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        self.start_slurmd(host)

    def kill_slurmd(self, host):
        """The node's slurmd dies (SIGKILL): the steps it started run on until Slurm gives the node up."""
        daemon = self.daemons.pop('slurmd-' + host)
        daemon.kill()
        daemon.wait()

    def command(self, *args, env=None, cwd=None, timeout=60):
        """The output of a Slurm client command (sbatch, scontrol...) run on the controller's host, with
        `env` added to the cluster's environment (sbatch passes it on to the job)."""
        result = subprocess.run(on_host(CONTROLLER, args), env=dict(self.env, **(env or {})), cwd=cwd,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                                timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError('{} failed ({}): {}'.format(' '.join(map(str, args)), result.returncode, result.stdout))
        return result.stdout

    def idle_nodes(self):
        result = subprocess.run(on_host(CONTROLLER, ['sinfo', '-h', '-t', 'idle', '-o', '%D']), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
        return int(result.stdout.strip() or 0) if result.returncode == 0 else 0

    def job(self, job_id):
        """scontrol's fields of a job, e.g. job(5)['JobState'] == 'RUNNING', ['Restarts'] == '1'."""
        text = self.command('scontrol', '-o', 'show', 'job', job_id)
        return dict(field.split('=', 1) for field in text.split() if '=' in field)

    def _wait_for(self, condition, what, timeout=60):
        deadline = time.time() + timeout
        while not condition():
            for name, daemon in self.daemons.items():
                if daemon.poll() is not None:
                    raise RuntimeError('{} exited ({}) while waiting for {}: see {}'.format(
                        name, daemon.returncode, what, self.directory))
            if time.time() > deadline:
                raise RuntimeError('no {} within {} s: see {}'.format(what, timeout, self.directory))
            time.sleep(0.2)

    def stop(self):
        """Stop every daemon we started (by pid), slurmds first, munged last."""
        for name in sorted(self.daemons, key=lambda name: ('slurmd' not in name, name == 'munged')):
            daemon = self.daemons[name]
            if daemon.poll() is None:
                daemon.terminate()
                try:
                    daemon.wait(10)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait()
        self.daemons.clear()


@contextlib.contextmanager
def slurm_cluster(directory):
    """hostA and hostB with a running cluster for the duration of the block; everything removed after."""
    with netns_hosts.two_hosts():
        cluster = Cluster(directory)
        try:
            yield cluster.start()
        finally:
            cluster.stop()


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    reason = unavailable()
    if reason:
        sys.exit('error: ' + reason)
    for signum in (signal.SIGINT, signal.SIGTERM):     # also when started in the background (`&`)
        signal.signal(signum, signal.default_int_handler)
    with slurm_cluster(os.path.abspath(argv[1])) as cluster:
        print('cluster up: SLURM_CONF={} ip netns exec {} sbatch ... (Ctrl-C stops it)'.format(cluster.conf, CONTROLLER),
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == '__main__':
    main(sys.argv)
