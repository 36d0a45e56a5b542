"""The validation pass: every sample's audio is checked before the first step, so bad input stops a run
in seconds instead of hours into an epoch (or, with --skip_invalid_samples, is left out up front).

Only headers are read, never the samples: a WAV file's first bytes (headers.py; a thread pool, which pays
on network filesystems), and of a sample in a sample database (.sdb) or tar shard nothing at all: its
container index holds its header (container_index.py). Headers of files are kept in a cache (--data_cache_dir,
headers.HeaderCache), so a second start of the same corpus stats only the folders of its files (a file in a
changed folder: the file), and a batch checks each file it reads again (check_read).
Everything per sample is numpy arrays (records.py), walked in blocks: at a million samples the pass costs
seconds and, beside the index, a dozen bytes a sample (the audio keys and their order) and the cache's 39.
A sample is invalid when its audio file is missing or unreadable, empty (0 bytes, or a header without
samples), not an audio file libsndfile can decode (corrupt, or e.g. a text file), at another rate than
--audio_sample_rate while --normalize_sample_rate is off, not mono, or too short for its transcript
under CTC (ctc_min_frames(labels) > the feature frames of its audio at the feature rate), or when its file
is smaller than the CSV's wav_filesize says (a copy cut short: of a FLAC or other compressed file the
header cannot tell). A file larger than its wav_filesize is no error (hand-written CSVs give 0 or rough
sizes): one warning counts them, since samples are sorted into batches by wav_filesize.

Under Horovod each rank reads the headers of its share of the distinct audio (those whose 64-bit key % size is
its rank) and caches what it read itself, then the ranks allgather the problems they found
(dist.gather_objects), so
every rank raises the same error, or skips the same samples, before any collective of training starts.
"""
import math
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .audio import frame_count
from .headers import (EMPTY, HEAD_BYTES, MISSING, NOT_AUDIO, UNREADABLE,  # noqa: F401 (kinds)
                      HEADER_FIELDS, Header, HeaderCache, path_key, read_header, stamp, times_digest, wav_header)
from ..util.gc_pause import gc_paused
from ..util.text import ctc_min_frames
from ..util.logging import Progress, log_info, log_warn
from .records import index_type
from .samples import DataError

# Problem kinds, as counted in the --skip_invalid_samples summary (with those of headers.py).
WRONG_RATE = 'wrong sample rate'
NOT_MONO = 'not mono'
TOO_LONG = 'transcript too long for the audio'
SMALLER = 'audio file smaller than its wav_filesize'

CHUNK = 256             # paths per pool task (one task per path costs more than reading a header)
POOL_MIN_PATHS = 256    # below this a pool does not pay for itself
PROGRESS_MIN_PATHS = 2000
MAX_WORKERS = 64        # header reads are I/O-bound: more threads than cores help on network filesystems
EXAMPLES = 5            # examples per summary of skipped samples
UNKNOWN = -1            # in a header column: no header (a problem instead)
NO_STAMP = (-1, -1, -1)
HEADER_ROWS = 4         # of a headers array: sample rates, channels, frames, file sizes
FILE_SIZE = 3           # the row of file sizes (UNKNOWN for the audio of a container)
BLOCK = 1 << 14         # samples checked at once (bounds what a million files hold in memory beside the index)


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


def check_read(record, data, audio, config):
    """(kind, what is wrong and how to fix it) of a CSV row's audio file as a batch reads it (`data`: its
    bytes, `audio`: them decoded at config.sample_rate), or None: check_headers() on what training would use.
    A file rewritten in place after the pass checked it, or after the header cache last did (HeaderCache
    trusts a file in an unchanged folder), is named before its audio meets its transcript."""
    header = wav_header(data[:HEAD_BYTES], len(data))
    if isinstance(header, tuple):
        return header
    labels = np.asarray(record.labels)
    headers = np.array([[config.sample_rate], [1], [len(audio)], [len(data)]], np.int64)
    problems, _ = check_headers(headers, np.array([record.filesize]), np.array([len(labels)]),
                                np.array([ctc_min_frames(labels)]), config)
    return problems[0][1:] if problems else None


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


def _pooled(function, items, workers):
    """[function(item) for item in items], by a thread pool in chunks of CHUNK when there are enough."""
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
    return results


def _file_stamp(path):
    try:
        return stamp(os.stat(path))
    except OSError:
        return NO_STAMP


