"""Sample records as columns: a corpus of a million utterances is a dozen numpy arrays, not a million
Python objects (a dataclass, a labels tuple and path and transcript strings cost ~1.4 KB a sample and
rank, measured at 1M samples: GUIDE.md section 6). A sample becomes a `SampleRecord` only when it is
used (a batch, a message, a report).

`Columns` hold the samples of some sources in the order read; a `Records` is a view of them: an array
of positions (sorted by size, limited, without the invalid ones), so sorting and filtering copy 4 bytes
a sample, never the paths or labels. Paths are kept as the CSV wrote them (one UTF-8 blob, NUL after
each), labels packed in one array (uint8 for alphabets of up to 256 labels); transcripts are not kept:
they are the labels decoded (the alphabet encodes one label per character, so that is exact).
"""
import os
from dataclasses import dataclass

import numpy as np

from ..util.alphabet import UTF8Alphabet
from ..util.text import TranscriptError, transcript_to_labels


@dataclass(frozen=True)
class SampleRecord:
    audio_path: str        # absolute, or relative to the working directory; or the .sdb file or tar shard
    filesize: int          # of the audio file, or of the sample's audio in its .sdb (Opus: as a WAV file) or shard
    transcript: str
    labels: tuple
    source: str            # the CSV, .sdb or shard the sample came from
    row: int               # line number in that CSV (the header is line 1), or sample number in the .sdb or shard
    offset: int = None     # byte offset of the sample's .sdb entry or shard member data; None for a file of its own
    length: int = None     # bytes of that entry (its length field included) or member data: what a batch reads

    @property
    def audio_name(self):
        """The audio as DeepSpeech names it: its file, or `db.sdb:N` for sample N of a database (or shard)."""
        return self.audio_path if self.offset is None else '{}:{}'.format(self.audio_path, self.row)

    @property
    def audio_key(self):
        """What identifies the audio: (path, None) for a file, (container, offset) for a sample in one."""
        return self.audio_path, self.offset

    @property
    def where(self):
        """Where a user finds the sample, for messages."""
        if self.offset is None:
            return '{}: line {}: {}'.format(self.source, self.row, self.audio_path)
        return sample_where(self.source, self.row, self.offset)


def sample_where(container, number, offset):
    return '{}: sample {} (at byte {})'.format(container, number, offset)


def ends_to_starts(ends, gap=0):
    """Start of each item of a blob given the items' ends (`gap`: separator bytes after each item)."""
    starts = np.empty_like(ends)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + gap
    return starts


class LabelEncoder:
    """Transcripts -> packed labels for many samples at once (util.text.transcript_to_labels, which
    checks and encodes one string in Python, costs seconds per million transcripts): each code point is
    looked up in a sorted array of the alphabet's characters, as Alphabet.Encode maps one code point to one
    label. A transcript with a character the alphabet lacks, or an empty one, is reported with
    transcript_to_labels' own message."""

    def __init__(self, alphabet):
        self.alphabet = alphabet
        self.bytes_mode = isinstance(alphabet, UTF8Alphabet)      # --bytes_output_mode: label = UTF-8 byte - 1
        self.dtype = np.uint8 if alphabet.GetSize() <= 256 else np.uint16
        if not self.bytes_mode:
            pairs = sorted((ord(char), label) for label, char in
                           ((label, alphabet.DecodeSingle(label)) for label in range(alphabet.GetSize()))
                           if len(char) == 1)
            self.code_points = np.array([c for c, _ in pairs], np.uint32)
            self.labels = np.array([label for _, label in pairs], self.dtype)

    def encode(self, joined):
        """(labels, ends, problems) of the transcripts in `joined` (a str, NUL after each but the last):
        the labels of all of them in one array, each one's end in it, and {position: message} for those
        that cannot be encoded (their labels are left out: they are empty)."""
        if self.bytes_mode:
            units = np.frombuffer(joined.encode('utf-8'), np.uint8)
        else:
            units = np.frombuffer(joined.encode('utf-32-le'), '<u4')
        separators = np.flatnonzero(units == 0)
        ends = np.append(separators, len(units))
        starts = ends_to_starts(ends, gap=1)
        if self.bytes_mode:
            encoded, known = (units - 1).astype(self.dtype), np.ones(len(units), bool)
        else:
            found = np.minimum(np.searchsorted(self.code_points, units), len(self.code_points) - 1)
            known = self.code_points[found] == units
            encoded = self.labels[found]
        known[separators] = True
        unknown_before = np.concatenate([[0], np.cumsum(~known)])
        problems = {}
        for position in np.flatnonzero((unknown_before[ends] - unknown_before[starts] > 0) | (ends == starts)):
            transcript = units[starts[position]:ends[position]].tobytes().decode(
                'utf-8' if self.bytes_mode else 'utf-32-le')
            try:
                transcript_to_labels(self.alphabet, transcript)
            except TranscriptError as error:
                problems[int(position)] = str(error)
        keep = np.ones(len(units), bool)
        keep[separators] = False
        for position in problems:
            keep[starts[position]:ends[position]] = False
        # each item's end once the separators and the bad ones' labels are gone
        kept_before = np.concatenate([[0], np.cumsum(keep)])
        return encoded[keep], kept_before[ends], problems

    def decode(self, labels):
        return self.alphabet.Decode([int(label) for label in labels])


