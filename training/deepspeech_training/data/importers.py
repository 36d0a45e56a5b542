"""What the corpus importers in bin/ (import_cv.py, import_librispeech.py, import_folder.py, import_ted.py,
import_timit.py, import_vctk.py, import_m-ailabs.py, import_voxforge.py, import_tuda.py) share:
transcripts normalised to the alphabet, audio converted to 16 kHz mono 16-bit WAV in parallel behind a
progress bar, a report of what was dropped and why, and DeepSpeech CSV writing.

An importer reads its corpus into one `Split` per output CSV, recording in `split.dropped` whatever its
own rules reject (Common Voice votes, a missing transcript file), and hands the splits to
`import_splits`, which normalises, converts and filters the rest and fills `split.rows`.
"""
import argparse
import csv
import functools
import multiprocessing
import os
import sys
import tarfile
import unicodedata
from collections import Counter
from dataclasses import dataclass

import librosa
import numpy as np
import progressbar
import soundfile

from .samples import CSV_COLUMNS
from ..util.atomic import atomic_write
from ..util.text import ctc_min_frames, load_alphabet, transcript_to_labels, unknown_characters

SAMPLE_RATE = 16000
# The trainer's default --feature_win_step: CTC gets one frame per 20 ms of audio.
FEATURE_STEP_MS = 20
MAX_EXAMPLES = 3
DEFAULT_ALPHABET = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 '..', '..', '..', 'data', 'alphabet.txt'))

# Drop reasons every importer can report; importers add their own (e.g. 'too few votes').
EMPTY = 'empty transcript'
NOT_IN_ALPHABET = 'characters not in the alphabet'
UNREADABLE = 'audio unreadable'
TOO_LONG = 'too long'
TOO_SHORT = 'too short for its transcript'
NO_TRANSCRIPT = 'no transcript file'

# Marks that are read out as words ("and", "percent", "at"): deleting them would make the transcript
# disagree with the audio, so they stay and the sample is dropped instead.
SPOKEN_PUNCTUATION = frozenset('#%&*/@\\§‰')
APOSTROPHES = frozenset('\u2019\u2018\u02bc\u00b4`')


class CorpusError(Exception):
    """The corpus is not where or how the importer expects it; the message names the file and the fix."""


@dataclass(frozen=True)
class Utterance:
    source: str      # the corpus's audio file
    wav: str         # where its 16 kHz mono 16-bit WAV goes
    transcript: str  # as the corpus spells it; import_splits normalises it
    where: str       # names the utterance in the drop report, e.g. 'train.tsv line 7 (x.mp3)'
    start: float = 0.0  # a segment of the source (TED-LIUM's talks): its start and end in seconds;
    end: float = 0.0    # end 0 means to the end of the file


@dataclass(frozen=True)
class Row:
    wav: str
    transcript: str
    seconds: float


@dataclass(frozen=True)
class Converted:
    seconds: float = 0.0
    reused: bool = False
    error: str = ''


class DropReport:
    """Dropped samples counted per reason, with the first few of each, so that a systematic problem
    (a wrong alphabet, a missing clips folder) stands out from the expected losses."""

    def __init__(self):
        self.counts = Counter()
        self.examples = {}

    def drop(self, reason, where, detail):
        self.counts[reason] += 1
        examples = self.examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append('{}: {}'.format(where, detail))

    def total(self):
        return sum(self.counts.values())

    def lines(self):
        """Indented report lines, the most frequent reason first."""
        lines = []
        for reason, count in self.counts.most_common():
            lines.append('  {} dropped: {}, e.g.'.format(count, reason))
            lines.extend('      ' + example for example in self.examples[reason])
        return lines


class Split:
    """The utterances meant for one output CSV, what was dropped from them and why, and the kept rows."""

    def __init__(self, csv_path):
        self.csv_path = csv_path
        self.utterances = []
        self.dropped = DropReport()
        self.rows = []


