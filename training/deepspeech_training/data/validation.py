"""The validation pass: every sample's audio is checked before the first step, so bad input stops a run
in seconds instead of hours into an epoch (or, with --skip_invalid_samples, is left out up front).

Only file headers are read (soundfile.info), never the samples, so a pass costs a few milliseconds per
1,000 files on a local disk; headers are read by a thread pool, which pays on network filesystems.
Of a sample in a sample database (.sdb) or tar shard only its header is read too (its .sdb entry's
lengths are checked): the WAV file's chunks, or the Opus framing's header (its packets are checked when
decoded), so a rank reads no audio at start, and on a networked filesystem a header costs a round trip.
A sample is invalid when its audio file is missing or unreadable, empty (0 bytes, or a header without
samples), not an audio file libsndfile can decode (corrupt, or e.g. a text file), at another rate than
--audio_sample_rate while --normalize_sample_rate is off, not mono, or too short for its transcript
under CTC (ctc_min_frames(labels) > the feature frames of its audio at the feature rate).

Under Horovod each rank reads the headers of its slice of the (sorted, de-duplicated) audio paths, then
the ranks allgather the problems they found, so every rank raises the same error, or skips the same
samples, before any collective of training starts.
"""
import math
import os
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import soundfile
import tensorflow.compat.v1 as tfv1

from . import opus, sdb, tar_shards
from .audio import RecordAudio
from .feeding import frame_count
from ..util.logging import Progress, log_info, log_warn
from .samples import DEFAULT_READ_BUFFER, DataError
from ..util.text import ctc_min_frames

# Problem kinds, as counted in the --skip_invalid_samples summary.
MISSING = 'missing file'
UNREADABLE = 'unreadable file'
EMPTY = 'empty audio'
NOT_AUDIO = 'corrupt or not a WAV file'
SAMPLE_RATE = 'wrong sample rate'
CHANNELS = 'not mono'
TOO_LONG = 'transcript too long for the audio'

CHUNK = 64              # paths per pool task (one task per path costs more than reading a header)
POOL_MIN_PATHS = 256    # below this a pool does not pay for itself
PROGRESS_MIN_PATHS = 2000
MAX_WORKERS = 16        # header reads are I/O-bound: more threads than cores help on network filesystems
EXAMPLES = 5            # examples per summary of skipped samples


@dataclass(frozen=True)
class Header:
    sample_rate: int
    channels: int
    frames: int


