"""Reading DeepSpeech sources (CSV files, sample databases, tar shards) into sample records (path, size,
transcript, labels). No audio is decoded here: records are cheap, so they can be sorted, limited and sharded before
any sample is read.
"""
import csv
import os
from dataclasses import dataclass

from . import byte_ranges, opus, sdb, tar_shards
from ..util.text import TranscriptError, transcript_to_labels

CSV_COLUMNS = ('wav_filename', 'wav_filesize', 'transcript')
MAX_LISTED_PROBLEMS = 20
WAV_HEADER_BYTES = 44       # an Opus sample's size is that of its PCM as a WAV file, comparable to a CSV's
DEFAULT_READ_BUFFER = 1 << 20


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


class DataError(ValueError):
    """Problems found in the input data, listed with file, row and fix."""

    def __init__(self, problems):
        self.problems = problems
        listed = problems[:MAX_LISTED_PROBLEMS]
        lines = ['{} problem(s) in the input data:'.format(len(problems))] + ['  ' + p for p in listed]
        if len(problems) > len(listed):
            lines.append('  ... and {} more'.format(len(problems) - len(listed)))
        super().__init__('\n'.join(lines))


def read_csv(csv_path, alphabet, skipped=None):
    """All records of one CSV; raises DataError listing every malformed row. With `alphabet` None the
    transcripts are not read (an unlabeled set: the column may be missing). With a list as `skipped`, a
    sample whose transcript the alphabet cannot encode (or an empty one) is left out and its problem
    appended there instead (--skip_invalid_samples)."""
    records, problems = [], []
    columns = CSV_COLUMNS if alphabet else CSV_COLUMNS[:2]
    base = os.path.dirname(os.path.abspath(csv_path))
    looks_like = binary_kind(csv_path)
    if looks_like:
        raise DataError(['{}: not a CSV file: {}'.format(csv_path, looks_like)])
    try:
        # utf-8-sig: a byte-order mark (spreadsheet exports) must not hide the first column's name.
        with open(csv_path, encoding='utf-8-sig', newline='') as csv_file:
            reader = csv.DictReader(csv_file)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(['{}: line 1: missing column(s) {} (the header is "{}"); a DeepSpeech CSV starts '
                                 'with the header "{}"'.format(csv_path, ', '.join(missing),
                                                               ','.join(reader.fieldnames or []),
                                                               ','.join(CSV_COLUMNS))])
            for row in reader:
                line = reader.line_num
                record = _record_from_row(row, csv_path, line, base, alphabet, columns, problems, skipped)
                if record:
                    records.append(record)
    except UnicodeDecodeError as error:
        raise DataError(_utf8_problems(csv_path, error)) from None
    if problems:
        raise DataError(problems)
    return records


def _utf8_problems(csv_path, error):
    """One problem per line of `csv_path` that is not valid UTF-8 (physical lines, as an editor counts)."""
    fix = 're-encode the file, e.g. iconv -f LATIN1 -t UTF-8 in.csv > out.csv (with its real encoding)'
    problems = []
    with open(csv_path, 'rb') as raw:
        for number, line in enumerate(raw, 1):
            try:
                line.decode('utf-8')
            except UnicodeDecodeError as bad:
                problems.append('{}: line {}: not valid UTF-8 (byte 0x{:02x} at byte {} of the line); {}'
                                .format(csv_path, number, line[bad.start], bad.start + 1, fix))
    return problems or ['{}: not valid UTF-8 ({}); {}'.format(csv_path, error, fix)]


def _record_from_row(row, csv_path, line, base, alphabet, columns, problems, skipped=None):
    where = '{}: line {}'.format(csv_path, line)
    if None in row or any(row[c] is None for c in columns):
        problems.append('{}: expected {} fields (quote transcripts that contain commas)'
                        .format(where, len(columns)))
        return None
    wav = row['wav_filename']
    try:
        filesize = int(row['wav_filesize'])
    except ValueError:
        problems.append('{}: {}: wav_filesize {!r} is not an integer (it is the file size in bytes)'
                        .format(where, wav, row['wav_filesize']))
        return None
    try:
        transcript, labels = _labels(alphabet, row['transcript'] if alphabet else None)
    except TranscriptError as error:
        (problems if skipped is None else skipped).append('{}: {}: {}'.format(where, wav, error))
        return None
    return SampleRecord(_resolve(base, wav), filesize, transcript, labels, csv_path, line)


def _labels(alphabet, transcript):
    """(transcript, labels) as a record keeps them; (None, ()) in an unlabeled set (`alphabet` None).
    Raises TranscriptError."""
    if not alphabet:
        return None, ()
    return transcript, tuple(transcript_to_labels(alphabet, transcript))


def _contained_record(path, number, offset, length, size, transcript, alphabet, problems, skipped=None):
    """The record of sample `number` of a .sdb or tar shard (`length` bytes at `offset`), or None with its
    problem appended (to `skipped` if a list is given: a transcript problem is then not an error)."""
    try:
        transcript, labels = _labels(alphabet, transcript)
    except TranscriptError as error:
        (problems if skipped is None else skipped).append('{}: {}'.format(sample_where(path, number, offset), error))
        return None
    return SampleRecord(path, size, transcript, labels, path, number, offset, length)


def _resolve(base, wav):
    return wav if os.path.isabs(wav) else os.path.join(base, wav)