def make_parser(doc, folder, folder_help, max_duration, alphabet_flags=('--alphabet',)):
    """An importer's argument parser: described by the first line of its `doc`, with one positional
    `folder` argument and the options every importer has (add_arguments)."""
    parser = argparse.ArgumentParser(description=doc.split('\n')[0])
    parser.add_argument(folder, help=folder_help)
    add_arguments(parser, max_duration, alphabet_flags)
    return parser


def add_arguments(parser, max_duration, alphabet_flags=('--alphabet',)):
    """The options every importer has; `max_duration` is its default limit in seconds (0: none)."""
    parser.add_argument(*alphabet_flags, dest='alphabet', type=_alphabet, default=DEFAULT_ALPHABET,
                        help='alphabet file: transcripts are normalised to it and samples it cannot spell '
                             'are dropped (default: %(default)s)')
    parser.add_argument('--normalize', dest='normalize', action='store_true', default=True,
                        help='map characters the alphabet lacks onto it: lower case, accents folded '
                             '(NFKD), punctuation removed (the default)')
    parser.add_argument('--nonormalize', dest='normalize', action='store_false',
                        help='keep transcripts as they are (only whitespace is tidied)')
    parser.add_argument('--max_duration', type=_non_negative_float, default=max_duration,
                        help='drop samples longer than this many seconds, 0 for no limit (default: %(default)s)')
    parser.add_argument('--jobs', type=_positive_int, default=os.cpu_count() or 1,
                        help='parallel conversions (default: %(default)s, the number of CPUs)')


def _alphabet(path):
    """Load the alphabet while parsing arguments, so that a bad file fails before any work is done."""
    try:
        return load_alphabet(path)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError('must be at least 1, got {}'.format(text))
    return value


def _non_negative_float(text):
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError('must not be negative, got {}'.format(text))
    return value


def normalize_transcript(alphabet, text):
    """`text` mapped onto `alphabet`, touching only characters the alphabet lacks: an alphabet with
    capitals or accents keeps them. What cannot be mapped (digits, symbols, other scripts) is left in,
    so that the sample is dropped rather than silently mistranscribed."""
    mapped = ''.join(_map_character(alphabet, char) for char in unicodedata.normalize('NFC', text))
    return tidy_whitespace(mapped)


def tidy_whitespace(text):
    return ' '.join(text.split())


@functools.lru_cache(maxsize=None)
def _map_character(alphabet, char):
    """The alphabet's spelling of one character: itself, lower-cased, an apostrophe, or accent-folded;
    a space for dashes and underscores; nothing for silent punctuation; else the character unchanged.
    Cached: a corpus has millions of characters but only a few hundred distinct ones."""
    candidates = [char, char.lower()]
    if char in APOSTROPHES:
        candidates.append("'")
    candidates += [_fold_accents(char), _fold_accents(char.lower())]
    for candidate in candidates:
        if candidate and not unknown_characters(alphabet, candidate):
            return candidate
    category = unicodedata.category(char)
    if char.isspace() or category in ('Pd', 'Pc'):
        return ' '
    if (category.startswith('P') and char not in SPOKEN_PUNCTUATION) or category == 'Mn':
        return ''
    return char


def _fold_accents(text):
    """Compatibility decomposition without combining marks: 'é' -> 'e', 'ﬁ' -> 'fi'."""
    return ''.join(c for c in unicodedata.normalize('NFKD', text) if not unicodedata.combining(c))


def import_splits(splits, args):
    """Normalise, convert and filter the utterances of every split, filling split.rows and
    split.dropped; a WAV shared by several splits (Common Voice's validated.tsv) is converted once."""
    plan = [(split, _spelled_utterances(split, args.alphabet, args.normalize)) for split in splits]
    sources = {}
    for _, spelled in plan:
        for utterance, _, _ in spelled:
            source = (utterance.source, utterance.start, utterance.end)
            if sources.setdefault(utterance.wav, source) != source:
                raise CorpusError('{} and {} would both be converted to {}; rename one of them'.format(
                    sources[utterance.wav][0], utterance.source, utterance.wav))
    converted = convert_all(sources, args.jobs)
    for split, spelled in plan:
        for utterance, transcript, min_frames in spelled:
            result = converted[utterance.wav]
            problem = _audio_problem(result, min_frames, args.max_duration)
            if problem:
                split.dropped.drop(problem[0], utterance.where, problem[1])
            else:
                split.rows.append(Row(utterance.wav, transcript, result.seconds))
    reused = sum(r.reused for r in converted.values())
    failed = sum(bool(r.error) for r in converted.values())
    print('audio: {} converted, {} already converted (skipped), {} unreadable'.format(
        len(converted) - reused - failed, reused, failed))