def read_header(path):
    """The audio header of `path` as a Header, or a (kind, what is wrong and how to fix it) pair."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return MISSING, 'audio file not found (paths in a CSV are relative to the CSV\'s folder)'
    except OSError as error:
        return UNREADABLE, 'cannot read the audio file: {} (check its permissions)'.format(error.strerror or error)
    if not os.path.isfile(path):
        return MISSING, 'not a file (wav_filename must name an audio file)'
    if size == 0:
        return EMPTY, 'the audio file is empty (0 bytes): re-create it, or remove the row'
    try:
        info = soundfile.info(path)
    except Exception as error:  # noqa: BLE001 -- LibsndfileError, RuntimeError, and whatever a bad file raises
        try:
            with open(path, 'rb'):
                pass
        except OSError as os_error:
            return UNREADABLE, 'cannot read the audio file: {} (check its permissions)'.format(
                os_error.strerror or os_error)
        reason = str(getattr(error, 'error_string', None) or error).strip().rstrip('.')
        return NOT_AUDIO, ('not a readable audio file ({}); expected a 16-bit PCM mono WAV file (re-encode it, '
                           'e.g. sox in.wav -b 16 -c 1 -r 16000 out.wav, or remove the row)'.format(reason))
    return Header(int(info.samplerate), int(info.channels), int(info.frames))


def read_sample_header(record_audio, record):
    """read_header() of a sample inside a .sdb or tar shard, through `record_audio` (a RecordAudio): only its
    header is read (a WAV file's chunks, or the Opus framing's header; its packets are checked when decoded)."""
    try:
        audio_type, audio_file = record_audio.audio_file(record)
        if audio_type == sdb.OPUS:
            pcm_length, rate, channels, width = opus.check_header(audio_file.read(opus.HEADER.size))
            return Header(rate, channels, pcm_length // (channels * width))
        info = soundfile.info(audio_file)
    except OSError as error:
        return UNREADABLE, 'cannot read {}: {} (check its permissions)'.format(record.audio_path,
                                                                               error.strerror or error)
    except (sdb.SdbError, tar_shards.ShardError, opus.OpusError) as error:
        return NOT_AUDIO, 'corrupt sample: {} (write the file again, e.g. with bin/data_set_tool.py)'.format(error)
    except Exception as error:  # noqa: BLE001 -- whatever libsndfile raises for bytes that are not a WAV
        return NOT_AUDIO, ('its audio is not a readable WAV file ({}): write the file again, e.g. with '
                           'bin/data_set_tool.py'.format(str(error).strip().rstrip('.')))
    return Header(int(info.samplerate), int(info.channels), int(info.frames))


def samples_at_rate(frames, file_rate, sample_rate):
    """How many samples `frames` at `file_rate` become at `sample_rate` (librosa.resample's length)."""
    if file_rate == sample_rate:
        return frames
    return int(math.ceil(frames * float(sample_rate) / file_rate))


def check_record(record, header, config):
    """None, or (kind, what is wrong and how to fix it) for one sample given its file's header."""
    sample_rate = config.sample_rate
    if not isinstance(header, Header):
        return header
    if header.frames == 0:
        return EMPTY, 'the audio file has a header but no samples: re-create it, or remove the row'
    if header.channels != 1:
        return CHANNELS, ('{} channels, expected mono (convert with: sox in.wav -c 1 out.wav)'
                          .format(header.channels))
    if header.sample_rate != sample_rate and not config.normalize_sample_rate:
        return SAMPLE_RATE, ('sample rate {} Hz, expected {} Hz (resample it, e.g. sox in.wav -r {} out.wav, or '
                             'drop --nonormalize_sample_rate to resample while training)'
                             .format(header.sample_rate, sample_rate, sample_rate))
    available = frame_count(samples_at_rate(header.frames, header.sample_rate, sample_rate), config)
    needed = ctc_min_frames(record.labels)
    if needed > available:
        return TOO_LONG, ('transcript too long for the audio: its {} label(s) need at least {} feature frames '
                          'under CTC, the {:.2f} s of audio give {} (check that the transcript belongs to this '
                          'file, or remove the row)'.format(len(record.labels), needed,
                                                            header.frames / float(header.sample_rate), available))
    return None


def read_headers(records, workers, progress_label=None, read_buffer=DEFAULT_READ_BUFFER):
    """{record.audio_key: header} of the records' audio; `workers` > 1 reads with a thread pool, in chunks
    of CHUNK records (the .sdb files and shards are opened once, for all threads)."""
    progress = Progress(progress_label, len(records), unit='Files', show_loss=False) \
        if progress_label and len(records) >= PROGRESS_MIN_PATHS else None
    headers = {}
    chunks = [records[i:i + CHUNK] for i in range(0, len(records), CHUNK)]

    record_audio = RecordAudio(read_buffer)

    def header(record):
        if record.offset is None:
            return read_header(record.audio_path)
        return read_sample_header(record_audio, record)

    def read_chunk(chunk):
        return [(record.audio_key, header(record)) for record in chunk]

    if workers > 1 and len(records) >= POOL_MIN_PATHS:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix='validation') as pool:
            results = pool.map(read_chunk, chunks)
            for chunk_headers in results:
                headers.update(chunk_headers)
                if progress:
                    progress.update(len(headers))
    else:
        for chunk in chunks:
            headers.update(read_chunk(chunk))
            if progress:
                progress.update(len(headers))
    record_audio.close()
    if progress:
        progress.finish()
    return headers


