"""Files written whole or not at all."""
import contextlib
import os


@contextlib.contextmanager
def atomic_write(path, mode='w', durable=False, **open_args):
    """Open `path + '.tmp.<pid>'` for writing (two processes writing one file do not clash); when the block
    ends without an error it replaces `path` in one rename (atomic on POSIX: a crash leaves the old file or
    the new one, never half of one), else it is removed. `durable`: fsync before the rename, for a file that must survive a power loss (an index
    that points into data fsynced before it)."""
    temporary = '{}.tmp.{}'.format(path, os.getpid())
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