def _spelled_utterances(split, alphabet, normalize):
    """(utterance, transcript, CTC frames it needs) for each utterance the alphabet can spell; drops
    the others. The labels themselves are not kept: for a million clips they would fill gigabytes."""
    spelled = []
    for utterance in split.utterances:
        transcript = (normalize_transcript(alphabet, utterance.transcript) if normalize
                      else tidy_whitespace(utterance.transcript))
        unknown = unknown_characters(alphabet, transcript)
        if not transcript:
            split.dropped.drop(EMPTY, utterance.where, repr(utterance.transcript))
        elif unknown:
            split.dropped.drop(NOT_IN_ALPHABET, utterance.where, '{} in {!r}'.format(
                ' '.join(repr(c) for c in unknown), transcript))
        else:
            spelled.append((utterance, transcript, ctc_min_frames(transcript_to_labels(alphabet, transcript))))
    return spelled


def _audio_problem(result, min_frames, max_duration):
    """(reason, detail) if the converted audio is unusable for a transcript needing `min_frames`, else None."""
    if result.error:
        return UNREADABLE, result.error
    if max_duration and result.seconds > max_duration:
        return TOO_LONG, '{:.2f} s, over --max_duration {:g}'.format(result.seconds, max_duration)
    frames = int(result.seconds * 1000 / FEATURE_STEP_MS)
    if frames < min_frames:
        return TOO_SHORT, '{:.2f} s gives {} frames, the transcript needs {}'.format(
            result.seconds, frames, min_frames)
    return None


def convert_all(sources, jobs):
    """{wav: Converted} for {wav: (source, start, end)}, converting in `jobs` processes: decoding and resampling
    are CPU-bound, so threads would take turns on the GIL."""
    results = {}
    if not sources:
        return results
    bar = progressbar.ProgressBar(max_value=len(sources), prefix='converting audio ')
    with multiprocessing.Pool(min(jobs, len(sources))) as pool:
        for wav, result in bar(pool.imap_unordered(_convert_one, sources.items())):
            results[wav] = result
    return results


def _convert_one(wav_and_source):
    """Convert one file in a worker; a failure becomes a drop reason instead of ending the import."""
    wav, (source, start, end) = wav_and_source
    seconds = existing_wav_seconds(source, wav)
    if seconds is not None:
        return wav, Converted(seconds, reused=True)
    if not os.path.isfile(source):
        return wav, Converted(error='{}: file not found'.format(source))
    try:
        return wav, Converted(convert_audio(source, wav, start, end))
    except (OSError, RuntimeError, ValueError) as error:
        return wav, Converted(error='{}: {}'.format(source, error))


def existing_wav_seconds(source, wav):
    """Duration of `wav` if an earlier run made it from `source` (a non-empty 16 kHz mono 16-bit WAV
    newer than the source, or whose source has since been deleted to save space), else None: this is
    what lets a rerun skip finished work."""
    try:
        if os.path.exists(source) and os.path.getmtime(wav) < os.path.getmtime(source):
            return None
        info = soundfile.info(wav)
    except (OSError, RuntimeError):
        return None
    if (info.format, info.subtype, info.samplerate, info.channels) != ('WAV', 'PCM_16', SAMPLE_RATE, 1):
        return None
    return info.frames / SAMPLE_RATE if info.frames else None


