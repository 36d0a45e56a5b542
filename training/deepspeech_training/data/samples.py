"""Reading DeepSpeech CSV sources into sample records (path, size, transcript, labels). No audio is
opened here: records are cheap, so they can be sorted, limited and sharded before any file is read.
"""
import csv
import os
from dataclasses import dataclass

from ..util.text import TranscriptError, transcript_to_labels

CSV_COLUMNS = ('wav_filename', 'wav_filesize', 'transcript')
MAX_LISTED_PROBLEMS = 20


@dataclass(frozen=True)
class SampleRecord:
    audio_path: str        # absolute, or relative to the working directory
    filesize: int
    transcript: str
    labels: tuple
    source: str            # the CSV file the sample came from
    row: int               # line number in that CSV (the header is line 1)


class DataError(ValueError):
    """Problems found in the input data, listed with file, row and fix."""

    def __init__(self, problems):
        self.problems = problems
        listed = problems[:MAX_LISTED_PROBLEMS]
        lines = ['{} problem(s) in the input data:'.format(len(problems))] + ['  ' + p for p in listed]
        if len(problems) > len(listed):
            lines.append('  ... and {} more'.format(len(problems) - len(listed)))
        super().__init__('\n'.join(lines))


def read_csv(csv_path, alphabet):
    """All records of one CSV; raises DataError listing every malformed row."""
    records, problems = [], []
    base = os.path.dirname(os.path.abspath(csv_path))
    try:
        # utf-8-sig: a byte-order mark (spreadsheet exports) must not hide the first column's name.
        with open(csv_path, encoding='utf-8-sig', newline='') as csv_file:
            reader = csv.DictReader(csv_file)
            missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(['{}: line 1: missing column(s) {} (the header is "{}"); a DeepSpeech CSV starts '
                                 'with the header "{}"'.format(csv_path, ', '.join(missing),
                                                               ','.join(reader.fieldnames or []),
                                                               ','.join(CSV_COLUMNS))])
            for row in reader:
                line = reader.line_num
                record = _record_from_row(row, csv_path, line, base, alphabet, problems)
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


def _record_from_row(row, csv_path, line, base, alphabet, problems):
    where = '{}: line {}'.format(csv_path, line)
    if None in row or any(row[c] is None for c in CSV_COLUMNS):
        problems.append('{}: expected {} fields (quote transcripts that contain commas)'
                        .format(where, len(CSV_COLUMNS)))
        return None
    wav = row['wav_filename']
    try:
        filesize = int(row['wav_filesize'])
    except ValueError:
        problems.append('{}: {}: wav_filesize {!r} is not an integer (it is the file size in bytes)'
                        .format(where, wav, row['wav_filesize']))
        return None
    try:
        labels = transcript_to_labels(alphabet, row['transcript'])
    except TranscriptError as error:
        problems.append('{}: {}: {}'.format(where, wav, error))
        return None
    return SampleRecord(_resolve(base, wav), filesize, row['transcript'], tuple(labels), csv_path, line)


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


def read_sources(csv_paths, alphabet, limit=0, reverse=False):
    """Records of several CSVs merged, sorted by file size (as DeepSpeech: similar lengths batch
    together), shortest first unless `reverse`, cut to the first `limit` when limit > 0."""
    problems, records = [], []
    for path in csv_paths:
        try:
            records.extend(read_csv(path, alphabet))
        except DataError as error:
            problems.extend(error.problems)
    if problems:
        raise DataError(problems)
    records.sort(key=lambda r: r.filesize, reverse=reverse)
    return records[:limit] if limit > 0 else records

