"""Audio headers of files for the validation pass (validation.py): read, or remembered from an earlier run
(HeaderCache). (Of samples in a .sdb or tar shard the container index has them: container_index.py.)

A plain PCM WAV file's header is parsed here (`wav_header`): at a million files soundfile.info costs
~29 us a file (29 s of start-up) and the standard library's `wave` ~17 us, a RIFF walk over the first
4 KB read with os.read ~4 us (benchmarks/scale.py). Anything else (other encodings, FLAC, a header
this walk does not follow) goes to soundfile.info, which decides as before.
"""
import fnmatch
import hashlib
import os
import struct
from dataclasses import dataclass

import numpy as np
import soundfile

from ..util.atomic import atomic_write
from ..util.logging import log_warn

# Problem kinds, as counted in the --skip_invalid_samples summary.
MISSING = 'missing file'
UNREADABLE = 'unreadable file'
EMPTY = 'empty audio'
NOT_AUDIO = 'corrupt or not a WAV file'
TRUNCATED = 'audio file cut short'

HEAD_BYTES = 4096       # a WAV file's fmt and data chunks sit in its first bytes (unless a big LIST precedes them)
RIFF = struct.Struct('<4sI4s')
CHUNK = struct.Struct('<4sI')
FMT = struct.Struct('<HHIIHH')
PCM = 1
STREAMED = 0x7FFF0000     # a data chunk size this large is a placeholder of a writer that did not know the length


@dataclass(frozen=True)
class Header:
    sample_rate: int
    channels: int
    frames: int


