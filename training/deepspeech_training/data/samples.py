"""Reading DeepSpeech sources (CSV files, sample databases, tar shards) into sample records (path, size,
labels: records.py's columns). No audio is decoded here: records are cheap, so they can be sorted, limited
and sharded before any sample is read.
"""
import csv
import os

from . import byte_ranges, container_index, sdb, tar_shards
from .records import Columns, LabelEncoder, Records, sample_where
from ..util.gc_pause import gc_paused

CSV_COLUMNS = ('wav_filename', 'wav_filesize', 'transcript')
MAX_LISTED_PROBLEMS = 20
CSV_CHUNK = 1 << 13         # rows encoded at once: arrays, not a list of a million rows (nor a big transient)


class DataError(ValueError):
    """Problems found in the input data, listed with file, row and fix."""

    def __init__(self, problems):
        self.problems = problems
        listed = problems[:MAX_LISTED_PROBLEMS]
        lines = ['{} problem(s) in the input data:'.format(len(problems))] + ['  ' + p for p in listed]
        if len(problems) > len(listed):
            lines.append('  ... and {} more'.format(len(problems) - len(listed)))
        super().__init__('\n'.join(lines))


def add_csv(columns, csv_path, skipped=None):
    """Add the samples of one CSV to `columns`; raises DataError listing every malformed row. With an
    unlabeled `columns` (no encoder) the transcripts are not read (the column may be missing). With a list
    as `skipped`, a sample whose transcript the alphabet cannot encode (or an empty one) is left out and its
    problem appended there instead (--skip_invalid_samples)."""
    looks_like = binary_kind(csv_path)
    if looks_like:
        raise DataError(['{}: not a CSV file: {}'.format(csv_path, looks_like)])
    source_id, problems = columns.add_source(csv_path), []
    try:
        # utf-8-sig: a byte-order mark (spreadsheet exports) must not hide the first column's name.
        with open(csv_path, encoding='utf-8-sig', newline='') as csv_file:
            reader = csv.reader(csv_file)
            fields = _header(reader, csv_path, CSV_COLUMNS if columns.encoder else CSV_COLUMNS[:2])
            chunk = []
            for row in reader:
                if row:         # (as csv.DictReader: an empty line is no row)
                    chunk.append((reader.line_num, row))
                if len(chunk) == CSV_CHUNK:
                    _add_rows(columns, source_id, csv_path, chunk, fields, problems, skipped)
                    chunk = []
            _add_rows(columns, source_id, csv_path, chunk, fields, problems, skipped)
    except UnicodeDecodeError as error:
        raise DataError(_utf8_problems(csv_path, error)) from None
    except csv.Error as error:
        raise DataError(['{}: line {}: {} (a DeepSpeech CSV is comma-separated text, transcripts with commas or '
                         'quotes in double quotes)'.format(csv_path, reader.line_num, error)]) from None
    if problems:
        raise DataError(problems)


def _header(reader, csv_path, required):
    """{column: field index} of the columns `required` (and of the transcript, if there), from the first row."""
    names = next(reader, [])
    missing = [c for c in required if c not in names]
    if missing:
        raise DataError(['{}: line 1: missing column(s) {} (the header is "{}"); a DeepSpeech CSV starts '
                         'with the header "{}"'.format(csv_path, ', '.join(missing), ','.join(names),
                                                       ','.join(CSV_COLUMNS))])
    return [names.index(c) for c in required], len(names)


def _add_rows(columns, source_id, csv_path, chunk, fields, problems, skipped):
    """Check and add (line, row) pairs of a CSV: their fields, file sizes and transcripts."""
    (indices, width), good = fields, []
    for line, row in chunk:
        where = '{}: line {}'.format(csv_path, line)
        if len(row) > width or len(row) <= max(indices):      # (csv.DictReader's rule: extra columns may be empty)
            problems.append('{}: expected {} fields (quote transcripts that contain commas)'
                            .format(where, len(indices)))
            continue
        try:
            good.append((line, row[indices[0]], int(row[indices[1]]), row[indices[2]] if len(indices) > 2 else None))
        except ValueError:
            problems.append('{}: {}: wav_filesize {!r} is not an integer (it is the file size in bytes)'
                            .format(where, row[indices[0]], row[indices[1]]))
    if not good:
        return
    lines, paths, sizes, transcripts = (list(column) for column in zip(*good))
    bad = columns.add_files(source_id, lines, paths, sizes, transcripts if len(indices) > 2 else None)
    by_line = dict(zip(lines, paths))
    for line, message in sorted(bad.items()):
        (problems if skipped is None else skipped).append('{}: line {}: {}: {}'.format(csv_path, line, by_line[line],
                                                                                        message))


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


def add_container(columns, path, skipped=None, cache_dir=None):
    """Add the samples of one sample database or tar shard to `columns`, from its index (container_index.py:
    a few reads whatever the number of samples); raises DataError listing every transcript the alphabet
    cannot encode, or naming the corrupt byte."""
    try:
        index = container_index.read_index(path, cache_dir)
    except (sdb.SdbError, tar_shards.ShardError, byte_ranges.RangeError) as error:
        raise DataError([str(error)]) from None
    if columns.encoder and not index.labeled:
        raise DataError(['{}: a sample database without transcripts (written with --unlabeled): training '
                         'and testing need them'.format(path)])
    bad = columns.add_contained(columns.add_source(path), index)
    problems = ['{}: {}'.format(sample_where(path, number, index.offsets[number]), message)
                for number, message in sorted(bad.items())]
    if problems and skipped is None:
        raise DataError(problems)
    if problems:
        skipped.extend(problems)


def add_source(columns, path, skipped=None, cache_dir=None):
    if sdb.is_sdb(path) or tar_shards.is_tar(path):
        return add_container(columns, path, skipped, cache_dir)
    if byte_ranges.is_url(path):
        raise DataError(['{}: only sample databases (.sdb) and tar shards (.tar) are read from a URL; a CSV and '
                         'its WAV files must be on a filesystem'.format(path)])
    return add_csv(columns, path, skipped)


def read_records(paths, alphabet, skipped=None, cache_dir=None):
    """Records of CSV files, sample databases (.sdb) and tar shards (paths or patterns), in the order of
    their files (`alphabet` None: unlabeled; `skipped`: as add_csv's; `cache_dir`: where container indexes
    built for want of a sidecar are kept, --data_cache_dir)."""
    problems, columns = [], Columns(LabelEncoder(alphabet) if alphabet else None)
    with gc_paused():
        for path in tar_shards.expand_all(paths):
            try:
                add_source(columns, path, skipped, cache_dir)
            except DataError as error:
                problems.extend(error.problems)
    if problems:
        raise DataError(problems)
    return Records(columns.finish())


def read_sources(paths, alphabet, limit=0, reverse=False, skipped=None, cache_dir=None):
    """Records of several CSVs and sample databases merged, sorted by audio size (as DeepSpeech: similar
    lengths batch together), shortest first unless `reverse`, cut to the first `limit` when limit > 0
    (`skipped`: as add_csv's; samples are left out before the limit applies)."""
    records = read_records(paths, alphabet, skipped, cache_dir).sorted_by_size(reverse)
    return records[:limit] if limit > 0 else records