def csv_audio_paths(csv_path):
    """The audio files a CSV lists, transcripts ignored (e.g. the noise recordings of --augment overlay)."""
    with open(csv_path, encoding='utf-8-sig', newline='') as csv_file:
        reader = csv.DictReader(csv_file)
        if CSV_COLUMNS[0] not in (reader.fieldnames or []):
            raise DataError(['{}: line 1: no {} column'.format(csv_path, CSV_COLUMNS[0])])
        base = os.path.dirname(os.path.abspath(csv_path))
        return [_resolve(base, row[CSV_COLUMNS[0]]) for row in reader]


# File signatures -> what a file that starts with them is (for a binary file given as a CSV).
SIGNATURES = [(sdb.MAGIC, 'starts with SAMPLEDB: a DeepSpeech sample database; name it .sdb'),
              (b'RIFF', 'starts with RIFF: a WAV (audio) file; list it in a CSV'),
              (b'OggS', 'starts with OggS: an Ogg (audio) file; convert it to WAV and list it in a CSV'),
              (b'\x1f\x8b', 'a gzip-compressed file; decompress it first'),
              (b'PK\x03\x04', 'a zip archive; unpack it first'),
              (b'\xff\xfe', 'UTF-16 text; re-encode it, e.g. iconv -f UTF-16 -t UTF-8 in.csv > out.csv'),
              (b'\xfe\xff', 'UTF-16 text; re-encode it, e.g. iconv -f UTF-16 -t UTF-8 in.csv > out.csv')]


def binary_kind(path, sniff=4096):
    """What a file that is not text looks like ('' for text): its signature, else 'a binary file'."""
    with open(path, 'rb') as file:
        head = file.read(sniff)
    for magic, kind in SIGNATURES:
        if head.startswith(magic):
            return kind
    if len(head) > 262 and head[257:262] == b'ustar':
        return 'a tar archive: name it .tar if it is a WebDataset shard (<key>.wav + <key>.txt), else unpack it'
    if b'\0' in head:
        return 'a binary file (it contains NUL bytes), not text'
    return ''


def read_sdb(path, alphabet, skipped=None):
    """All records of one sample database: its index, and of each entry its lengths, transcript and Opus
    header, in small positioned reads (the audio is read later, and only by the rank that trains on it);
    raises DataError listing every transcript the alphabet cannot encode, or the first corrupt entry.
    With `alphabet` None the transcripts are not read (an unlabeled set)."""
    records, problems = [], []
    try:
        with sdb.Database(path) as database:
            if alphabet and not database.labeled:
                raise DataError(['{}: a sample database without transcripts (written with --unlabeled): training '
                                 'and testing need them'.format(path)])
            for number, offset in enumerate(database.offsets):
                entry = database.entry(offset, audio_bytes=opus.HEADER.size)
                size = entry.audio_length
                if database.audio_type == sdb.OPUS:
                    try:
                        size = opus.read_header(entry.audio)[0] + WAV_HEADER_BYTES
                    except opus.OpusError as error:
                        raise sdb.SdbError(path, offset, 'sample {}: {}'.format(number, error)) from None
                records.append(_contained_record(path, number, offset, entry.size, size, entry.transcript, alphabet,
                                                 problems, skipped))
    except sdb.SdbError as error:
        raise DataError([str(error)]) from None
    if problems:
        raise DataError(problems)
    return [r for r in records if r]


def read_tar(path, alphabet, skipped=None):
    """All records of one tar shard (tar_shards.py), transcripts checked as a CSV's."""
    try:
        samples = tar_shards.read_samples(path)
    except tar_shards.ShardError as error:
        raise DataError([str(error)]) from None
    problems = []
    records = [_contained_record(path, number, offset, size, size, transcript, alphabet, problems, skipped)
               for number, (_, offset, size, transcript) in enumerate(samples)]
    if problems:
        raise DataError(problems)
    return [r for r in records if r]


def read_one(path, alphabet, skipped=None):
    if sdb.is_sdb(path):
        return read_sdb(path, alphabet, skipped)
    if byte_ranges.is_url(path) and not tar_shards.is_tar(path):
        raise DataError(['{}: only sample databases (.sdb) and tar shards (.tar) are read from a URL; a CSV and '
                         'its WAV files must be on a filesystem'.format(path)])
    return read_tar(path, alphabet, skipped) if tar_shards.is_tar(path) else read_csv(path, alphabet, skipped)


def read_records(paths, alphabet, skipped=None):
    """Records of CSV files, sample databases (.sdb) and tar shards (paths or patterns), in the order of
    their files (`alphabet` None: unlabeled; `skipped`: as read_csv's)."""
    problems, records = [], []
    for path in tar_shards.expand_all(paths):
        try:
            records.extend(read_one(path, alphabet, skipped))
        except DataError as error:
            problems.extend(error.problems)
    if problems:
        raise DataError(problems)
    return records


def read_sources(paths, alphabet, limit=0, reverse=False, skipped=None):
    """Records of several CSVs and sample databases merged, sorted by audio size (as DeepSpeech: similar
    lengths batch together), shortest first unless `reverse`, cut to the first `limit` when limit > 0
    (`skipped`: as read_csv's; samples are left out before the limit applies)."""
    records = read_records(paths, alphabet, skipped)
    records.sort(key=lambda r: r.filesize, reverse=reverse)
    return records[:limit] if limit > 0 else records

