"""The validation pass: every sample's audio is checked before the first step, so bad input stops a run
in seconds instead of hours into an epoch (or, with --skip_invalid_samples, is left out up front).

Only headers are read, never the samples: a WAV file's first bytes (headers.py; a thread pool, which pays
on network filesystems), and of a sample in a sample database (.sdb) or tar shard nothing at all: its
container index holds its header (container_index.py). Headers of files are kept in a cache (--data_cache_dir,
headers.HeaderCache), so a second start of the same corpus stats its files instead of reading them.
Everything per sample is numpy arrays (records.py): at a million samples the pass costs seconds, not objects.
A sample is invalid when its audio file is missing or unreadable, empty (0 bytes, or a header without
samples), not an audio file libsndfile can decode (corrupt, or e.g. a text file), at another rate than
--audio_sample_rate while --normalize_sample_rate is off, not mono, or too short for its transcript
under CTC (ctc_min_frames(labels) > the feature frames of its audio at the feature rate), or when its file
is smaller than the CSV's wav_filesize says (a copy cut short: of a FLAC or other compressed file the
header cannot tell). A file larger than its wav_filesize is no error (hand-written CSVs give 0 or rough
sizes): one warning counts them, since samples are sorted into batches by wav_filesize.

Under Horovod each rank reads the headers of its slice of the distinct audio (every size-th of their
sorted 64-bit keys) and caches what it read itself, then the ranks allgather the problems they found
(dist.gather_objects), so every rank raises the same error, or skips the same samples, before any collective
of training starts.
"""
import math
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .feeding import frame_count
from .headers import (EMPTY, MISSING, NOT_AUDIO, UNREADABLE,  # noqa: F401 (kinds)
                      Header, HeaderCache, path_key, read_header, stamp)
from ..util.gc_pause import gc_paused
from ..util.logging import Progress, log_info, log_warn
from .samples import DataError

# Problem kinds, as counted in the --skip_invalid_samples summary (with those of headers.py).
WRONG_RATE = 'wrong sample rate'
NOT_MONO = 'not mono'
TOO_LONG = 'transcript too long for the audio'
SMALLER = 'audio file smaller than its wav_filesize'

CHUNK = 256             # paths per pool task (one task per path costs more than reading a header)
POOL_MIN_PATHS = 256    # below this a pool does not pay for itself
PROGRESS_MIN_PATHS = 2000
MAX_WORKERS = 16        # header reads are I/O-bound: more threads than cores help on network filesystems
EXAMPLES = 5            # examples per summary of skipped samples
UNKNOWN = -1            # in a header column: no header (a problem instead)
NO_STAMP = (-1, -1, -1)
HEADER_ROWS = 4         # of a headers array: sample rates, channels, frames, file sizes
FILE_SIZE = 3           # the row of file sizes (UNKNOWN for the audio of a container)
BLOCK = 1 << 16         # files whose headers are read at once (bounds what a million files hold in memory)


def samples_at_rate(frames, file_rate, sample_rate):
    """How many samples `frames` at `file_rate` become at `sample_rate` (librosa.resample's length)."""
    if file_rate == sample_rate:
        return frames
    return int(math.ceil(frames * float(sample_rate) / file_rate))