def default_workers(dist):
    """Threads per rank: header reads wait on I/O, so a few per core share, at most MAX_WORKERS."""
    share = max(1, (os.cpu_count() or 1) // dist.local_size)
    return min(MAX_WORKERS, 4 * share)


def _gather(dist, obj):
    """Every rank's `obj`, on every rank; a throw-away graph and CPU session carry the allgather."""
    if dist.size == 1:
        return [obj]
    graph = tfv1.Graph()
    config = tfv1.ConfigProto(device_count={'GPU': 0}, intra_op_parallelism_threads=1,
                              inter_op_parallelism_threads=1)
    with graph.as_default(), tfv1.Session(graph=graph, config=config) as session:
        return dist.gather(session, obj)


def validate_sets(sets, config, dist, skip_invalid=False, workers=None):
    """Check the audio of every sample of `sets` (a list of (name, records)); the same on every rank.

    Raises DataError listing the invalid samples (CSV, line, audio path, what, fix). With `skip_invalid`
    logs a summary instead and returns the sets without them (DataError if a set would become empty).
    Returns a list of records per set, in the order of `sets`."""
    started = time.time()
    uses = defaultdict(list)            # record.audio_key -> [(set index, record index)]
    for s, (_, records) in enumerate(sets):
        for i, record in enumerate(records):
            uses[record.audio_key].append((s, i))
    keys = sorted(uses, key=lambda key: (key[0], -1 if key[1] is None else key[1]))  # the same on every rank
    mine = keys[dist.rank::dist.size]
    headers = read_headers([sets[s][1][i] for s, i in (uses[key][0] for key in mine)],
                           default_workers(dist) if workers is None else workers,
                           progress_label='Checking audio' if dist.is_chief else None, read_buffer=config.read_buffer)
    found = []
    for key in mine:
        for s, i in uses[key]:
            problem = check_record(sets[s][1][i], headers[key], config)
            if problem:
                found.append((s, i) + problem)
    found = sorted(p for rank_found in _gather(dist, found) for p in rank_found)

    messages, kinds = {}, Counter()     # in CSV and line order; a row given in two sets is listed once
    for record, kind, what in sorted(((sets[s][1][i], kind, what) for s, i, kind, what in found),
                                     key=lambda p: (p[0].source, p[0].row)):
        if (record.source, record.row) not in messages:
            kinds[kind] += 1
            messages[record.source, record.row] = '{}: {}'.format(record.where, what)
    messages = list(messages.values())
    n_samples = sum(len(records) for _, records in sets)
    log_info('Checked the audio of {} sample(s) ({} distinct) in {:.1f} s: {} invalid'
             .format(n_samples, len(keys), time.time() - started, len(messages)))
    if not found:
        return [records for _, records in sets]
    if not skip_invalid:
        raise DataError(messages)

    if dist.is_chief:
        by_count = sorted(kinds.items(), key=lambda k: (-k[1], k[0]))
        counts = ', '.join('{} {}'.format(n, kind) for kind, n in by_count)
        log_warn('--skip_invalid_samples: skipping {} invalid sample(s): {}. The first {}:\n{}'.format(
            len(messages), counts, min(EXAMPLES, len(messages)), '\n'.join('  ' + m for m in messages[:EXAMPLES])))
    invalid = {(s, i) for s, i, _, _ in found}
    kept, empty = [], []
    for s, (name, records) in enumerate(sets):
        kept.append([r for i, r in enumerate(records) if (s, i) not in invalid])
        if records and not kept[-1]:
            empty.append('{}: every one of its {} sample(s) is invalid, nothing is left to use (fix them: run '
                         'without --skip_invalid_samples to list them all)'.format(name, len(records)))
    if empty:
        raise DataError(empty)
    for (name, records), kept_records in zip(sets, kept):
        if len(kept_records) < len(records):
            log_info('{}: using {} of {} sample(s)'.format(name, len(kept_records), len(records)))
    return kept


def validate_input(dist, config, train_records, dev_sets, test_sets, skip_invalid=False):
    """validate_sets() over main()'s sets: train records (or None), dev and test sets ({csv: records} or
    None). Returns them in the same shapes, without the invalid samples when `skip_invalid`."""
    sets = []
    if train_records:
        sources = list(dict.fromkeys(r.source for r in train_records))
        sets.append(('train set ({})'.format(', '.join(sources)), train_records))
    sets += [('dev set {}'.format(path), records) for path, records in (dev_sets or {}).items()]
    sets += [('test set {}'.format(path), records) for path, records in (test_sets or {}).items()]
    if not sets:
        return train_records, dev_sets, test_sets
    checked = iter(validate_sets(sets, config, dist, skip_invalid))
    if train_records:
        train_records = next(checked)
    if dev_sets is not None:
        dev_sets = {path: next(checked) for path in dev_sets}
    if test_sets is not None:
        test_sets = {path: next(checked) for path in test_sets}
    return train_records, dev_sets, test_sets
