"""The container index: the per-sample metadata of one sample database (.sdb) or tar shard (offsets,
lengths, sizes, transcripts, audio headers) as columns, read in a few read calls per container instead of
a few small reads per sample (a million samples on a cluster filesystem or over HTTP is otherwise hours
of round trips before the first step).

read_index() looks for the index in this order:
  1. a sidecar `<container>.index` beside it (bin/data_set_tool.py writes one with every container, and
     `--index_only` for containers that exist): one or two reads, or two HTTP requests;
  2. `<cache_dir>/<hash of the container's absolute path or URL>.index`, written by an earlier build;
  3. a build: one sequential pass over the container in reads of `scan_block` bytes, every sample's entry
     (or tar member) and audio header parsed in memory, with every check of the per-sample readers
     (sdb.Database.entry, tar_shards.scan), so a corrupt container fails with the same error.
An index is used only for the container it was built from: its size and a fingerprint (a hash of the
size, the first and last 64 KB and 4 KB at evenly spaced places in between: O(1) reads, see
fingerprint()) must match. A sidecar or cache file that is unreadable or belongs to another version of the
container is named in a warning and the index is built again.

Index file: MAGIC, then a numpy .npz (no pickle) of the columns below; ~40 bytes a sample before zip
compression, plus the transcripts.
"""
import hashlib
import io
import os
import time
from dataclasses import dataclass

import numpy as np
import soundfile

from . import byte_ranges, opus, sdb, tar_shards
from ..util.atomic import atomic_write
from ..util.logging import log_info, log_warn

MAGIC = b'DSINDEX1'
SIDECAR = '.index'
SCAN_BLOCK = 16 << 20              # the build pass's sequential reads (not --read_buffer, which bounds a batch's
                                   # random reads): few enough calls, little memory
EDGE_BYTES = 64 << 10              # the fingerprint's first and last bytes (an .sdb's meta data and its index)
PROBES, PROBE_BYTES = 14, 4 << 10  # and bytes in between, so a rewrite of the same size in the middle shows
WAV_HEADER_BYTES = 44              # an Opus sample's size is that of its PCM as a WAV file, comparable to a CSV's
CORRUPT_INDEX = 'the index is corrupt (write the file again, e.g. with bin/data_set_tool.py)'
COLUMNS = {'offsets': np.int64, 'lengths': np.int64, 'sizes': np.int64, 'sample_rates': np.int32,
           'channels': np.int32, 'frames': np.int64}


class IndexFileError(ValueError):
    """An index file that cannot be used; says why (it is then built again)."""


@dataclass
class ContainerIndex:
    """The columns of one .sdb file or tar shard; a sample's number is its position in each array."""
    container_size: int
    fingerprint: bytes           # fingerprint() of the container the index was built from
    audio_type: str              # sdb.WAV or sdb.OPUS (a tar shard: sdb.WAV, whatever its audio extension)
    labeled: bool
    offsets: np.ndarray          # int64: .sdb entry offset, or tar member data offset
    lengths: np.ndarray          # int64: bytes a batch reads (.sdb: the whole entry, its length field included)
    sizes: np.ndarray            # int64: the audio's size (Opus: its PCM's as a WAV file)
    transcripts: bytes           # UTF-8, concatenated (b'' when unlabeled)
    transcript_ends: np.ndarray  # int64 end of each transcript in `transcripts` (None when unlabeled)
    sample_rates: np.ndarray     # int32, the audio header's
    channels: np.ndarray         # int32
    frames: np.ndarray           # int64; -1 where the header cannot be read, and then ...
    header_errors: dict          # {sample number: why}, worded as validation.read_sample_header words it

    def __len__(self):
        return len(self.offsets)

    def transcript(self, number):
        """Sample `number`'s transcript (None when unlabeled)."""
        if self.transcript_ends is None:
            return None
        start = int(self.transcript_ends[number - 1]) if number else 0
        return self.transcripts[start:int(self.transcript_ends[number])].decode('utf-8')