def check_headers(headers, listed_sizes, label_lengths, min_frames, config):
    """([(index, kind, what is wrong and how to fix it)], indices of larger files) of samples' headers (rates,
    channels, frames, file sizes: arrays, UNKNOWN where the header was not read or the audio is in a
    container): the problems of those that do not fit their labels (`min_frames`: ctc_min_frames of each)
    or whose file is smaller than its CSV's wav_filesize (`listed_sizes`); of the other, fine samples those
    whose file is larger (no error: see the module docstring)."""
    rates, channels, frames, file_sizes = headers
    sample_rate = config.sample_rate
    at_rate = np.where(rates == sample_rate, frames,
                       np.ceil(frames * float(sample_rate) / np.maximum(rates, 1)).astype(np.int64))
    available = np.where(at_rate < config.audio_window_samples, 0,
                         1 + (at_rate - config.audio_window_samples) // config.audio_step_samples)
    wrong_rate = (rates != sample_rate) & (not config.normalize_sample_rate)
    bad = (frames != UNKNOWN) & ((frames == 0) | (channels != 1) | wrong_rate | (min_frames > available))
    known = (file_sizes != UNKNOWN) & ~bad
    problems = [(int(i),) + _problem(Header(int(rates[i]), int(channels[i]), int(frames[i])), int(label_lengths[i]),
                                     int(min_frames[i]), config)
                for i in np.flatnonzero(bad)]
    problems += [(int(i), SMALLER, _smaller_than_listed(int(file_sizes[i]), int(listed_sizes[i])))
                 for i in np.flatnonzero(known & (file_sizes < listed_sizes))]
    return problems, np.flatnonzero(known & (file_sizes > listed_sizes))


def _smaller_than_listed(file_size, listed_size):
    return ('the file has {} bytes, its wav_filesize says {}: a copy or download cut short (copy it again from its '
            'source; if the file is whole, the CSV is wrong: run the importer that wrote it again, or write {} as '
            'its wav_filesize)'.format(file_size, listed_size, file_size))


def _problem(header, n_labels, needed, config):
    """(kind, what is wrong and how to fix it) of one sample check_headers() found wrong."""
    sample_rate = config.sample_rate
    if header.frames == 0:
        return EMPTY, 'the audio file has a header but no samples: re-create it, or remove the row'
    if header.channels != 1:
        return NOT_MONO, ('{} channels, expected mono (convert with: sox in.wav -c 1 out.wav)'
                          .format(header.channels))
    if header.sample_rate != sample_rate and not config.normalize_sample_rate:
        return WRONG_RATE, ('sample rate {} Hz, expected {} Hz (resample it, e.g. sox in.wav -r {} out.wav, or '
                            'drop --nonormalize_sample_rate to resample while training)'
                            .format(header.sample_rate, sample_rate, sample_rate))
    available = frame_count(samples_at_rate(header.frames, header.sample_rate, sample_rate), config)
    return TOO_LONG, ('transcript too long for the audio: its {} label(s) need at least {} feature frames '
                      'under CTC, the {:.2f} s of audio give {} (check that the transcript belongs to this '
                      'file, or remove the row)'.format(n_labels, needed, header.frames / float(header.sample_rate),
                                                        available))


def _pooled(function, items, workers, advance=None):
    """[function(item) for item in items], by a thread pool in chunks of CHUNK when there are enough;
    `advance(n)` is called as each chunk of n items is done."""
    chunks = [items[i:i + CHUNK] for i in range(0, len(items), CHUNK)]
    results = []

    def run(chunk):
        return [function(item) for item in chunk]
    if workers > 1 and len(items) >= POOL_MIN_PATHS:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix='validation') as pool:
            done = pool.map(run, chunks)
    else:
        done = map(run, chunks)
    for chunk_results in done:
        results.extend(chunk_results)
        if advance:
            advance(len(chunk_results))
    return results


def _file_stamp(path):
    try:
        return stamp(os.stat(path))
    except OSError:
        return NO_STAMP


