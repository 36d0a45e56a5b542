#!/usr/bin/env python3
"""Round-trip latency added to one TCP connection, where `tc netem` is missing (this kernel has none):
a relay between stdin/stdout and HOST:PORT that holds every chunk back for half the added round trip in
each direction, so a request and its answer arrive RTT_MS later than without it. Made to be ssh's
ProxyCommand (tests/helpers/netns_sshfs.py), which gives an sshfs mount a slower network.

    delay_relay.py RTT_MS HOST PORT              relay stdin/stdout <-> HOST:PORT
    delay_relay.py --echo HOST PORT              an echo server (what --ping measures against)
    delay_relay.py --ping RTT_MS HOST PORT       median round trip (ms) of 1-byte pings to an echo server,
                                                 through a relay of RTT_MS and through one of 0 ms
"""
import collections
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

CHUNK = 1 << 16
PINGS = 200


def delayed_pump(read, write, one_way_s, at_end):
    """Copy read() -> write() (b'' ends it), each chunk written one_way_s after it was read; at_end()
    after the last. A thread reads as soon as data comes, so the delay adds no queueing of its own."""
    queue, ready = collections.deque(), threading.Condition()

    def receive():
        while True:
            data = read()
            with ready:
                queue.append((time.monotonic() + one_way_s, data))
                ready.notify()
            if not data:
                return
    threading.Thread(target=receive, daemon=True).start()
    while True:
        with ready:
            while not queue:
                ready.wait()
            due, data = queue.popleft()
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        if not data:
            at_end()
            return
        write(data)


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def relay(rtt_ms, host, port):
    connection = socket.create_connection((host, port))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    one_way = rtt_ms / 2000.0
    # stdin's end is ssh's: it closes it when done, so the relay ends with it (waiting for the server to
    # close too would leave it, and ssh, behind whenever the server's host is gone first)
    upstream = threading.Thread(target=delayed_pump, daemon=True, args=(
        lambda: os.read(0, CHUNK), connection.sendall, one_way, lambda: os._exit(0)))
    upstream.start()
    delayed_pump(lambda: connection.recv(CHUNK), lambda data: write_all(1, data), one_way, lambda: None)


def echo(host, port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(8)
    print('ready', flush=True)
    while True:
        connection, _ = server.accept()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=lambda c=connection: [c.sendall(d) for d in iter(lambda: c.recv(CHUNK), b'')],
                         daemon=True).start()


def ping_ms(rtt_ms, host, port):
    """Median ms of PINGS 1-byte round trips through a relay of `rtt_ms`."""
    process = subprocess.Popen([sys.executable, os.path.abspath(__file__), str(rtt_ms), host, str(port)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    try:
        times = []
        for _ in range(PINGS + 10):     # the first ones open the connection
            started = time.perf_counter()
            process.stdin.write(b'x')
            assert process.stdout.read(1) == b'x'
            times.append((time.perf_counter() - started) * 1000.0)
        return statistics.median(times[10:])
    finally:
        process.kill()
        process.wait()


def main(argv):
    if len(argv) == 3 and argv[0] == '--echo':
        echo(argv[1], int(argv[2]))
    elif len(argv) == 4 and argv[0] == '--ping':
        rtt, host, port = float(argv[1]), argv[2], int(argv[3])
        print('{:.3f} {:.3f}'.format(ping_ms(rtt, host, port), ping_ms(0, host, port)))
    elif len(argv) == 3 and not argv[0].startswith('-'):
        relay(float(argv[0]), argv[1], int(argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main(sys.argv[1:])
