"""A networked filesystem on one machine: a folder served by sshd on the network-namespace host hostB
(netns_hosts.py), mounted with sshfs (FUSE) here, its ssh client running on hostA, so every read
crosses the veth link between the two, through delay_relay.py for added round-trip latency.

sshfs runs in this (the root) namespace, so the mount is seen by every process here (a mount made
under `ip netns exec` would stay in that command's own mount namespace); its ssh command is a small
script that runs ssh on hostA, with `delay_relay.py RTT hostB 22` as ProxyCommand. Page cache: sshfs
does not keep file data across opens (no kernel_cache), as NFS's close-to-open consistency; a fresh
mount starts cold. Used by benchmarks/storage.py and its smoke test (root, /dev/fuse, sshfs and
openssh-server needed: see unavailable()).
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time

from tests.helpers import netns_hosts

HELPERS = os.path.dirname(os.path.abspath(__file__))
RELAY = os.path.join(HELPERS, 'delay_relay.py')
SERVER, CLIENT = 'hostB', 'hostA'
SSH_PORT = 22
ECHO_PORT = 5207
SSHD_CONFIG = '''Port {port}
ListenAddress {address}
HostKey {dir}/host_key
AuthorizedKeysFile {dir}/client_key.pub
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile {dir}/sshd.pid
Subsystem sftp internal-sftp
'''
SSH_COMMAND = '''#!/bin/sh
# ssh as sshfs calls it, run on {client}, through a relay adding {rtt} ms of round trip; its pid (the
# same through both execs) in {pid_file}: ssh outlives an unmount, so the mount's end stops it
echo $$ > {pid_file}
exec ip netns exec {client} ssh -i {dir}/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \\
    -o BatchMode=yes -o LogLevel=ERROR -o ProxyCommand="{python} {relay} {rtt} %h %p" "$@"
'''


def unavailable():
    """Why the mount cannot be made here (None if it can)."""
    reason = netns_hosts.unavailable()
    if reason:
        return reason
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse is missing (FUSE: run the container with --device /dev/fuse)'
    missing = [tool for tool in ('sshfs', 'ssh', 'ssh-keygen', 'fusermount3') if not shutil.which(tool)]
    if missing or not os.path.exists('/usr/sbin/sshd'):
        return '{} not found (apt-get install sshfs openssh-server)'.format(' '.join(missing) or 'sshd')
    return None


def wait_for_port(host_name, port, seconds=20):
    """Until something listens on `port` of namespace host `host_name` (probed from the other host)."""
    probe = 'import socket; socket.create_connection(("{}", {}), timeout=1).close()'.format(
        netns_hosts.HOSTS[host_name], port)
    deadline = time.time() + seconds
    while subprocess.run(netns_hosts.on_host(CLIENT, [sys.executable, '-c', probe]), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL).returncode:
        if time.time() > deadline:
            raise RuntimeError('nothing listens on {}:{} after {} s'.format(host_name, port, seconds))
        time.sleep(0.2)


class Server:
    """sshd (and an echo server, what added_rtt_ms pings) on hostB; `work_dir` holds keys and config."""

    def __init__(self, work_dir):
        self.dir = work_dir

    def mount(self, folder, mountpoint, rtt_ms):
        """sshfs of `folder` (served as itself: hostB shares this machine's files) at `mountpoint`, every
        round trip `rtt_ms` longer. A context manager; unmounted at its end."""
        return _mounted(self, folder, mountpoint, rtt_ms)

    def added_rtt_ms(self, rtt_ms):
        """(median round trip through a relay of rtt_ms, through one of 0 ms), hostA to hostB, in ms."""
        ping = netns_hosts.on_host(CLIENT, [sys.executable, RELAY, '--ping', rtt_ms, netns_hosts.HOSTS[SERVER],
                                            ECHO_PORT])
        with_delay, without = subprocess.run(ping, check=True, stdout=subprocess.PIPE,
                                             universal_newlines=True).stdout.split()
        return float(with_delay), float(without)


@contextlib.contextmanager
def ssh_server(work_dir):
    """hostA and hostB with sshd serving this machine's files on hostB, for the block."""
    os.makedirs(work_dir, exist_ok=True)
    for key in ('host_key', 'client_key'):
        if not os.path.exists(os.path.join(work_dir, key)):
            subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f', os.path.join(work_dir, key)],
                           check=True)
    with open(os.path.join(work_dir, 'sshd_config'), 'w') as config:
        config.write(SSHD_CONFIG.format(port=SSH_PORT, address=netns_hosts.HOSTS[SERVER], dir=work_dir))
    os.makedirs('/run/sshd', exist_ok=True)     # sshd's privilege separation directory
    with netns_hosts.two_hosts(), open(os.path.join(work_dir, 'server.log'), 'a') as log:
        daemons = [subprocess.Popen(netns_hosts.on_host(SERVER, command), stdout=subprocess.DEVNULL, stderr=log)
                   for command in (['/usr/sbin/sshd', '-D', '-e', '-f', os.path.join(work_dir, 'sshd_config')],
                                   [sys.executable, RELAY, '--echo', netns_hosts.HOSTS[SERVER], ECHO_PORT])]
        try:
            wait_for_port(SERVER, SSH_PORT)
            wait_for_port(SERVER, ECHO_PORT)
            yield Server(work_dir)
        finally:
            for daemon in daemons:
                daemon.kill()
                daemon.wait()