class Columns:
    """The samples of some sources as columns, in the order they were read (see the module docstring).

    Built by `add_files` (CSV rows) and `add_contained` (samples of a .sdb or tar shard); `finish()`
    turns the appended chunks into arrays."""

    def __init__(self, encoder):
        self.encoder = encoder          # a LabelEncoder, or None for an unlabeled set
        self.sources, self.bases = [], []
        self.path_data = bytearray()    # grown chunk by chunk (in place: no copy of the corpus's paths)
        self.container_headers = {}     # source id -> (sample rates, channels, frames, {number: error})
        self._chunks = []

    def add_source(self, source):
        """The id of `source` (a CSV, .sdb or shard path); relative audio paths in a CSV are relative to its folder."""
        self.sources.append(source)
        self.bases.append(os.path.dirname(os.path.abspath(source)))
        return len(self.sources) - 1

    def _add(self, source_id, rows, sizes, offsets, lengths, paths, transcripts):
        """Append a chunk (`transcripts`: a str of them, NUL after each but the last; None when unlabeled);
        returns {row: problem} of the transcripts that cannot be encoded (those samples are left out)."""
        count = len(rows)
        if self.encoder:
            labels, label_ends, problems = self.encoder.encode(transcripts)
        else:
            labels, label_ends, problems = np.zeros(0, np.uint8), np.zeros(count, np.int64), {}
        keep = np.ones(count, bool)
        keep[list(problems)] = False
        path_data = ''.join(p + '\0' for p in paths).encode('utf-8') if paths is not None else b'\0' * count
        path_ends = np.flatnonzero(np.frombuffer(path_data, np.uint8) == 0)
        if not keep.all():
            path_data, path_ends = _drop_items(path_data, path_ends, keep)
            label_ends = label_ends[keep]
        contained = offsets is not None
        self.path_data += path_data
        self._chunks.append(dict(source_id=source_id, count=int(keep.sum()),
                                 rows=np.asarray(rows, np.int64)[keep].astype(np.int32),
                                 sizes=np.asarray(sizes, np.int64)[keep],
                                 offsets=np.asarray(offsets, np.int64)[keep] if contained else None,
                                 lengths=np.asarray(lengths, np.int64)[keep].astype(np.int32) if contained else None,
                                 path_size=len(path_data), path_ends=path_ends.astype(np.int32),
                                 labels=labels, label_ends=label_ends.astype(np.int32)))
        return {rows[position]: message for position, message in problems.items()}

    def add_files(self, source_id, rows, paths, sizes, transcripts):
        """CSV rows: audio files of their own (`transcripts`: a list, or None for an unlabeled set)."""
        return self._add(source_id, rows, sizes, None, None, paths,
                         None if transcripts is None else '\0'.join(transcripts))

    def add_contained(self, source_id, index):
        """The samples of a .sdb file or tar shard from its container_index.ContainerIndex: byte ranges of the
        source itself, their headers kept for the audio check."""
        self.container_headers[source_id] = (index.sample_rates, index.channels, index.frames, index.header_errors)
        return self._add(source_id, np.arange(len(index), dtype=np.int64), index.sizes, index.offsets, index.lengths,
                         None, joined_transcripts(index) if self.encoder else None)

    def finish(self):
        """The chunks as columns, one column at a time, each chunk's part freed as it is copied: the peak is
        the columns plus one column's chunks, never the corpus twice."""
        chunks, self._chunks = self._chunks, []
        count = sum(c['count'] for c in chunks)
        self.source_ids = np.repeat(np.array([c['source_id'] for c in chunks],
                                             np.uint16 if len(self.sources) <= 1 << 16 else np.int32),
                                    [c['count'] for c in chunks])
        for name, dtype in COLUMN_TYPES.items():
            if name in CONTAINED_COLUMNS and all(c[name] is None for c in chunks):
                setattr(self, name, np.broadcast_to(np.array(-1, dtype), (count,)))    # a CSV's: -1, none stored
            else:
                column = _concat([np.full(c['count'], -1, dtype) if c[name] is None else c[name] for c in chunks],
                                 dtype)
                for c in chunks:
                    del c[name]
                setattr(self, name, _narrow(column) if name == 'sizes' else column)
        blob_sizes = {'path_ends': [c['path_size'] for c in chunks], 'label_ends': [len(c['labels']) for c in chunks]}
        self.labels = _concat([c.pop('labels') for c in chunks], self.encoder.dtype if self.encoder else np.uint8)
        for name, sizes in blob_sizes.items():
            setattr(self, name, _concat_ends([c.pop(name) for c in chunks], sizes))
        return self

    def label_starts(self, positions):
        return np.where(positions > 0, self.label_ends[positions - 1], 0)

    def path_starts(self, positions):
        return np.where(positions > 0, self.path_ends[positions - 1] + 1, 0)

    @property
    def nbytes(self):
        """Bytes the columns hold (what a sample costs a rank: this over the number of samples)."""
        arrays = ([getattr(self, name) for name in COLUMN_TYPES]
                  + [self.source_ids, self.path_ends, self.labels, self.label_ends])
        return sum(a.nbytes for a in arrays if a.strides != (0,)) + len(self.path_data)