def read_audio_header(audio_type, audio_file):
    """((sample rate, channels, frames), None) of a contained sample's audio (`audio_file`: a file object
    of just its bytes), or (None, what is wrong and how to fix it) in validation.read_sample_header's words,
    libsndfile's reason without the file object's repr (which names a memory address, no use to a user and
    different on every run). An OSError is left to the caller: it is not the sample's fault."""
    try:
        if audio_type == sdb.OPUS:
            pcm_length, rate, channels, width = opus.check_header(audio_file.read(opus.HEADER.size))
            return (rate, channels, pcm_length // (channels * width)), None
        info = soundfile.info(audio_file)
    except OSError:
        raise
    except (sdb.SdbError, tar_shards.ShardError, opus.OpusError) as error:
        return None, 'corrupt sample: {} (write the file again, e.g. with bin/data_set_tool.py)'.format(error)
    except Exception as error:  # noqa: BLE001 -- whatever libsndfile raises for bytes that are not a WAV
        reason = str(getattr(error, 'error_string', None) or error).strip().rstrip('.')
        return None, ('its audio is not a readable WAV file ({}): write the file again, e.g. with '
                      'bin/data_set_tool.py'.format(reason))
    return (int(info.samplerate), int(info.channels), int(info.frames)), None


def fingerprint(source):
    """A hash of the container's size, first and last EDGE_BYTES and PROBES × PROBE_BYTES spread evenly
    in between: a few reads whatever the container's size (neighbouring ranges share one), and it changes
    when the container is rewritten, even at the same size, unless every byte hashed stays the same (an
    .sdb's index and a shard's last members are in the last bytes)."""
    size = source.size
    step = max(1, (size - 2 * EDGE_BYTES) // (PROBES + 1))
    ranges = [(0, EDGE_BYTES), (max(0, size - EDGE_BYTES), EDGE_BYTES)]
    ranges += [(EDGE_BYTES + step * n, PROBE_BYTES) for n in range(1, PROBES + 1)]
    found = byte_ranges.read_ranges(source, [(o, min(n, size - o)) for o, n in ranges if o < size], EDGE_BYTES)
    digest = hashlib.sha256(str(size).encode())
    for offset in sorted(found):
        digest.update(found[offset])
    return digest.digest()


def identify(path):
    """(size, fingerprint()) of the container `path`: what an index must have been built from."""
    source = tar_shards.open_shard(path) if tar_shards.is_tar(path) else byte_ranges.open_source(path)
    try:
        return source.size, fingerprint(source)
    finally:
        source.close()


def read_index(path, cache_dir=None, scan_block=SCAN_BLOCK):
    """The ContainerIndex of the .sdb or tar shard `path` (a path or an http(s) URL): from its sidecar,
    else from `cache_dir`, else built in one pass of `scan_block`-byte reads (and then cached in
    `cache_dir` when given). Raises sdb.SdbError / tar_shards.ShardError for a corrupt container."""
    identity = identify(path)
    cached = cache_path(path, cache_dir) if cache_dir else None
    for index_path in filter(None, (path + SIDECAR, cached)):
        index = _load_checked(index_path, identity)
        if index is not None:
            return index
    index = build_index(path, identity, scan_block)
    if cached:
        _save_to_cache(index, cached)
    return index


def cache_path(path, cache_dir):
    """The cache file of a container: named by a hash of its absolute path or URL."""
    name = path if byte_ranges.is_url(path) else os.path.abspath(path)
    return os.path.join(cache_dir, hashlib.sha256(name.encode()).hexdigest()[:32] + SIDECAR)


def _load_checked(index_path, identity):
    """The index in `index_path` if it exists and belongs to the container of `identity` (size,
    fingerprint); None otherwise, with a warning naming the file and why when it exists but cannot be used."""
    try:
        index = decode(_read_whole(index_path))
        if (index.container_size, index.fingerprint) != identity:
            raise IndexFileError('it belongs to another version of the container (of {} bytes, now {}): the '
                                 'container was rewritten'.format(index.container_size, identity[0]))
    except (FileNotFoundError, byte_ranges.NotFound):
        return None
    except (IndexFileError, OSError) as error:
        log_warn('{}: not used, {}; indexing the container again (rewrite the sidecar with bin/data_set_tool.py '
                 '--index_only CONTAINER)'.format(index_path, error))
        return None
    return index


def _read_whole(path):
    """The bytes of a local file or URL, in one read (a URL: two requests, the first learns the size)."""
    source = byte_ranges.open_source(path)
    try:
        return source.pread(0, source.size)
    finally:
        source.close()


def encode(index):
    """The bytes of an index file: MAGIC + an .npz of the index's columns."""
    numbers = sorted(index.header_errors)
    columns = {name: np.asarray(getattr(index, name), dtype) for name, dtype in COLUMNS.items()}
    columns.update(container_size=np.int64(index.container_size),
                   fingerprint=np.frombuffer(index.fingerprint, np.uint8), audio_type=np.str_(index.audio_type),
                   labeled=np.bool_(index.labeled), transcripts=np.frombuffer(index.transcripts, np.uint8),
                   error_numbers=np.array(numbers, np.int64),
                   error_messages=np.array([index.header_errors[n] for n in numbers], dtype=str))
    if index.labeled:
        columns['transcript_ends'] = np.asarray(index.transcript_ends, np.int64)
    out = io.BytesIO()
    out.write(MAGIC)
    np.savez_compressed(out, **columns)
    return out.getvalue()


def decode(data):
    """The ContainerIndex of an index file's bytes; IndexFileError when they are not one, or not whole."""
    if not data.startswith(MAGIC):
        raise IndexFileError('not an index file (it does not start with {!r})'.format(MAGIC.decode()))
    try:
        with np.load(io.BytesIO(data[len(MAGIC):]), allow_pickle=False) as npz:
            columns = {name: npz[name] for name in npz.files}
        labeled = bool(columns['labeled'])
        index = ContainerIndex(
            container_size=int(columns['container_size']), fingerprint=columns['fingerprint'].tobytes(),
            audio_type=str(columns['audio_type']), labeled=labeled, transcripts=columns['transcripts'].tobytes(),
            transcript_ends=columns['transcript_ends'] if labeled else None,
            header_errors=dict(zip(columns['error_numbers'].tolist(), columns['error_messages'].tolist())),
            **{name: columns[name].astype(dtype, copy=False) for name, dtype in COLUMNS.items()})
    except Exception as error:  # noqa: BLE001 -- whatever damaged bytes make zipfile or np.load raise
        raise IndexFileError('unreadable ({}: {})'.format(type(error).__name__, error)) from None
    _check_shape(index)
    return index


def _check_shape(index):
    """IndexFileError unless the columns agree with each other (a file cut short, or damaged inside)."""
    count = len(index.offsets)
    lengths = {len(getattr(index, name)) for name in COLUMNS}
    if index.labeled:
        lengths.add(len(index.transcript_ends))
        ends = index.transcript_ends
        if count and (ends[-1] != len(index.transcripts) or np.any(np.diff(ends) < 0) or ends[0] < 0):
            raise IndexFileError('its transcripts do not add up')
    if lengths != {count} or index.audio_type not in sdb.AUDIO_TYPES:
        raise IndexFileError('its columns do not agree')


def write_index(index, index_path):
    """Write `index` to `index_path` whole or not at all (as every rank may, to one cache)."""
    with atomic_write(index_path, 'wb', shared=True) as out:
        out.write(encode(index))


def write_sidecar(path, scan_block=SCAN_BLOCK):
    """Build the index of the local container `path` and write it beside it (`<path>.index`); the index."""
    index = build_index(path, identify(path), scan_block)
    write_index(index, path + SIDECAR)
    return index


def _save_to_cache(index, cached):
    """Write a built index to the cache; a cache that cannot be written costs a warning, not the run."""
    try:
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        write_index(index, cached)
    except OSError as error:
        log_warn('{}: cannot write the container index cache ({}); the index is built again next time (check '
                 'the cache folder\'s permissions and free space)'.format(cached, error.strerror or error))


def build_index(path, identity, scan_block=SCAN_BLOCK):
    """The ContainerIndex of the container `path` of `identity` (identify()'s), built in one pass of
    `scan_block`-byte reads; logs how long it took."""
    started = time.time()
    build = _build_sdb if sdb.is_sdb(path) else _build_tar
    index = ContainerIndex(*identity, **build(path, scan_block))
    log_info('Indexed {}: {} samples in {:.1f} s'.format(path, len(index), time.time() - started))
    return index


def _build_sdb(path, scan_block):
    """The columns of a sample database: its index read once, then its entries in ascending offsets, which
    must follow each other without gap or overlap from the sample chunk's start to its end (as every writer
    lays them out: a damaged index could otherwise list one sample twice and lose another, silently)."""
    with sdb.Database(path) as database:
        scan = byte_ranges.Sequential(database.source, scan_block)
        samples = Columns(database.audio_type, database.labeled)
        offsets = np.array(database.offsets, np.int64)
        expected = database.first_entry
        for number in np.argsort(offsets, kind='stable').tolist():
            offset = database.offsets[number]
            _check_entry_start(database, number, offset, expected)
            entry = database.entry(offset, audio_bytes=opus.HEADER.size, source=scan)
            expected = offset + entry.size
            size = entry.audio_length
            if database.audio_type == sdb.OPUS:
                try:
                    size = opus.read_header(entry.audio)[0] + WAV_HEADER_BYTES
                except opus.OpusError as error:
                    raise sdb.SdbError(path, offset, 'sample {}: {}'.format(number, error)) from None
            audio = byte_ranges.Window(scan, entry.audio_start, entry.audio_length)
            header = read_audio_header(database.audio_type, audio)
            samples.add(number, offset, entry.size, size, entry.transcript, header)
        if expected != database.index_start:
            raise sdb.SdbError(path, expected, 'bytes {} to {} of the sample chunk belong to no sample in the index: {}'
                               .format(expected, database.index_start, CORRUPT_INDEX))
        return samples.columns()


def _check_entry_start(database, number, offset, expected):
    """SdbError unless sample `number`'s entry starts at `expected`, where the entry before it ends."""
    if offset != expected:
        raise sdb.SdbError(database.path, database.offset_position(number),
                           'sample {} is at byte {}, but the entries before it end at byte {}: {}'
                           .format(number, offset, expected, CORRUPT_INDEX))


def _build_tar(path, scan_block):
    """The columns of a tar shard: its members in one pass, each audio header read as the pass meets it."""
    source = tar_shards.open_shard(path)
    try:
        found = tar_shards.scan(path, byte_ranges.Sequential(source, scan_block),
                                lambda audio: read_audio_header(sdb.WAV, audio))
    finally:
        source.close()
    samples = Columns(sdb.WAV, True)
    for number, (_, offset, size, transcript, header) in enumerate(found):
        samples.add(number, offset, size, size, transcript, header)
    return samples.columns()


class Columns:
    """Collects the samples of a build, in any order of sample numbers, into ContainerIndex columns."""

    def __init__(self, audio_type, labeled):
        self.audio_type, self.labeled, self.rows, self.header_errors = audio_type, labeled, {}, {}

    def add(self, number, offset, length, size, transcript, header):
        """Sample `number`: `header` is read_audio_header()'s answer."""
        values, error = header
        if error:
            self.header_errors[number] = error
        self.rows[number] = (offset, length, size) + (values or (0, 0, -1)), transcript

    def columns(self):
        """ContainerIndex's fields but the container's size and fingerprint."""
        rows = [self.rows[number] for number in range(len(self.rows))]
        table = np.array([numbers for numbers, _ in rows], np.int64).reshape(len(rows), 6)
        texts = [transcript.encode('utf-8') for _, transcript in rows] if self.labeled else []
        fields = {name: table[:, n].astype(dtype) for n, (name, dtype) in enumerate(COLUMNS.items())}
        return dict(fields, audio_type=self.audio_type, labeled=self.labeled, transcripts=b''.join(texts),
                    transcript_ends=np.cumsum([len(t) for t in texts], dtype=np.int64) if self.labeled else None,
                    header_errors=self.header_errors)