# An sshfs that reported its mount made is sometimes gone a moment later (1 mount in 8 on 2026-12-07, 8
# mounts in a row at 2 ms; the next mount of the same folder works): mount again, at most this many times.
MOUNT_ATTEMPTS = 3


@contextlib.contextmanager
def _mounted(server, folder, mountpoint, rtt_ms):
    command = os.path.join(server.dir, 'ssh_rtt{}'.format(rtt_ms))
    with open(command, 'w') as script:
        script.write(SSH_COMMAND.format(client=CLIENT, dir=server.dir, python=sys.executable, relay=RELAY, rtt=rtt_ms,
                                        pid_file=command + '.pid'))
    os.chmod(command, 0o755)
    os.makedirs(mountpoint, exist_ok=True)
    for _ in range(MOUNT_ATTEMPTS):
        subprocess.run(['sshfs', '-o', 'ssh_command=' + command, '{}:{}'.format(netns_hosts.HOSTS[SERVER], folder),
                        mountpoint], check=True, timeout=60)
        if _served(mountpoint, folder):
            break
        _unmount(mountpoint, command)
    else:
        raise RuntimeError('{}: sshfs of {} reported mounted {} times, but never listed the folder\'s files'
                           .format(mountpoint, folder, MOUNT_ATTEMPTS))
    try:
        yield mountpoint
    finally:
        _unmount(mountpoint, command)


def _unmount(mountpoint, command):
    for _ in range(50):     # busy for a moment after the last reader exits
        if not is_mounted(mountpoint) or \
                subprocess.run(['fusermount3', '-u', mountpoint], stderr=subprocess.DEVNULL).returncode == 0:
            break
        time.sleep(0.2)
    with contextlib.suppress(OSError, ValueError):     # its relay ends with it (stdin closed)
        with open(command + '.pid') as pid_file:
            os.kill(int(pid_file.read()), signal.SIGTERM)


def _served(mountpoint, folder, seconds=10):
    """Whether the mount lists what `folder` holds within `seconds` (a mount sshfs has just reported made can
    list nothing at first, or be gone)."""
    expected = set(os.listdir(folder))
    deadline = time.time() + seconds
    while time.time() < deadline:
        with contextlib.suppress(OSError):
            if is_mounted(mountpoint) and expected <= set(os.listdir(mountpoint)):
                return True
        time.sleep(0.1)
    return False


def is_mounted(path):
    with open('/proc/mounts') as mounts:
        return any(line.split()[1] == os.path.abspath(path) for line in mounts)