def wav_header(data, file_size):
    """The Header of a plain PCM WAV file from its first bytes `data`, None for anything else, or a
    (TRUNCATED, what and fix) pair for a file that holds fewer frames than its data chunk announces (a copy
    cut short: libsndfile reads what is there without a word, and training would pair half the audio with
    the whole transcript)."""
    if len(data) < RIFF.size or RIFF.unpack_from(data)[0::2] != (b'RIFF', b'WAVE'):
        return None
    position, fmt = RIFF.size, None
    while position + CHUNK.size <= len(data):
        kind, size = CHUNK.unpack_from(data, position)
        body = position + CHUNK.size
        if kind == b'fmt ':
            if size < FMT.size or body + FMT.size > len(data):
                return None
            tag, channels, rate, _, block_align, bits = FMT.unpack_from(data, body)
            if tag != PCM or not channels or block_align != channels * (bits // 8) or bits not in (8, 16, 24, 32):
                return None
            fmt = rate, channels, block_align
        elif kind == b'data':
            if fmt is None:
                return None
            rate, channels, block_align = fmt
            present = max(0, min(size, file_size - body)) // block_align
            if size // block_align > present and size < STREAMED:
                return TRUNCATED, ('the file is cut short: its header announces {:.2f} s of audio, its {} bytes hold '
                                   '{:.2f} s (copy it again from its source, or remove the row)'
                                   .format(size // block_align / rate, file_size, present / rate))
            return Header(rate, channels, present)
        position = body + size + (size & 1)
    return None


def stamp(stat):
    """What says a file is unchanged: size, modification and change times (a write or a rename changes the
    change time). Not the inode: FUSE mounts (sshfs) number inodes anew on every mount."""
    return stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def read_header(path):
    """(stamp, header) of an audio file: its stamp (None if it cannot be opened) and its Header, or a
    (kind, what is wrong and how to fix it) pair."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None, (MISSING, 'audio file not found (paths in a CSV are relative to the CSV\'s folder)')
    except OSError as error:
        return None, (UNREADABLE, 'cannot read the audio file: {} (check its permissions)'
                      .format(error.strerror or error))
    try:
        info = os.fstat(fd)
        if not os.path.isfile(path):
            return None, (MISSING, 'not a file (wav_filename must name an audio file)')
        if info.st_size == 0:
            return stamp(info), (EMPTY, 'the audio file is empty (0 bytes): re-create it, or remove the row')
        header = wav_header(os.read(fd, HEAD_BYTES), info.st_size)
    except OSError as error:
        return None, (UNREADABLE, 'cannot read the audio file: {} (check its permissions)'
                      .format(error.strerror or error))
    finally:
        os.close(fd)
    return stamp(info), header or _soundfile_header(path)


def _soundfile_header(path):
    try:
        info = soundfile.info(path)
    except Exception as error:  # noqa: BLE001 -- LibsndfileError, RuntimeError, and whatever a bad file raises
        reason = str(getattr(error, 'error_string', None) or error).strip().rstrip('.')
        return NOT_AUDIO, ('not a readable audio file ({}); expected a 16-bit PCM mono WAV file (re-encode it, '
                           'e.g. sox in.wav -b 16 -c 1 -r 16000 out.wav, or remove the row)'.format(reason))
    return Header(int(info.samplerate), int(info.channels), int(info.frames))


def path_key(path):
    """A 64-bit key of an audio path (str, or bytes in UTF-8), the same in every process (Python's hash() is
    salted per process). Two paths of a million share a key with a chance of ~3e-8."""
    data = path if isinstance(path, bytes) else path.encode('utf-8', 'surrogateescape')
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), 'little')


STAMP_FIELDS = ('size', 'mtime_ns', 'ctime_ns')
HEADER_FIELDS = ('sample_rate', 'channels', 'frames')


class HeaderCache:
    """The headers of a CSV's audio files as earlier runs read them, so a second run of a large corpus
    stats its files instead of reading them. In `cache_dir` (--data_cache_dir), per CSV, one file per rank
    that read headers (`headers-<hash of the CSV's path>.<rank>.npz`: each rank writes what it read itself,
    nothing is gathered), and every rank looks up all of them. An entry counts only while the file's stamp
    (size, mtime, ctime) is unchanged, so a changed or replaced file is read again. A cache file that
    cannot be read is ignored with a warning (and rewritten)."""

    def __init__(self, cache_dir, sources, rank=0):
        self.cache_dir, self.rank, self.own = cache_dir, rank, {}
        tables = [table for source in sources for table in self._load_all(source)]
        self.table = _merge(tables)

    def path(self, source, rank):
        name = hashlib.blake2b(os.path.abspath(source).encode('utf-8', 'surrogateescape'), digest_size=12).hexdigest()
        return os.path.join(self.cache_dir, 'headers-{}.{}.npz'.format(name, rank))

    def _load_all(self, source):
        """The tables of `source` written by any rank; this rank's own kept for save()."""
        pattern = os.path.basename(self.path(source, '*'))
        names = fnmatch.filter(os.listdir(self.cache_dir), pattern) if os.path.isdir(self.cache_dir) else []
        tables = []
        for name in sorted(names):
            table = self._load(os.path.join(self.cache_dir, name))
            if table is not None:
                tables.append(table)
                if name == os.path.basename(self.path(source, self.rank)):
                    self.own[source] = table
        return tables

    @staticmethod
    def _load(path):
        try:
            with np.load(path, allow_pickle=False) as data:
                return {name: data[name] for name in ('keys',) + STAMP_FIELDS + HEADER_FIELDS}
        except Exception as error:  # noqa: BLE001 -- whatever a damaged file makes np.load raise
            log_warn('Ignoring the audio header cache {} ({}: {}); the headers are read again and the file '
                     'rewritten'.format(path, type(error).__name__, error))
            return None

    def lookup(self, keys, stamps):
        """(hit, sample rates, channels, frames) of `keys` with `stamps` [n, 3]: hit False where unknown or changed."""
        table, n = self.table, len(keys)
        if not len(table['keys']):
            return np.zeros(n, bool), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        found = np.minimum(np.searchsorted(table['keys'], keys), len(table['keys']) - 1)
        hit = table['keys'][found] == keys
        for column, name in enumerate(STAMP_FIELDS):
            hit &= table[name][found] == stamps[:, column]
        return (hit,) + tuple(table[name][found] for name in HEADER_FIELDS)

    def save(self, source, keys, stamps, headers):
        """Add to this rank's cache file of `source` its files' `keys` with their `stamps` [n, 3] and `headers`
        [n, 3] (sample rate, channels, frames) just read."""
        table = {'keys': np.asarray(keys, np.uint64)}
        table.update((name, stamps[:, column]) for column, name in enumerate(STAMP_FIELDS))
        table.update((name, headers[:, column]) for column, name in enumerate(HEADER_FIELDS))
        table = _merge([self.own[source], table] if source in self.own else [table])
        path = self.path(source, self.rank)
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
            with atomic_write(path, 'wb', shared=True) as file:
                np.savez(file, **table)
        except OSError as error:
            log_warn('Cannot write the audio header cache {} ({}); the next run reads the headers again (set '
                     '--data_cache_dir to a writable folder, or to "" for none)'.format(path, error))


def _merge(tables):
    """One table of entries sorted by key (the last of equal keys kept), from several."""
    names = ('keys',) + STAMP_FIELDS + HEADER_FIELDS
    if not tables:
        return {name: np.zeros(0, np.uint64 if name == 'keys' else np.int64) for name in names}
    merged = {name: np.concatenate([t[name] for t in tables]) for name in names}
    order = np.argsort(merged['keys'], kind='stable')
    keys = merged['keys'][order]
    last = np.append(keys[1:] != keys[:-1], True)
    return {name: merged[name][order][last] for name in names}