# The per-sample columns and their types (a row number or entry length fits 32 bits, an offset may not; sizes
# are 32 bits while they fit); besides, source_ids are 16 bits for up to 65,536 sources, the ends of paths and
# labels 32 bits while their blob is under 2 GB. Columns of a CSV's samples hold no offsets or lengths:
# CONTAINED_COLUMNS are a view of -1.
COLUMN_TYPES = {'rows': np.int32, 'sizes': np.int64, 'offsets': np.int64, 'lengths': np.int32}
CONTAINED_COLUMNS = ('offsets', 'lengths')


def joined_transcripts(index):
    """The transcripts of a ContainerIndex as one str, NUL after each but the last (LabelEncoder.encode's input)."""
    data = np.frombuffer(index.transcripts, np.uint8)
    return np.insert(data, index.transcript_ends[:-1], 0).tobytes().decode('utf-8')


def _drop_items(data, ends, keep):
    """`data` (items each followed by a NUL, ending at `ends`) without the items where `keep` is False."""
    starts = ends_to_starts(ends, gap=1)
    data = b''.join(data[s:e + 1] for s, e in zip(starts[keep], ends[keep]))
    return data, np.flatnonzero(np.frombuffer(data, np.uint8) == 0)


def _narrow(column):
    """`column` in 32 bits when its values fit (audio sizes under 2 GB: 4 bytes a sample less)."""
    return column.astype(np.int32) if len(column) and column.max() < 1 << 31 and column.min() >= 0 else column


def index_type(count):
    """The type of indices into `count` samples: 32 bits up to 2^31 (4 bytes a sample less)."""
    return np.int32 if count < 1 << 31 else np.int64