class AudioCheck:
    """The headers of one rank's share of the distinct audio files of some sets: from the header cache, or
    read by a thread pool. Headers read are kept in `new` for the cache."""

    def __init__(self, cache, workers, progress):
        self.cache, self.workers, self.progress = cache, workers, progress
        self.done, self.cached, self.read = 0, 0, 0
        self.new = []       # (sources, keys, stamps [n, 3], headers [n, 3]) of files read

    def advance(self, n):
        self.done += n
        if self.progress:
            self.progress.update(self.done)

    def files(self, paths, keys, sources):
        """(headers [4, n]: sample rates, channels, frames, file sizes, {index: problem}) of audio files, in
        blocks of BLOCK files (a million files read at once would hold a million result tuples)."""
        headers, problems = np.full((len(paths), HEADER_ROWS), UNKNOWN, np.int64), {}
        for start in range(0, len(paths), BLOCK):
            block = slice(start, start + BLOCK)
            block_problems = self._file_block(paths[block], keys[block], sources[block], headers[block])
            problems.update((start + i, problem) for i, problem in block_problems.items())
        return headers.T, problems

    def _file_block(self, paths, keys, sources, headers):
        hit = np.zeros(len(paths), bool)
        if self.cache:
            stamps = np.array(_pooled(_file_stamp, paths, self.workers), np.int64).reshape(-1, len(NO_STAMP))
            hit, *found = self.cache.lookup(keys, stamps)
            headers[hit] = np.stack(found + [stamps[:, 0]], axis=1)[hit]
            self.cached += int(hit.sum())
            self.advance(int(hit.sum()))
        misses = np.flatnonzero(~hit)
        self.read += len(misses)
        read = _pooled(read_header, [paths[i] for i in misses], self.workers, self.advance)
        good = [n for n, (_, header) in enumerate(read) if isinstance(header, Header)]
        if good:
            stamps = np.array([read[n][0] for n in good], np.int64)
            headers[misses[good]] = [(read[n][1].sample_rate, read[n][1].channels, read[n][1].frames, stamp[0])
                                     for n, stamp in zip(good, stamps)]
            self.new.append((sources[misses[good]], keys[misses[good]], stamps, headers[misses[good], :FILE_SIZE]))
        return {int(misses[n]): header for n, (_, header) in enumerate(read) if not isinstance(header, Header)}


