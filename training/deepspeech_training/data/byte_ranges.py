"""Byte ranges of a container (.sdb file, tar shard) on a local or networked filesystem, or on an HTTP(S)
server: what lets a rank read only its own samples of one big file.

Reads are positioned (os.pread, or an HTTP Range request), so there is no shared file position and one
open source serves every reader thread. A batch's samples are read in ascending offset order with
neighbours merged into one read of at most --read_buffer bytes, so on a networked filesystem a batch
costs a round trip or two instead of one per sample, and no byte of another rank's samples is read.
`Window` makes one sample's audio a file object of its own, so a header check reads just the header.
`Sequential` reads a whole container front to back in a few large reads, for building its index in one
pass (container_index.py) instead of a small read per sample.
"""
import io
import os
import urllib.error
import urllib.request

MERGE_GAP = 1024        # ranges this close are read in one go (a tar member's header sits between two samples)
HTTP_TIMEOUT = 60
DEFAULT_READ_BUFFER = 1 << 20   # --read_buffer's default (DeepSpeech 0.9's 1MB): the largest merged read


def is_url(path):
    return path.lower().startswith(('http://', 'https://'))


class RangeError(OSError):
    """A source that cannot serve byte ranges; the message says what the server did and what is needed."""


class NotFound(RangeError):
    """A URL the server does not have (HTTP 404): for an optional file (a sidecar index) no error at all."""


class LocalFile:
    """A file opened for positioned reads (a local or networked filesystem)."""

    def __init__(self, path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def pread(self, offset, size):
        """Up to `size` bytes at `offset` (fewer only at the end of the file)."""
        parts = []
        while size > 0:
            data = os.pread(self.fd, size, offset)
            if not data:
                break
            parts.append(data)
            offset, size = offset + len(data), size - len(data)
        return b''.join(parts)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class HttpFile:
    """A file on an HTTP(S) server that answers Range requests (object stores, nginx and Apache do); its
    size comes from the first range's Content-Range."""

    def __init__(self, url, timeout=HTTP_TIMEOUT):
        self.path, self.timeout, self.size = url, timeout, None
        self.size = self._range(0, 0)[1]

    def _range(self, first, last):
        """(bytes first..last, the file's size)."""
        request = urllib.request.Request(self.path, headers={'Range': 'bytes={}-{}'.format(first, last)})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                content_range = response.headers.get('Content-Range', '')
                if response.status != 206 or '/' not in content_range:
                    raise RangeError('{}: the server answered a Range request with status {} and the whole file: '
                                     'shards over HTTP are read by byte ranges, serve them from a server that '
                                     'supports Range requests (nginx, Apache, an object store), or copy them to '
                                     'a filesystem'.format(self.path, response.status))
                return response.read(), int(content_range.rsplit('/', 1)[1])
        except urllib.error.HTTPError as error:
            kind = NotFound if error.code == 404 else RangeError
            raise kind('{}: HTTP error {} ({})'.format(self.path, error.code, error.reason)) from None
        except urllib.error.URLError as error:
            raise RangeError('{}: cannot reach the server ({})'.format(self.path, error.reason)) from None

    def pread(self, offset, size):
        if self.size is not None:
            size = min(size, self.size - offset)
        return self._range(offset, offset + size - 1)[0] if size > 0 else b''

    def close(self):
        pass


def open_source(path):
    return HttpFile(path) if is_url(path) else LocalFile(path)


class InMemory:
    """Bytes already read (`data`, from byte `start` of a file on) as a source, for code written for one."""

    def __init__(self, data, start=0):
        self.data, self.start = data, start
        self.size = start + len(data)

    def covers(self, offset, end):
        return self.start <= offset and end <= self.size

    def pread(self, offset, size):
        return self.data[offset - self.start:offset - self.start + size]


class Sequential:
    """A source read front to back in reads of `block` bytes (one pass over a container: a handful of
    large reads instead of one small read per sample); pread() at a lower offset than an earlier one
    costs a read of its own, so read in ascending order. Reads the bytes of a pread() that spans more
    than a block in one go."""

    def __init__(self, source, block):
        self.source, self.block, self.size = source, block, source.size
        self.buffer = InMemory(b'')

    def pread(self, offset, size):
        end = min(offset + size, self.size)
        if not self.buffer.covers(offset, end):
            self.buffer = self._fill(offset, end)
        return self.buffer.pread(offset, size)

    def _fill(self, offset, end):
        """A buffer from `offset` on that reaches `end`: the rest of the current one and the next block."""
        kept = self.buffer.pread(offset, self.buffer.size - offset) if self.buffer.covers(offset, offset) else b''
        start = offset + len(kept)
        return InMemory(kept + self.source.pread(start, max(self.block, end - start)), offset)


def read_ranges(source, ranges, limit):
    """{offset: bytes} of `ranges` [(offset, length)], read in ascending offset order; ranges at most
    MERGE_GAP apart share one read of up to `limit` bytes (a longer range is read alone, whole)."""
    found, group = {}, []

    def flush():
        if group:
            start, end = group[0][0], max(offset + length for offset, length in group)
            data = source.pread(start, end - start)
            for offset, length in group:
                found[offset] = data[offset - start:offset - start + length]
            group.clear()
    for offset, length in sorted(set(ranges)):
        if group and (offset - max(o + n for o, n in group) > MERGE_GAP or offset + length - group[0][0] > limit):
            flush()
        group.append((offset, length))
    flush()
    return found


class Window(io.RawIOBase):
    """Bytes `start` .. `start + length` of a source as a seekable file object, read only where read."""

    def __init__(self, source, start=0, length=None):
        super().__init__()
        self.source, self.start, self.position = source, start, 0
        self.length = source.size - start if length is None else length

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.position

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer):
        size = min(len(buffer), self.length - self.position)
        if size <= 0:
            return 0
        data = self.source.pread(self.start + self.position, size)
        buffer[:len(data)] = data
        self.position += len(data)
        return len(data)