def _concat(arrays, dtype):
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def _concat_ends(ends_list, blob_sizes):
    """Ends of items in chunks laid end to end (`blob_sizes`: each chunk's bytes or labels), in 32 bits while
    the whole fits."""
    ends = np.empty(sum(len(e) for e in ends_list), np.int32 if sum(blob_sizes) < 1 << 31 else np.int64)
    position = shift = 0
    for chunk_ends, blob_size in zip(ends_list, blob_sizes):
        ends[position:position + len(chunk_ends)] = chunk_ends + shift
        position, shift = position + len(chunk_ends), shift + blob_size
    return ends


class Records:
    """A view of `Columns`: the samples at `positions` (read order by default), as a sequence of
    SampleRecord made on access."""

    def __init__(self, columns, positions=None):
        self.columns, self.whole = columns, positions is None
        self.positions = np.arange(len(columns.rows), dtype=index_type(len(columns.rows))) if positions is None \
            else positions

    def __len__(self):
        return len(self.positions)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Records(self.columns, self.positions[index])
        return self.record(int(self.positions[index]))

    def __iter__(self):
        return (self.record(int(p)) for p in self.positions)

    def take(self, indices):
        """The records at `indices` (positions in this view, or a boolean mask over it)."""
        return Records(self.columns, self.positions[indices])

    def sorted_by_size(self, reverse=False):
        """Sorted by audio size as DeepSpeech sorts (a stable sort: equal sizes keep their order)."""
        sizes = self.columns.sizes if self.whole else self.column('sizes')     # (no copy of a million sizes)
        order = np.argsort(-sizes.astype(np.int64) if reverse else sizes, kind='stable').astype(self.positions.dtype)
        return Records(self.columns, order) if self.whole else self.take(order)

    def column(self, name):
        """A per-sample column (sizes, offsets, lengths, rows, source_ids) in this view's order."""
        return getattr(self.columns, name)[self.positions]

    def label_lengths(self):
        return self.columns.label_ends[self.positions] - self.columns.label_starts(self.positions)

    def ctc_min_frames(self):
        """util.text.ctc_min_frames of every sample: one frame a label plus a blank between repeats."""
        c = self.columns
        repeats = np.flatnonzero(c.labels[1:] == c.labels[:-1]) + 1       # label j repeats label j - 1
        starts, ends = c.label_starts(self.positions), c.label_ends[self.positions]
        inside = np.searchsorted(repeats, ends) - np.searchsorted(repeats, starts + 1)
        return ends - starts + np.maximum(inside, 0)

    def _labels(self, position):
        c = self.columns
        return c.labels[c.label_starts(np.array([position]))[0]:c.label_ends[position]]

    def audio_paths(self):
        """The audio path of every record, as bytes (the CSV's UTF-8; what os.open and hashing take): its
        file (relative paths resolved against the CSV's folder, as DeepSpeech does), or its container. Made
        from arrays turned into Python ints in one go: ~1 us a path, where audio_path() takes ~6."""
        c = self.columns
        bases = [os.path.join(base, '').encode('utf-8') for base in c.bases]
        sources = [source.encode('utf-8') for source in c.sources]
        data, paths = c.path_data, []
        for start, end, source_id, offset in zip(c.path_starts(self.positions).tolist(),
                                                 c.path_ends[self.positions].tolist(),
                                                 c.source_ids[self.positions].tolist(),
                                                 c.offsets[self.positions].tolist()):
            name = bytes(data[start:end])
            paths.append(sources[source_id] if offset >= 0 else name if name.startswith(b'/')
                         else bases[source_id] + name)
        return paths

    def audio_path(self, position):
        """The audio path of the sample at column `position` (audio_paths()' of one, as str)."""
        return Records(self.columns, np.array([position])).audio_paths()[0].decode('utf-8')

    def record(self, position):
        c = self.columns
        labels = self._labels(position)
        contained = c.offsets[position] >= 0
        return SampleRecord(self.audio_path(position), int(c.sizes[position]),
                            c.encoder.decode(labels) if c.encoder else None, tuple(int(x) for x in labels),
                            c.sources[c.source_ids[position]], int(c.rows[position]),
                            int(c.offsets[position]) if contained else None,
                            int(c.lengths[position]) if contained else None)
