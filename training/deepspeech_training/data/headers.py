"""Audio headers of files for the validation pass (validation.py): read, or remembered from an earlier run
(HeaderCache). (Of samples in a .sdb or tar shard the container index has them: container_index.py.)

A plain PCM WAV file's header is parsed here (`wav_header`): at a million files soundfile.info costs
~29 us a file (29 s of start-up) and the standard library's `wave` ~17 us, a RIFF walk over the first
4 KB read with os.read ~4 us (benchmarks/scale.py). Anything else (other encodings, FLAC, a header
this walk does not follow) goes to soundfile.info, which decides as before.
"""
import contextlib
import fnmatch
import hashlib
import os
import struct
import zipfile
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


HEADER_FIELDS = ('sample_rate', 'channels', 'frames')
# The columns of cache entries: a file's key, size, times (`times_digest`) and header, 30 bytes (a million
# entries: 30 MB per rank); a file of 4 GiB or more, or of 2^32 frames or more, is not cached (read each start).
ENTRY = {'keys': np.uint64, 'size': np.uint32, 'times': np.uint64, 'sample_rate': np.int32, 'channels': np.int16,
         'frames': np.uint32}
DIR_FIELDS = ('dir_keys', 'dir_mtime_ns', 'dir_ctime_ns')
STALE = 'stale'         # audio-headers-<hash>.stale: a file of the CSV changed in place since it was cached


def times_digest(mtimes_ns, ctimes_ns):
    """One 64-bit number of files' modification and change times (arrays; a change of either changes it but with
    a chance of 2^-64): 8 bytes a cache entry instead of 16."""
    mtimes, ctimes = np.asarray(mtimes_ns).astype(np.uint64), np.asarray(ctimes_ns).astype(np.uint64)
    return mtimes * np.uint64(0x9E3779B97F4A7C15) + ctimes


def dir_stamp(stat):
    """What says a folder's entries are unchanged: its modification and change times (an entry added, removed
    or renamed changes both; a file rewritten in place changes neither)."""
    return stat.st_mtime_ns, stat.st_ctime_ns


