"""Files written whole or not at all."""
import contextlib
import os
import socket


@contextlib.contextmanager
def atomic_write(path, mode='w', durable=False, shared=False, **open_args):
    """Open `path + '.tmp'` for writing; when the block ends without an error it replaces `path` in one
    rename (atomic on POSIX: a crash leaves the old file or the new one, never half of one), else it is
    removed. `durable`: fsync before the rename, for a file that must survive a power loss (an index
    that points into data fsynced before it). `shared`: other processes, on this host or another, may
    write `path` at the same time (ranks filling one cache): the temporary is this process's own."""
    temporary = path + ('.{}.{}.tmp'.format(socket.gethostname(), os.getpid()) if shared else '.tmp')
    try:
        with open(temporary, mode, **open_args) as out:
            yield out
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
