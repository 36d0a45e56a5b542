"""DeepSpeech 0.9 / Coqui STT sample databases (.sdb): one file of many samples, read by byte ranges
(byte_ranges.py), so a corpus on a networked filesystem costs a few large reads a batch instead of a
round trip per WAV file, and each rank reads only its own samples.

Layout (all integers big-endian, as DeepSpeech 0.9's util/sample_collections.py DirectSDBWriter/SDB):
  b'SAMPLEDB'
  meta length (8) + meta JSON {"schema": [{"content": "speech", "mime-type": AUDIO}, {"content":
      "transcript", "mime-type": "text/plain"}]} (no transcript column in an unlabeled database)
  sample chunk: its length (8; counts the sample count and the entries), sample count (8), then per
      sample: entry length (4; the columns below, not itself), and per schema column its length (4)
      and bytes: the audio (a whole WAV file, or opus.py's framing), the transcript (UTF-8)
  index chunk: its length (8; counts the sample count and the offsets), sample count (8), the absolute
      offset of each entry (8 each)
"""
import json
import os
import struct
from dataclasses import dataclass

from . import byte_ranges

MAGIC = b'SAMPLEDB'
WAV = 'audio/wav'
OPUS = 'application/vnd.mozilla.opus'
AUDIO_TYPES = (WAV, OPUS)
TEXT = 'text/plain'
SPEECH, TRANSCRIPT = 'speech', 'transcript'
BIG = struct.Struct('>Q')
INT = struct.Struct('>I')
EXTENSION = '.sdb'


class SdbError(ValueError):
    """A sample database that cannot be read; names the file and the byte offset of the problem."""

    def __init__(self, path, offset, what):
        super().__init__('{}: at byte {}: {}'.format(path, offset, what))


def meta_json(audio_type, labeled):
    """The meta chunk's bytes, as DeepSpeech writes them (json.dumps' default separators, key order)."""
    schema = [{'content': SPEECH, 'mime-type': audio_type}]
    if labeled:
        schema.append({'content': TRANSCRIPT, 'mime-type': TEXT})
    return json.dumps({'schema': schema}).encode()


@dataclass(frozen=True)
class Entry:
    audio_length: int
    audio: bytes            # the whole audio, or its first bytes when fewer were asked for
    transcript: str         # None in an unlabeled database
    audio_start: int        # the byte offset of the audio in the file
    size: int               # of the whole entry, its length field included


