"""--feature_cache: the training samples' features, computed once and read back in later epochs.

One cache per process (`PATH`; under Horovod `PATH.rank<N>`, elastic `PATH.<host>.local<N>`),
since each computes only its own shard; entries are by sample, so after a change of ranks a cache
simply fills in the samples of the new shard. Two files: PATH holds the features as raw float32,
appended as samples are computed; PATH.json is the index (sample -> offset, frames, CRC-32 of the
features' bytes) with the key the features were made under, replaced atomically at the end of each
epoch. A crash leaves at worst unindexed bytes at the end of PATH, cut off on the next load, so the
cache never hands out half-written features. Damage from outside (bytes changed, the file cut short
by a copy) fails an entry's CRC when it is read, or puts it past the file's end when the cache is
opened: that sample is recomputed from its audio with a warning naming it, never fed to training.
Checking the CRC costs ~3.5 us per 25 KB entry (a 5 s utterance, read in ~5 us from the page
cache), measured 2026-12-06: nothing next to a training step.

The key covers everything the features depend on: the feature flags, --augment (the cache keeps
augmented features, as DeepSpeech 0.9's did) and the sample list (path and size of every sample, in
order). If any of them changed the cache is started afresh and the log says why.
"""
import hashlib
import json
import os
import threading
import zlib

import numpy as np

from ..util.atomic import atomic_write
from ..util.logging import log_info, log_warn

FORMAT = 2          # of the index: 2 added each entry's CRC-32 (a cache of format 1 is recomputed)
ENTRY_FIELDS = ('offset', 'frames', 'crc32')      # of an index entry
NAMED_DAMAGED = 5   # damaged entries named one by one between two saves; the others are counted


def cache_path(path, process_name):
    return '{}.{}'.format(path, process_name) if process_name else path


def samples_digest(records):
    digest = hashlib.sha256()
    for record in records:
        digest.update('{}\0{}\n'.format(record.audio_name, record.filesize).encode('utf-8'))
    return digest.hexdigest()