class HeaderCache:
    """The headers of a CSV's audio files as earlier runs read them, so a second run of a large corpus
    neither reads nor stats its files. In `cache_dir` (--data_cache_dir), per CSV, one file per rank that
    checked files (`audio-headers-<hash of the CSV's path>.<rank>.npz`; an earlier version's headers-*.npz are
    not read): each rank writes what it checked itself, nothing is gathered, and every rank looks up its share
    of all of them.

    Each file holds the entries (key, size, a digest of mtime and ctime, header) of the audio one rank checked
    in one run, and the stamp of every folder holding them, taken before the files were read. A later run trusts an
    entry without a stat while its folder's stamp is what every cache file recorded (no entry added, removed or
    renamed there since: `dir_stamp`); in any other folder it stats the file and trusts the entry only while
    the file's stamp is unchanged, else reads the header again. A file rewritten in place (same name, same
    folder) is not seen here: the reader checks every file it reads against its transcript
    (feeding.read_checked_audio), and a file found changed there marks the CSV's cache stale
    (`mark_stale`): the next run stats all its files. A cache file that cannot be read is ignored with a
    warning (and rewritten)."""

    def __init__(self, cache_dir, sources, rank=0, size=1):
        self.cache_dir, self.rank, self.size, self.sources = cache_dir, rank, size, sources
        self.stale = [source for source in sources if os.path.exists(self.path(source, STALE, ''))]
        self.recorded, self.tables = {}, []     # recorded: folder key -> stamp, None where cache files disagree
        self.own_dirs = {}      # source -> the folder stamps of this rank's own cache file
        for source in sources:
            self.tables += self._load_all(source)
        self.used = [np.zeros(len(table['keys']), bool) for table in self.tables]   # entries found valid this run
        self.dirs = {}          # folder (bytes) -> (key, stamp now, trusted), as first met this run
        self.new = []           # (source ids, or None for the one source, entries) of files read this run

    def path(self, source, rank, suffix='.npz'):
        return cache_path(self.cache_dir, source, rank, suffix)

    def _load_all(self, source):
        """The entries of `source` in this rank's share (key % size), written by any rank; their folders'
        stamps merged into `recorded`."""
        pattern = os.path.basename(self.path(source, '*'))
        names = fnmatch.filter(os.listdir(self.cache_dir), pattern) if os.path.isdir(self.cache_dir) else []
        tables = []
        for name in sorted(names):
            loaded = self._load(os.path.join(self.cache_dir, name))
            if loaded is None:
                continue
            table, dirs = loaded
            tables.append(_sorted(table))
            for key, stamp in dirs.items():
                self.recorded[key] = stamp if self.recorded.get(key, stamp) == stamp else None
            if name == os.path.basename(self.path(source, self.rank)):
                self.own_dirs[source] = dirs
        return tables

    def _load(self, path):
        try:
            with np.load(path, allow_pickle=False) as data:
                mine = data['keys'] % np.uint64(self.size) == self.rank
                table = {name: data[name][mine].astype(dtype, copy=False) for name, dtype in ENTRY.items()}
                dirs = ({} if DIR_FIELDS[0] not in data.files else
                        dict(zip(data[DIR_FIELDS[0]].tolist(), zip(*(data[name].tolist() for name in DIR_FIELDS[1:])))))
                return table, dirs
        except Exception as error:  # noqa: BLE001 -- whatever a damaged file makes np.load raise
            log_warn('Ignoring the audio header cache {} ({}: {}); the headers are read again and the file '
                     'rewritten'.format(path, type(error).__name__, error))
            return None

    def folder_trusted(self, folder):
        """Whether the entries of files in `folder` (bytes) hold without a stat: its stamp now (one stat, the
        first time a run meets it) is the one every cache file recorded, and no CSV's cache is stale."""
        if folder not in self.dirs:
            key = path_key(folder)
            try:
                now = dir_stamp(os.stat(folder or b'.'))
            except OSError:
                now = None
            self.dirs[folder] = key, now, not self.stale and now is not None and self.recorded.get(key) == now
        return self.dirs[folder][2]

    def lookup(self, keys):
        """(found, entries, places) of `keys`: where each is cached, its entry's columns there, and where in the
        cache files' tables it is (for use()). Of a key in two files, the later file's entry counts."""
        n = len(keys)
        found, places = np.zeros(n, bool), (np.zeros(n, np.int32), np.zeros(n, np.int64))
        entries = {name: np.zeros(n, dtype) for name, dtype in ENTRY.items()}
        for number in reversed(range(len(self.tables))):
            table_keys = self.tables[number]['keys']
            if not len(table_keys):
                continue
            rows = np.minimum(np.searchsorted(table_keys, keys), len(table_keys) - 1)
            hit = ~found & (table_keys[rows] == keys)
            found |= hit
            places[0][hit], places[1][hit] = number, rows[hit]
            for name, column in self.tables[number].items():
                entries[name][hit] = column[rows[hit]]
        return found, entries, places

    def use(self, places):
        """The entries at `places` (of lookup()) are valid this run: kept when the cache file is written."""
        numbers, rows = places
        for number in np.unique(numbers):
            self.used[number][rows[numbers == number]] = True

    def add(self, source_ids, keys, stamps, headers):
        """Files read this run: `stamps` [n, 3] (size, mtime, ctime), `headers` [n, 3] (rate, channels, frames)."""
        small = (stamps[:, 0] < 1 << 32) & (headers[:, 2] < 1 << 32)
        entries = dict(zip(HEADER_FIELDS, headers[small].T), keys=keys[small], size=stamps[small, 0],
                       times=times_digest(stamps[small, 1], stamps[small, 2]))
        self.new.append((source_ids[small] if len(self.sources) > 1 else None,
                         {name: entries[name].astype(dtype) for name, dtype in ENTRY.items()}))

    def save(self):
        """Write this rank's cache file of each source whose content changed: the entries this run found valid
        or read, the stamps of the folders this run met (taken before their files were read, so a folder changed
        during this run is not trusted by the next)."""
        dirs = {key: now for key, now, _ in self.dirs.values() if now is not None}
        for source_id, source in enumerate(self.sources):
            fresh = [entries if ids is None else _take(entries, ids == source_id) for ids, entries in self.new]
            if not any(len(part['keys']) for part in fresh) and self.own_dirs.get(source) == dirs \
                    and source not in self.stale:
                continue
            kept = [_take(table, used) for table, used in zip(self.tables, self.used)]
            self._write(source, kept + fresh, dirs)
            if self.rank == 0:      # the files of ranks a smaller run no longer has would hold stale folder stamps
                for name in fnmatch.filter(os.listdir(self.cache_dir), os.path.basename(self.path(source, '*'))):
                    rank = name.rsplit('.', 2)[1]
                    if rank.isdigit() and int(rank) >= self.size:
                        with contextlib.suppress(OSError):
                            os.remove(os.path.join(self.cache_dir, name))

    def _write(self, source, parts, dirs):
        """An .npz of the entries in `parts` (each sorted by key; the next load merges them), written part by
        part: np.savez would join a million entries in memory first."""
        path = self.path(source, self.rank)
        keys = sorted(dirs)
        # A rank whose share of the files was empty still writes its folders' stamps: empty entry columns.
        columns = {name: [part[name] for part in parts] or [np.empty(0, dtype)] for name, dtype in ENTRY.items()}
        columns.update((name, [np.array(values, np.uint64 if name == DIR_FIELDS[0] else np.int64)])
                       for name, values in zip(DIR_FIELDS, ([k for k in keys], [dirs[k][0] for k in keys],
                                                            [dirs[k][1] for k in keys])))
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
            with atomic_write(path, 'wb', shared=True) as file:
                _write_npz(file, columns)
        except OSError as error:
            log_warn('Cannot write the audio header cache {} ({}); the next run reads the headers again (set '
                     '--data_cache_dir to a writable folder, or to "" for none)'.format(path, error))

    def forget_stale(self):
        """After every rank stat'ed the files of the stale CSVs: their markers go (the chief's)."""
        for source in self.stale:
            with contextlib.suppress(OSError):
                os.remove(self.path(source, STALE, ''))