class AudioCheck:
    """The headers of one rank's share of the distinct audio files of some sets: from the header cache (without
    a stat where the file's folder is unchanged, else with one), or read by a thread pool."""

    def __init__(self, cache, workers):
        self.cache, self.workers = cache, workers
        self.cached, self.unstatted, self.read = 0, 0, 0

    def files(self, paths, keys, source_ids):
        """(headers [4, n]: sample rates, channels, frames, file sizes, {index: problem}) of a block of audio
        files (`source_ids`: of each, its CSV's place in the cache's sources)."""
        headers = np.full((HEADER_ROWS, len(paths)), UNKNOWN, np.int64)
        hit = np.zeros(len(paths), bool)
        if self.cache:
            hit = self._cached(paths, keys, headers)
        misses = np.flatnonzero(~hit)
        self.read += len(misses)
        read = _pooled(read_header, [paths[i] for i in misses], self.workers)
        good = [n for n, (_, header) in enumerate(read) if isinstance(header, Header)]
        if good:
            stamps = np.array([read[n][0] for n in good], np.int64)
            read_headers = np.array([(read[n][1].sample_rate, read[n][1].channels, read[n][1].frames) for n in good],
                                    np.int64)
            headers[:FILE_SIZE, misses[good]] = read_headers.T
            headers[FILE_SIZE, misses[good]] = stamps[:, 0]
            if self.cache:
                self.cache.add(source_ids[misses[good]], keys[misses[good]], stamps, read_headers)
        return headers, {int(misses[n]): header for n, (_, header) in enumerate(read) if not isinstance(header, Header)}

    def _cached(self, paths, keys, headers):
        """Where the cache knows the file unchanged (its folder unchanged, or a stat the same): its header put in
        `headers`. Every folder is stamped here, before any of its files is read."""
        cache = self.cache
        folders = np.array([cache.folder_trusted(path.rpartition(b'/')[0]) for path in paths], bool)
        found, entries, places = cache.lookup(keys)
        trusted = found & folders
        to_stat = np.flatnonzero(found & ~trusted)
        stamps = np.array(_pooled(_file_stamp, [paths[i] for i in to_stat], self.workers), np.int64).reshape(-1, 3)
        same = (stamps[:, 0] == entries['size'][to_stat]) & \
            (times_digest(stamps[:, 1], stamps[:, 2]) == entries['times'][to_stat])
        hit = trusted.copy()
        hit[to_stat[same]] = True
        headers[:, hit] = [entries[name][hit] for name in HEADER_FIELDS + ('size',)]
        cache.use((places[0][hit], places[1][hit]))
        self.cached, self.unstatted = self.cached + int(hit.sum()), self.unstatted + int(trusted.sum())
        return hit