class FeatureCache:
    """This rank's cached features of `records`; thread-safe (the input pipeline stores from its threads)."""

    def __init__(self, path, records, n_input, feature_key, cache_for_epochs):
        self.path, self.records, self.n_input, self.cache_for_epochs = path, records, n_input, cache_for_epochs
        self.key = dict(feature_key, samples=samples_digest(records), n_samples=len(records), format=FORMAT)
        self.lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.entries, self.built_epoch = self._load()
        self.damaged, self.damaged_named = 0, 0     # entries found damaged since the last save; of them named
        self._drop_past_end(os.path.getsize(path) if os.path.exists(path) else 0)
        self.data = open(path, 'a+b')
        self.dirty = False       # entries added or dropped since the last save
        self.size = self._indexed_bytes()
        self.data.truncate(self.size)    # bytes appended after the last save belong to no entry

    def _load(self):
        try:
            with open(self.path + '.json') as index_file:
                index = json.load(index_file)
            stored_key = index.get('key', {})
            changed = [name for name in sorted(set(self.key) | set(stored_key))
                       if stored_key.get(name) != self.key.get(name)]
            entries = {} if changed else {int(i): tuple(int(n) for n in v) for i, v in index['entries'].items()}
            if any(len(entry) != len(ENTRY_FIELDS) for entry in entries.values()):
                raise ValueError('an entry is not ({})'.format(', '.join(ENTRY_FIELDS)))
            built_epoch = None if changed else index['built_epoch']
        except FileNotFoundError:
            return {}, None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log_warn('Feature cache {}: unreadable index ({}), recomputing'.format(self.path, error))
            return {}, None
        if changed:
            log_info('Feature cache {} was made for other {}: recomputing it'.format(
                self.path, ', '.join(_DESCRIPTIONS.get(name, name) for name in changed)))
            return {}, None
        log_info('Feature cache {}: {} of {} samples cached'.format(self.path, len(entries), self.key['n_samples']))
        return entries, built_epoch

    def _entry_bytes(self, frames):
        return frames * self.n_input * 4

    def _indexed_bytes(self):
        return max((offset + self._entry_bytes(frames) for offset, frames, _ in self.entries.values()), default=0)

    def _drop_past_end(self, file_size):
        """Drop the entries a data file cut short (a copy, a full disk) no longer holds; the rest stay."""
        past_end = [index for index, (offset, frames, _) in self.entries.items()
                    if offset + self._entry_bytes(frames) > file_size]
        if past_end:
            log_warn('Feature cache {} is shorter than its index says ({} bytes, the index needs {}): the features '
                     'of {} sample(s) past its end are recomputed'.format(self.path, file_size, self._indexed_bytes(),
                                                                         len(past_end)))
            for index in past_end:
                del self.entries[index]

    def start_epoch(self, epoch):
        """Drop the cache if --cache_for_epochs says it expired, so this epoch computes it anew."""
        with self.lock:
            if self.built_epoch is not None and self.cache_for_epochs and \
                    epoch - self.built_epoch >= self.cache_for_epochs:
                log_info('Feature cache {} expired after {} epoch(s) (--cache_for_epochs): recomputing'
                         .format(self.path, epoch - self.built_epoch))
                self.entries, self.built_epoch = {}, None
                self._write_index()
                self.data.truncate(0)
                self.size = 0
            if self.built_epoch is None:
                self.built_epoch = epoch

    def get(self, index):
        """The cached features of sample `index`, or None (also when its entry is damaged: it is then
        dropped, and recomputed and stored again by the caller)."""
        with self.lock:
            entry = self.entries.get(index)
            if entry is None:
                return None
            self.data.flush()
            offset, frames, crc = entry
            raw = os.pread(self.data.fileno(), self._entry_bytes(frames), offset)
        if zlib.crc32(raw) != crc:
            self._drop_damaged(index, entry)
            return None
        return np.frombuffer(raw, np.float32).reshape(-1, self.n_input)

    def _drop_damaged(self, index, entry):
        with self.lock:
            if self.entries.get(index) != entry:
                return      # (another thread dropped it first)
            del self.entries[index]
            self.damaged, self.dirty = self.damaged + 1, True
            if self.damaged_named == NAMED_DAMAGED:
                return
            self.damaged_named += 1
        log_warn('Feature cache {}: the features of {} are damaged (their checksum does not match, at byte {}): '
                 'recomputing them from the audio{}'.format(
                     self.path, self.records[index].where, entry[0],
                     '; further damaged entries are counted when the epoch ends'
                     if self.damaged_named == NAMED_DAMAGED else ''))

    def put(self, index, features):
        with self.lock:
            if index in self.entries:
                return
            data = np.ascontiguousarray(features, np.float32).tobytes()
            self.data.write(data)
            self.entries[index] = (self.size, len(features), zlib.crc32(data))
            self.size += len(data)
            self.dirty = True

    def save(self):
        """Make what was computed so far durable: data first, then the index that points into it. An
        epoch that added nothing (every epoch once all is cached) costs nothing: no fsync."""
        with self.lock:
            if self.damaged > self.damaged_named:
                log_warn('Feature cache {}: {} damaged entries recomputed from the audio since the last save'
                         .format(self.path, self.damaged))
            self.damaged, self.damaged_named = 0, 0
            if not self.dirty:
                return
            self.data.flush()
            os.fsync(self.data.fileno())
            self._write_index()
            self.dirty = False

    def _write_index(self):
        with atomic_write(self.path + '.json', durable=True) as index_file:
            json.dump(dict(key=self.key, built_epoch=self.built_epoch,
                           entries={str(i): list(v) for i, v in self.entries.items()}), index_file)

    def close(self):
        self.data.close()


_DESCRIPTIONS = {'features': 'feature flags', 'augment': '--augment operations', 'samples': 'samples',
                 'n_samples': 'number of samples', 'format': 'cache format (an older version of this trainer)'}


def open_feature_cache(path, records, config, training, process_name):
    """The cache of this process (`process_name`, see distributed.py) for training, or None without
    --feature_cache (`training`: the TrainingSettings, whose augmentations and cache period it follows)."""
    if not path:
        return None
    if training.augment and not training.cache_for_epochs:
        log_warn('--feature_cache keeps the augmented features of the first epoch for every later epoch; '
                 'give --cache_for_epochs N to draw new augmentations every N epochs')
    feature_key = dict(features=[config.sample_rate, config.audio_window_samples, config.audio_step_samples,
                                 config.n_input, config.normalize_sample_rate],
                       augment=[list(training.augment or []), training.random_seed if training.augment else None])
    return FeatureCache(cache_path(path, process_name), records, config.n_input, feature_key, training.cache_for_epochs)