def mark_stale(cache_dir, source):
    """Say that a file of `source` changed in place since its header was cached: the next run stats them all."""
    if cache_dir:
        with contextlib.suppress(OSError):
            open(cache_path(cache_dir, source, STALE, ''), 'w').close()


def cache_path(cache_dir, source, rank, suffix='.npz'):
    name = hashlib.blake2b(os.path.abspath(source).encode('utf-8', 'surrogateescape'), digest_size=12).hexdigest()
    return os.path.join(cache_dir, 'audio-headers-{}.{}{}'.format(name, rank, suffix))


def _take(table, selection):
    return {name: column[selection] for name, column in table.items()}


def _write_npz(file, columns):
    """np.savez's format, of columns given as lists of parts, written a part at a time."""
    with zipfile.ZipFile(file, 'w', zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, parts in columns.items():
            with archive.open(name + '.npy', 'w', force_zip64=True) as member:
                np.lib.format.write_array_header_1_0(member, {
                    'descr': np.lib.format.dtype_to_descr(parts[0].dtype), 'fortran_order': False,
                    'shape': (sum(len(part) for part in parts),)})
                for part in parts:
                    member.write(np.ascontiguousarray(part).tobytes())


def _sorted(table):
    """`table` sorted by key, the last of equal keys kept (a file written in parts: the entries kept from the
    earlier file, then those read)."""
    keys = table['keys']
    if (keys[1:] > keys[:-1]).all():
        return table
    order = np.argsort(keys, kind='stable')
    keys = keys[order]
    return _take(table, order[np.append(keys[1:] != keys[:-1], True)])