class Database:
    """A .sdb file (a path or an http(s) URL) opened for positioned reads (byte_ranges.py), so one
    Database serves several threads; its index is checked on opening."""

    def __init__(self, path):
        self.path = path
        self.source = byte_ranges.open_source(path)
        try:
            self._read_index()
        except BaseException:
            self.source.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def close(self):
        self.source.close()

    def _error(self, offset, what):
        return SdbError(self.path, offset, what)

    def _read(self, offset, size, what, source=None):
        """`size` bytes at `offset`, read from `source` if given (bytes already read, a one-pass reader of
        this file), else from this database's own."""
        data = (source or self.source).pread(offset, size)
        if len(data) < size:
            raise self._error(offset, '{} needs {} byte(s), the file ends after {} (truncated: copy or write it '
                                      'again)'.format(what, size, len(data)))
        return data

    def _read_index(self):
        if self._read(0, len(MAGIC), 'the magic') != MAGIC:
            raise self._error(0, 'does not start with {!r}: not a sample database'.format(MAGIC.decode()))
        meta_start = len(MAGIC) + BIG.size
        (meta_length,) = BIG.unpack(self._read(len(MAGIC), BIG.size, 'the meta length'))
        try:
            schema = json.loads(self._read(meta_start, meta_length, 'the meta data').decode())['schema']
            self.speech = self._column(schema, SPEECH, AUDIO_TYPES)
            self.transcript = self._column(schema, TRANSCRIPT, (TEXT,))
            self.audio_type = schema[self.speech]['mime-type']
        except (ValueError, KeyError, TypeError) as error:
            raise self._error(meta_start, 'unreadable meta data ({})'.format(error)) from None
        if self.speech is None:
            raise self._error(meta_start, 'no speech column of type {} in the schema'.format(' or '.join(AUDIO_TYPES)))
        self.columns = len(schema)
        self.samples_start = meta_start + meta_length
        chunk_length, count = struct.unpack('>QQ', self._read(self.samples_start, 2 * BIG.size, 'the sample chunk'))
        self.index_start = self.samples_start + BIG.size + chunk_length
        index_length, index_count = struct.unpack('>QQ', self._read(self.index_start, 2 * BIG.size, 'the index'))
        if index_count != count or index_length != BIG.size * (1 + count):
            raise self._error(self.index_start, 'the index (length {}, {} sample(s)) does not match the sample chunk '
                                                '({} sample(s)): the file is corrupt'
                                                .format(index_length, index_count, count))
        table = self._read(self.index_start + 2 * BIG.size, BIG.size * count, 'the index of {} sample(s)'.format(count))
        self.offsets = [offset for (offset,) in BIG.iter_unpack(table)]
        self.first_entry = self.samples_start + 2 * BIG.size
        for number, offset in enumerate(self.offsets):
            if not self.first_entry <= offset < self.index_start:
                raise self._error(self.offset_position(number),
                                  'sample {} is at byte {}, outside the sample chunk (bytes {} to {}): the file is '
                                  'corrupt'.format(number, offset, self.first_entry, self.index_start))

    def offset_position(self, number):
        """Where the index holds the offset of sample `number`."""
        return self.index_start + BIG.size * (2 + number)

    @staticmethod
    def _column(schema, content, mime_types):
        found = [i for i, column in enumerate(schema)
                 if column['content'] == content and column['mime-type'] in mime_types]
        return found[0] if found else None

    @property
    def labeled(self):
        return self.transcript is not None

    def entry(self, offset, audio_bytes=None, data=None, source=None):
        """The Entry at `offset` (`audio_bytes`: read only that many bytes of the audio; `data`: the entry's
        bytes, already read; `source`: read it through that, e.g. a byte_ranges.Sequential pass over this
        file); checks that it lies within the sample chunk and that its column lengths add up to its entry
        length."""
        if data is not None:
            source = byte_ranges.InMemory(data, offset)

        def read(position, size, what):
            return self._read(position, size, what, source)
        (entry_length,) = INT.unpack(read(offset, INT.size, 'an entry length'))
        end = offset + INT.size + entry_length
        if end > self.index_start:
            raise self._error(offset, 'an entry of {} byte(s) runs past the sample chunk (which ends at byte {}): '
                                      'the file is corrupt'.format(entry_length, self.index_start))
        position, audio, audio_length, audio_start, transcript = offset + INT.size, b'', 0, None, None
        for column in range(self.columns):
            (length,) = INT.unpack(read(position, INT.size, 'a column length'))
            position += INT.size
            if position + length > end:
                raise self._error(position - INT.size, 'a column of {} byte(s) runs past its entry (which ends at '
                                                       'byte {}): the file is corrupt'.format(length, end))
            if column == self.speech:
                audio_length, audio_start = length, position
                audio = read(position, length if audio_bytes is None else min(length, audio_bytes), 'audio')
            elif column == self.transcript:
                try:
                    transcript = read(position, length, 'a transcript').decode('utf-8')
                except UnicodeDecodeError as error:
                    raise self._error(position, 'the transcript is not UTF-8 ({})'.format(error)) from None
            position += length
        if position != end:
            raise self._error(offset, 'its columns hold {} byte(s), its entry length says {}: the file is corrupt'
                                      .format(position - offset - INT.size, entry_length))
        return Entry(audio_length, audio, transcript, audio_start, end - offset)

    def audio_file(self, offset):
        """The audio of the entry at `offset` as a file object that reads only what is read of it."""
        entry = self.entry(offset, audio_bytes=0)
        return byte_ranges.Window(self.source, entry.audio_start, entry.audio_length)


class Writer:
    """Writes a sample database to a seekable binary file (e.g. one opened by util.atomic.atomic_write)."""

    def __init__(self, file, audio_type, labeled=True):
        if audio_type not in AUDIO_TYPES:
            raise ValueError('audio type {!r}: a sample database holds {}'.format(audio_type, ' or '.join(AUDIO_TYPES)))
        self.file, self.labeled, self.offsets = file, labeled, []
        meta = meta_json(audio_type, labeled)
        file.write(MAGIC + BIG.pack(len(meta)) + meta)
        self.samples_start = file.tell()
        file.write(bytes(2 * BIG.size))         # the sample chunk's length and count, known at the end

    def add(self, audio, transcript=None):
        columns = [audio] + ([transcript.encode('utf-8')] if self.labeled else [])
        body = b''.join(INT.pack(len(column)) + column for column in columns)
        self.offsets.append(self.file.tell())
        self.file.write(INT.pack(len(body)) + body)

    def finish(self):
        """Write the index and the sample chunk's header; the file is complete after this."""
        count = len(self.offsets)
        index_start = self.file.tell()
        self.file.write(struct.pack('>QQ', BIG.size * (1 + count), count))
        self.file.write(b''.join(BIG.pack(offset) for offset in self.offsets))
        self.file.seek(self.samples_start)
        self.file.write(struct.pack('>QQ', index_start - self.samples_start - BIG.size, count))
        self.file.seek(0, os.SEEK_END)


def is_sdb(path):
    return path.lower().endswith(EXTENSION)