def default_workers(dist):
    """Threads per rank: header reads wait on I/O, so a few per core share, at most MAX_WORKERS."""
    share = max(1, (os.cpu_count() or 1) // dist.local_size)
    return min(MAX_WORKERS, 4 * share)


def audio_keys(records):
    """A 64-bit key of each record's audio (headers.path_key of its file, or of its container plus its offset):
    the same audio in two sets has one key, and every rank computes the same keys."""
    keys = np.zeros(len(records), np.uint64)
    for start in range(0, len(records), BLOCK):
        keys[start:start + BLOCK] = [path_key(path) for path in records[start:start + BLOCK].audio_paths()]
    offsets = records.column('offsets')
    contained = offsets >= 0
    keys[contained] += offsets[contained].astype(np.uint64)
    return keys


def validate_sets(sets, config, dist, skip_invalid=False, workers=None, cache_dir=None):
    """Check the audio of every sample of `sets` (a list of (name, Records)); the same on every rank.

    Each rank reads the headers of its share of the distinct audio (every size-th key), unless the header
    cache in `cache_dir` knows the file unchanged. Raises DataError listing the invalid samples (CSV, line,
    audio path, what, fix). With `skip_invalid` logs a summary instead and returns the sets without them
    (DataError if a set would become empty). Returns the Records of each set, in the order of `sets`."""
    # (the collector paused: the pass makes and drops a few objects per file, util/gc_pause.py)
    with gc_paused():
        return _validate_sets(sets, config, dist, skip_invalid, workers, cache_dir)


def _validate_sets(sets, config, dist, skip_invalid, workers, cache_dir):
    started = time.time()
    keys = [audio_keys(records) for _, records in sets]
    distinct, first, inverse = np.unique(np.concatenate(keys), return_index=True, return_inverse=True)
    set_starts = np.cumsum([0] + [len(records) for _, records in sets])
    n_mine = len(range(dist.rank, len(distinct), dist.size))
    csv_sources = sorted({records.columns.sources[i] for _, records in sets
                          for i in np.unique(records.column('source_ids')[records.column('offsets') < 0])})
    cache = HeaderCache(cache_dir, csv_sources, dist.rank) if cache_dir and csv_sources else None
    progress = (Progress('Checking audio', n_mine, unit='Files', show_loss=False)
                if dist.is_chief and n_mine >= PROGRESS_MIN_PATHS else None)
    check = AudioCheck(cache, default_workers(dist) if workers is None else workers, progress)
    headers, problems = _read_share(sets, first[dist.rank::dist.size], distinct[dist.rank::dist.size], set_starts,
                                    check)
    if progress:
        progress.finish()
    found, larger = [], []      # larger: (count, (set, index, file size) of the first) of files larger than listed
    for s, (_, records) in enumerate(sets):
        ours = np.flatnonzero(inverse[set_starts[s]:set_starts[s + 1]] % dist.size == dist.rank)
        share = inverse[set_starts[s] + ours] // dist.size      # each one's position in this rank's share
        checked = records.take(ours)
        header_problems, larger_ones = check_headers(headers[:, share], checked.column('sizes'),
                                                     checked.label_lengths(), checked.ctc_min_frames(), config)
        found += [(s, int(ours[i]), kind, what) for i, kind, what in header_problems]
        found += [(s, int(ours[i])) + tuple(problems[int(share[i])])
                  for i in np.flatnonzero(np.isin(share, list(problems)))]
        if len(larger_ones):
            first = larger_ones[0]
            larger.append((len(larger_ones), (s, int(ours[first]), int(headers[FILE_SIZE, share[first]]))))
    if cache and check.new:
        _update_cache(cache, check.new)
    found, n_read, cached, larger = zip(*dist.gather_objects((found, check.read, check.cached, larger)))
    found = sorted(p for rank_found in found for p in rank_found)

    messages, kinds = _messages(sets, found)
    n_samples = sum(len(records) for _, records in sets)
    log_info('Checked the audio of {} sample(s) ({} distinct) in {:.1f} s: {} invalid{}'.format(
        n_samples, len(distinct), time.time() - started, len(messages),
        '' if not cache else '; {} file header(s) read, {} known unchanged from the cache in {}'.format(
            sum(n_read), sum(cached), cache_dir)))
    larger = [counted for rank_larger in larger for counted in rank_larger]
    if larger and dist.is_chief:
        _warn_larger(sets, larger)
    if not found:
        return [records for _, records in sets]
    if not skip_invalid:
        raise DataError(messages)
    return _without_invalid(sets, found, messages, kinds, dist)


def _warn_larger(sets, larger):
    """One warning for all the files larger than their CSV's wav_filesize (`larger`: (count, (set, index, file
    size) of the first) per set and rank)."""
    s, i, file_size = min(first for _, first in larger)
    record = sets[s][1][i]
    log_warn('{} sample(s) have an audio file larger than their CSV\'s wav_filesize, e.g. {}: {} bytes, its '
             'wav_filesize says {}. Not an error, but samples are batched by wav_filesize (similar lengths '
             'together): run the importer that wrote the CSV again for the right sizes'.format(
                 sum(count for count, _ in larger), record.where, file_size, record.filesize))


def _messages(sets, found):
    """([message], Counter of kinds) of the problems `found`, in CSV and line order; a row given in two sets
    is listed once."""
    messages, kinds = {}, Counter()
    for record, kind, what in sorted(((sets[s][1][i], kind, what) for s, i, kind, what in found),
                                     key=lambda p: (p[0].source, p[0].row)):
        if (record.source, record.row) not in messages:
            kinds[kind] += 1
            messages[record.source, record.row] = '{}: {}'.format(record.where, what)
    return list(messages.values()), kinds


def _read_share(sets, representatives, keys, set_starts, check):
    """(headers [4, n], {index: problem}) of this rank's share of the distinct audio: `keys`, each read
    through its first sample (`representatives`: indices into the sets laid end to end)."""
    headers, problems = np.full((HEADER_ROWS, len(keys)), UNKNOWN, np.int64), {}
    set_of = np.searchsorted(set_starts, representatives, side='right') - 1
    for s, (_, records) in enumerate(sets):
        chosen = np.flatnonzero(set_of == s)
        index = representatives[chosen] - set_starts[s]
        contained = records.column('offsets')[index] >= 0
        files = records.take(index[~contained])
        source_ids = files.column('source_ids')
        parts = [(~contained, check.files(files.audio_paths(), keys[chosen[~contained]],
                                          np.array(files.columns.sources, object)[source_ids])),
                 (contained, _indexed_headers(records.take(index[contained])))]
        for selection, (part_headers, part_problems) in parts:
            where = chosen[selection]
            headers[:, where] = part_headers
            problems.update((int(where[i]), problem) for i, problem in part_problems.items())
    return headers, problems


def _indexed_headers(records):
    """(headers [4, n], {index: problem}) of samples in .sdb files and shards, as their container indexes
    hold them (read with the records; no file size: a CSV's wav_filesize is not theirs)."""
    headers, problems = np.full((HEADER_ROWS, len(records)), UNKNOWN, np.int64), {}
    source_ids, numbers = records.column('source_ids'), records.column('rows')
    for source_id in np.unique(source_ids):
        rates, channels, frames, errors = records.columns.container_headers[source_id]
        ours = np.flatnonzero(source_ids == source_id)
        headers[:FILE_SIZE, ours] = rates[numbers[ours]], channels[numbers[ours]], frames[numbers[ours]]
        problems.update((int(i), (NOT_AUDIO, errors[int(numbers[i])])) for i in ours if int(numbers[i]) in errors)
    return headers, problems


def _update_cache(cache, new):
    """Add the headers this rank read to its cache file of each CSV."""
    sources, keys, stamps, headers = (np.concatenate(column) for column in zip(*new))
    for source in np.unique(sources):
        ours = sources == source
        cache.save(source, keys[ours], stamps[ours], headers[ours])


def _without_invalid(sets, found, messages, kinds, dist):
    """--skip_invalid_samples: the sets without the samples `found` invalid, after a summary."""
    if dist.is_chief:
        by_count = sorted(kinds.items(), key=lambda k: (-k[1], k[0]))
        counts = ', '.join('{} {}'.format(n, kind) for kind, n in by_count)
        log_warn('--skip_invalid_samples: skipping {} invalid sample(s): {}. The first {}:\n{}'.format(
            len(messages), counts, min(EXAMPLES, len(messages)), '\n'.join('  ' + m for m in messages[:EXAMPLES])))
    kept, empty = [], []
    for s, (name, records) in enumerate(sets):
        keep = np.ones(len(records), bool)
        keep[[i for set_index, i, _, _ in found if set_index == s]] = False
        kept.append(records.take(keep))
        if len(records) and not len(kept[-1]):
            empty.append('{}: every one of its {} sample(s) is invalid, nothing is left to use (fix them: run '
                         'without --skip_invalid_samples to list them all)'.format(name, len(records)))
    if empty:
        raise DataError(empty)
    for (name, records), kept_records in zip(sets, kept):
        if len(kept_records) < len(records):
            log_info('{}: using {} of {} sample(s)'.format(name, len(kept_records), len(records)))
    return kept


def validate_groups(dist, config, train_records, groups, skip_invalid=False):
    """validate_sets() over main()'s sets, all checked in one pass: train records (or None) and `groups`,
    {kind: {csv: records} or None} (dev, test, metrics ...). Returns (train records, groups) in the same
    shapes, without the invalid samples when `skip_invalid`."""
    sets = []
    if train_records:
        sources = list(dict.fromkeys(train_records.columns.sources))
        sets.append(('train set ({})'.format(', '.join(sources)), train_records))
    sets += [('{} set {}'.format(kind, path), records) for kind, named in groups.items()
             for path, records in (named or {}).items()]
    if not sets:
        return train_records, groups
    checked = iter(validate_sets(sets, config, dist, skip_invalid, cache_dir=config.data_cache_dir))
    if train_records:
        train_records = next(checked)
    return train_records, {kind: None if named is None else {path: next(checked) for path in named}
                           for kind, named in groups.items()}