def convert_audio(source, wav, start=0.0, end=0.0):
    """Write `source` (any format libsndfile reads: WAV, FLAC, MP3, Ogg, NIST SPHERE), or its part from
    `start` to `end` seconds (0: its end), as a 16 kHz mono 16-bit WAV; returns its duration. The file
    appears whole or not at all, so an interrupted run leaves no truncated WAV for the next run to
    mistake for finished work. `source` may be `wav` itself: it is read whole before being replaced."""
    with soundfile.SoundFile(source) as audio:
        rate = audio.samplerate
        first = int(round(start * rate))
        if first:
            audio.seek(min(first, audio.frames))
        count = int(round(end * rate)) - first if end else -1
        samples = audio.read(count, dtype='float32', always_2d=True)
    if not len(samples):
        raise ValueError('no audio samples in the file')
    mono = samples.mean(axis=1)
    if rate != SAMPLE_RATE:
        mono = librosa.resample(mono, orig_sr=rate, target_sr=SAMPLE_RATE)
    # Clip first: resampling can overshoot 1.0, and libsndfile would wrap such samples around.
    pcm = np.clip(np.round(mono * 32768), -32768, 32767).astype(np.int16)
    os.makedirs(os.path.dirname(wav), exist_ok=True)
    with atomic_write(wav, 'wb') as out:
        soundfile.write(out, pcm, SAMPLE_RATE, subtype='PCM_16', format='WAV')
    return len(pcm) / SAMPLE_RATE


def require_folder(folder, what, fix):
    """Stop with an error naming `folder`, the corpus it should hold and how to get it, unless it exists."""
    if not os.path.isdir(folder):
        raise CorpusError('{} not found: it should hold {}; {}'.format(folder, what, fix))
    return folder


def extract_archive(archive, into):
    """Extract a downloaded tar archive (DeepSpeech's importers extract theirs) into `into`; members that
    would land outside it, links and devices stop the extraction, as a damaged or hostile archive."""
    target = os.path.realpath(into)
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                path = os.path.realpath(os.path.join(target, member.name))
                if not (member.isfile() or member.isdir()) or os.path.commonpath([target, path]) != target:
                    raise CorpusError('{}: refusing to extract {!r} (a link, a device or a path outside {})'
                                      .format(archive, member.name, into))
            print('extracting {} into {}'.format(archive, into))
            tar.extractall(target, members=members)
    except (OSError, tarfile.TarError) as error:
        raise CorpusError('{}: {}; download it again'.format(archive, error)) from None


def read_text(path, encoding='utf-8'):
    """The lines of a corpus's text file, or a CorpusError naming it (a missing or mis-encoded index file
    means a damaged or wrongly given corpus, not one bad sample)."""
    try:
        with open(path, encoding=encoding) as text_file:
            return text_file.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise CorpusError('{}: {}'.format(path, error)) from None


def write_csv(csv_path, rows):
    """A DeepSpeech CSV of `rows`, file names relative to the CSV's folder, written whole or not at all."""
    folder = os.path.dirname(os.path.abspath(csv_path))
    os.makedirs(folder, exist_ok=True)
    with atomic_write(csv_path, encoding='utf-8', newline='') as csv_file:
        writer = csv.writer(csv_file, lineterminator='\n')
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([os.path.relpath(row.wav, folder), os.path.getsize(row.wav), row.transcript])


def print_summary(title, rows, dropped):
    """What went into a CSV and what did not, with the reasons."""
    print('{}: {} kept ({:.1f} s of audio), {} dropped'.format(
        title, len(rows), sum(row.seconds for row in rows), dropped.total()))
    for line in dropped.lines():
        print(line)


def write_splits(splits):
    """Write each split's CSV and report on it."""
    for split in splits:
        write_csv(split.csv_path, split.rows)
        print_summary(split.csv_path, split.rows, split.dropped)


def run_importer(parser, read_split, names, argv=None):
    """The whole of an importer that writes one CSV per split: parse the arguments, read the corpus's
    split of each of `names` (`read_split(args, name)`), convert, filter and write them; errors as
    run_script reports them."""
    def main():
        args = parser.parse_args(argv)
        splits = [read_split(args, name) for name in names]
        import_splits(splits, args)
        write_splits(splits)
    run_script(main)


def run_script(main):
    """Run an importer's main(), reporting a CorpusError as one line and exit status 1, not a traceback."""
    try:
        main()
    except CorpusError as error:
        sys.exit('error: {}'.format(error))