def default_workers(dist):
    """Threads per rank: header reads wait on I/O (a network filesystem's round trip), so 16 per core share, at
    most MAX_WORKERS (on a local disk 8 and 32 threads take the same time: 100k files, 2 cores)."""
    share = max(1, (os.cpu_count() or 1) // dist.local_size)
    return min(MAX_WORKERS, 16 * share)


def audio_keys(records, paths=None):
    """A 64-bit key of each record's audio (headers.path_key of its file, or of its container plus its offset):
    the same audio in two sets has one key, and every rank computes the same keys (`paths`: records.audio_paths(),
    if made already)."""
    keys = np.zeros(len(records), np.uint64)
    for start in range(0, len(records), BLOCK):
        block = records[start:start + BLOCK]
        keys[start:start + BLOCK] = [path_key(path) for path in (block.audio_paths() if paths is None
                                                                  else paths[start:start + BLOCK])]
        offsets = block.column('offsets')
        contained = offsets >= 0
        keys[start:start + BLOCK][contained] += offsets[contained].astype(np.uint64)
    return keys


def share_in_key_order(sets, dist):
    """This rank's samples of `sets` (indices into the sets laid end to end) in the order of their audio keys:
    a rank checks the audio whose key % size is its rank, and the samples of one audio come together. (The
    keys are not kept: 8 bytes a sample; the walk computes a block's again.)"""
    keys = np.concatenate([audio_keys(records) for _, records in sets]) if len(sets) > 1 else audio_keys(sets[0][1])
    index = index_type(len(keys))
    if dist.size == 1:
        return np.argsort(keys, kind='stable').astype(index)
    mine = np.flatnonzero(keys % np.uint64(dist.size) == dist.rank).astype(index)
    return mine[np.argsort(keys[mine], kind='stable')]


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
    order = share_in_key_order(sets, dist)
    set_starts = np.cumsum([0] + [len(records) for _, records in sets])
    csv_sources = sorted({records.columns.sources[i] for _, records in sets
                          for i in np.unique(records.column('source_ids')[records.column('offsets') < 0])})
    cache = HeaderCache(cache_dir, csv_sources, dist.rank, dist.size) if cache_dir and csv_sources else None
    progress = (Progress('Checking audio', len(order), unit='Samples', show_loss=False)
                if dist.is_chief and len(order) >= PROGRESS_MIN_PATHS else None)
    check = AudioCheck(cache, default_workers(dist) if workers is None else workers)
    walk = ShareWalk(sets, set_starts, csv_sources, check, config)
    for start in range(0, len(order), BLOCK):
        walk.block(order[start:start + BLOCK])
        if progress:
            progress.update(min(start + BLOCK, len(order)))
    del order
    if progress:
        progress.finish()
    found, larger = walk.found, walk.larger
    if cache:
        cache.save()
    found, n_read, cached, larger, distinct, unstatted = zip(*dist.gather_objects(
        (found, check.read, check.cached, larger, walk.distinct, check.unstatted)))
    found = sorted(p for rank_found in found for p in rank_found)

    messages, kinds = _messages(sets, found)
    n_samples = sum(len(records) for _, records in sets)
    log_info('Checked the audio of {} sample(s) ({} distinct) in {:.1f} s: {} invalid{}'.format(
        n_samples, sum(distinct), time.time() - started, len(messages),
        '' if not cache else '; {} file header(s) read, {} known unchanged from the cache in {} ({} in unchanged '
        'folders, not stat\'ed)'.format(sum(n_read), sum(cached), cache_dir, sum(unstatted))))
    if cache and dist.is_chief:
        cache.forget_stale()
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


class ShareWalk:
    """This rank's share of the samples, walked in key order a block at a time: the headers of each distinct
    audio read once (`_headers`), then every sample checked against its own labels and wav_filesize. Holds
    what the walk found: problems (set, index, kind, what), larger files (count, (set, index, file size) of the
    first) and the number of distinct audio."""

    def __init__(self, sets, set_starts, csv_sources, check, config):
        self.sets, self.set_starts, self.check, self.config = sets, set_starts, check, config
        # per set, its Columns' source ids -> places in the cache's list of CSVs (-1: a container)
        self.source_places = [np.array([csv_sources.index(source) if source in csv_sources else -1
                                        for source in records.columns.sources], np.int32) for _, records in sets]
        self.found, self.larger, self.distinct = [], [], 0
        self.last = None        # (key, header column, problem or None) of the last audio of the previous block

    def block(self, samples):
        """Check `samples` (indices into the sets laid end to end, in key order)."""
        set_of = np.searchsorted(self.set_starts, samples, side='right') - 1
        block_keys, paths = np.zeros(len(samples), np.uint64), [None] * len(samples)
        for s, (_, records) in enumerate(self.sets):
            chosen = np.flatnonzero(set_of == s)
            if len(chosen):
                view = records.take(samples[chosen] - self.set_starts[s])
                set_paths = view.audio_paths()
                block_keys[chosen] = audio_keys(view, set_paths)
                for position, path in zip(chosen.tolist(), set_paths):
                    paths[position] = path
        first = np.append(True, block_keys[1:] != block_keys[:-1])
        if self.last is not None and block_keys[0] == self.last[0]:
            first[0] = False        # the audio the previous block ended with
        representatives = samples[first]
        headers, problems = self._headers(representatives, block_keys[first],
                                          [paths[i] for i in np.flatnonzero(first).tolist()])
        if self.last is not None:       # column 0: the previous block's last audio
            headers = np.concatenate([self.last[1][:, None], headers], axis=1)
            problems = {i + 1: problem for i, problem in problems.items()}
            if self.last[2]:
                problems[0] = self.last[2]
        audio = np.cumsum(first) - (0 if self.last is not None else 1)    # each sample's column of `headers`
        self.distinct += len(representatives)
        self.last = (block_keys[-1], headers[:, -1], problems.get(headers.shape[1] - 1))
        for s, (_, records) in enumerate(self.sets):
            chosen = np.flatnonzero(set_of == s)
            if not len(chosen):
                continue
            index = samples[chosen] - self.set_starts[s]
            checked, sample_headers = records.take(index), headers[:, audio[chosen]]
            header_problems, larger_ones = check_headers(sample_headers, checked.column('sizes'),
                                                         checked.label_lengths(), checked.ctc_min_frames(), self.config)
            self.found += [(s, int(index[i]), kind, what) for i, kind, what in header_problems]
            self.found += [(s, int(index[i])) + tuple(problems[int(audio[chosen[i]])])
                           for i in np.flatnonzero(np.isin(audio[chosen], list(problems)))]
            if len(larger_ones):
                first_larger = larger_ones[np.argmin(index[larger_ones])]       # (the first in the set's order)
                self.larger.append((len(larger_ones), (s, int(index[first_larger]),
                                                       int(sample_headers[FILE_SIZE, first_larger]))))

    def _headers(self, representatives, keys, paths):
        """(headers [4, n], {index: problem}) of distinct audio (`keys`, `paths`), each read through its sample
        `representatives` (indices into the sets laid end to end)."""
        headers, problems = np.full((HEADER_ROWS, len(keys)), UNKNOWN, np.int64), {}
        set_of = np.searchsorted(self.set_starts, representatives, side='right') - 1
        for s, (_, records) in enumerate(self.sets):
            chosen = np.flatnonzero(set_of == s)
            if not len(chosen):
                continue
            index = representatives[chosen] - self.set_starts[s]
            contained = records.take(index).column('offsets') >= 0
            files, file_reps = records.take(index[~contained]), chosen[~contained]
            parts = [(~contained, self.check.files([paths[i] for i in file_reps.tolist()], keys[file_reps],
                                                   self.source_places[s][files.column('source_ids')])),
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
