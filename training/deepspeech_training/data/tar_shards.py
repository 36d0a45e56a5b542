"""WebDataset-style tar shards as a source: samples `<key>.wav` + `<key>.txt` (the transcript, UTF-8)
side by side in uncompressed tar files (the audio may also be .flac, .ogg or .opus, as in Coqui STT's
shards: libsndfile decodes them), given as paths, http(s) URLs or as a pattern of shards
(`train-{000..009}.tar`, `shards/*.tar`). Like a sample database, a shard is one file; a sample's audio is
a byte range of it (byte_ranges.py: positioned reads, or HTTP Range requests), read without unpacking
anything.

The key of a member is its path up to the first dot of its file name (WebDataset's rule); members
with other extensions are ignored.
"""
import glob
import os
import re
import tarfile

from . import byte_ranges

EXTENSION = '.tar'
AUDIO_EXTENSIONS = ('wav', 'flac', 'ogg', 'opus')
BRACES = re.compile(r'\{(\d+)\.\.(\d+)\}')


class ShardError(ValueError):
    """A tar shard that cannot be used; names the file and, where known, the byte offset."""


def is_tar(path):
    return path.lower().endswith(EXTENSION)


def is_pattern(path):
    return bool(BRACES.search(path)) or (glob.has_magic(path) and not byte_ranges.is_url(path))


def expand(pattern):
    """The shard paths of `pattern`: `{000..009}` ranges (zero-padded as written) expanded in order, then
    glob wildcards (sorted). A plain path is itself."""
    match = BRACES.search(pattern)
    if match:
        first, last = match.group(1), match.group(2)
        width = len(first) if first.startswith('0') else 0
        return [path for number in range(int(first), int(last) + 1)
                for path in expand(pattern[:match.start()] + str(number).zfill(width) + pattern[match.end():])]
    if glob.has_magic(pattern) and not byte_ranges.is_url(pattern):
        return sorted(glob.glob(pattern))
    return [pattern]


def expand_all(paths):
    """`paths` with every pattern replaced by its shards; one that matches nothing stays as it is, to be
    reported missing."""
    return [shard for path in paths for shard in (expand(path) or [path])]


def split_key(name):
    """'dir/s001.wav' -> ('dir/s001', 'wav')."""
    folder, base = os.path.split(name)
    stem, _, extension = base.partition('.')
    return os.path.join(folder, stem), extension.lower()


def open_shard(path):
    """The byte_ranges source of a shard; ShardError where a URL cannot serve byte ranges."""
    try:
        return byte_ranges.open_source(path)
    except byte_ranges.RangeError as error:
        raise ShardError(str(error)) from None


def scan(path, source, inspect=None):
    """[(key, audio offset, audio size, transcript, inspect(audio file) or None)] of the shard `path` read
    through `source`, in the order of its audio members, read front to back (so a byte_ranges.Sequential
    source reads the shard in one pass; `inspect` gets each audio member as a byte_ranges.Window while its
    bytes are in that pass's buffer). Raises ShardError for a truncated or unreadable shard, unpaired keys
    and transcripts that are not UTF-8."""
    size = source.size
    audio, texts = {}, {}
    try:
        with tarfile.open(fileobj=byte_ranges.Window(source), mode='r:') as tar:
            for member in tar:
                key, extension = split_key(member.name)
                if not member.isfile() or extension not in AUDIO_EXTENSIONS + ('txt',):
                    continue
                if member.offset_data + member.size > size:
                    raise ShardError('{}: at byte {}: {} needs {} byte(s), the file ends at byte {} (truncated: '
                                     'copy or write it again)'.format(path, member.offset_data, member.name,
                                                                      member.size, size))
                if extension != 'txt':
                    if key in audio:
                        raise ShardError('{}: {}: two audio files for one key; a sample has one'.format(path, key))
                    window = byte_ranges.Window(source, member.offset_data, member.size)
                    audio[key] = (member.offset_data, member.size, inspect(window) if inspect else None)
                else:
                    texts[key] = _transcript(tar, member, path)
            _check_end(path, source, tar.offset, len(audio))
    except tarfile.TarError as error:
        raise ShardError('{}: not a readable tar file ({}); shards are uncompressed tar files'
                         .format(path, error)) from None
    except byte_ranges.RangeError as error:
        raise ShardError(str(error)) from None
    unpaired = sorted(set(audio) ^ set(texts))
    if unpaired:
        key = unpaired[0]
        what = 'audio without a .txt' if key in audio else 'a .txt without audio'
        raise ShardError('{}: {}: {} ({} unpaired key(s)); each sample is <key>.wav (or .flac, .ogg, .opus) and '
                         '<key>.txt'.format(path, key, what, len(unpaired)))
    return [(key, offset, length, texts[key], inspected) for key, (offset, length, inspected) in audio.items()]


def _check_end(path, source, offset, n_audio):
    """ShardError unless the members end with tar's end-of-archive block (zeros) at `offset`: a shard cut
    between two members, or damaged in a header, reads as a shorter shard (tarfile stops there silently)."""
    block = source.pread(offset, tarfile.BLOCKSIZE)
    if block != bytes(tarfile.BLOCKSIZE):
        raise ShardError('{}: at byte {}: {} after {} sample(s), where a tar header or the end of the archive '
                         'must be (truncated or damaged: copy or write it again)'.format(
                             path, offset, 'the file ends' if len(block) < tarfile.BLOCKSIZE else 'unreadable bytes',
                             n_audio))


def _transcript(tar, member, path):
    try:
        return tar.extractfile(member).read().decode('utf-8').strip()
    except UnicodeDecodeError as error:
        raise ShardError('{}: at byte {}: {} is not UTF-8 ({})'.format(path, member.offset_data, member.name,
                                                                       error)) from None


class Shard:
    """A shard opened for reading sample audio by byte range; one serves several threads."""

    def __init__(self, path):
        self.path, self.source = path, byte_ranges.open_source(path)

    def read(self, offset, size, data=None):
        """The `size` bytes at `offset` (`data`: they were read already, check them)."""
        data = self.source.pread(offset, size) if data is None else data
        if len(data) < size:
            raise ShardError('{}: at byte {}: {} byte(s) of audio expected, the file ends after {}'
                             .format(self.path, offset, size, len(data)))
        return data

    def audio_file(self, offset, size):
        return byte_ranges.Window(self.source, offset, size)

    def close(self):
        self.source.close()
