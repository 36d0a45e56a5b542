"""--feature_cache / --cache_for_epochs: features computed once, read back, recomputed when stale."""
import json
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tfv1

from tests.helpers.suite import SMOKE_CSV, make_corpus, run_deepspeech, run_horovod, tiny_model_flags
from test_features import CONFIG
from deepspeech_training.data.audio import read_audio
from deepspeech_training.data.batching import train_batches
from deepspeech_training.data import feature_cache
from deepspeech_training.data.feature_cache import FeatureCache
from deepspeech_training.data.feeding import create_dataset
from deepspeech_training.data.samples import read_sources

KEY = dict(features=[16000, 512, 320, 26, True], augment=[[], None])


class CountingReader:
    def __init__(self):
        self.paths = []

    def __call__(self, path, sample_rate, normalize_sample_rate):
        self.paths.append(getattr(path, 'name', path))      # (a file's bytes, read once and checked, come named)
        return read_audio(path, sample_rate, normalize_sample_rate)


def epoch_features(records, cache, epochs):
    """Features of every batch of each epoch, and the audio files read in each, through create_dataset."""
    reader = CountingReader()
    with tfv1.Graph().as_default():
        dataset, epoch, _ = create_dataset(records, lambda e: train_batches(len(records), 2), 2, CONFIG,
                                        audio_reader=reader, feature_cache=cache)
        iterator = tfv1.data.make_initializable_iterator(dataset)
        batch = iterator.get_next()
        results = []
        with tfv1.Session() as session:
            for e in range(epochs):
                before = len(reader.paths)
                session.run(iterator.initializer, {epoch: e})
                features = []
                for _ in train_batches(len(records), 2):
                    weights, windows = session.run([batch[1], batch[2]])
                    features.append(windows[weights > 0])    # without a padded last batch's padding
                if cache:
                    cache.save()
                results.append((features, reader.paths[before:]))
    return results


def test_cached_epochs_read_no_audio_and_give_the_same_features(tmp_path, alphabet):
    records = read_sources([SMOKE_CSV], alphabet)
    (plain, _), = epoch_features(records, None, 1)
    cache = FeatureCache(str(tmp_path / 'cache'), records, 26, KEY, cache_for_epochs=0)
    (first, read_first), (second, read_second) = epoch_features(records, cache, 2)
    assert len(read_first) == len(records) and read_second == []
    for a, b, c in zip(plain, first, second):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    cache.close()
    # A new process (a resumed run) reads the cache from disk.
    reopened = FeatureCache(str(tmp_path / 'cache'), records, 26, KEY, cache_for_epochs=0)
    (again, read_again), = epoch_features(records, reopened, 1)
    assert read_again == []
    for a, b in zip(plain, again):
        np.testing.assert_array_equal(a, b)


def test_cache_for_epochs_recomputes_every_n_epochs(tmp_path, alphabet):
    records = read_sources([SMOKE_CSV], alphabet)
    cache = FeatureCache(str(tmp_path / 'cache'), records, 26, KEY, cache_for_epochs=2)
    reads = [len(paths) for _, paths in epoch_features(records, cache, 5)]
    assert reads == [3, 0, 3, 0, 3]


def test_bytes_left_by_a_crash_after_the_last_save_are_ignored(tmp_path, alphabet):
    records = read_sources([SMOKE_CSV], alphabet)
    path = str(tmp_path / 'cache')
    cache = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    (plain, _), = epoch_features(records, cache, 1)
    cache.close()
    size = os.path.getsize(path)
    with open(path, 'ab') as data:          # a sample half-written when the process died
        data.write(b'\x01' * 1000)
    reopened = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    assert os.path.getsize(path) == size
    (again, read), = epoch_features(records, reopened, 1)
    assert read == []
    for a, b in zip(plain, again):
        np.testing.assert_array_equal(a, b)


def test_a_damaged_entry_is_recomputed_from_its_audio_alone_with_a_warning(tmp_path, alphabet, capsys):
    records = read_sources([SMOKE_CSV], alphabet)
    path = str(tmp_path / 'cache')
    cache = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    (plain, _), = epoch_features(records, cache, 1)
    cache.close()
    offset, frames, _ = cache.entries[1]
    with open(path, 'r+b') as data:           # one flipped byte in the middle of sample 1's features
        data.seek(offset + frames * 13 * 4)
        byte = data.read(1)
        data.seek(-1, os.SEEK_CUR)
        data.write(bytes([byte[0] ^ 0x40]))
    capsys.readouterr()
    reopened = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    (again, read), = epoch_features(records, reopened, 1)
    assert read == [records[1].audio_path]
    for a, b in zip(plain, again):
        np.testing.assert_array_equal(a, b)
    assert 'W Feature cache {}: the features of {} are damaged (their checksum does not match, at byte {}): ' \
        'recomputing them from the audio'.format(path, records[1].where, offset) in capsys.readouterr().err
    reopened.close()
    assert epoch_features(records, FeatureCache(path, records, 26, KEY, cache_for_epochs=0), 1)[0][1] == []


def test_a_cache_of_an_older_format_is_recomputed_with_a_message(tmp_path, alphabet, capsys):
    """Format 1 (before each entry's CRC): its entries cannot be checked, so they are not used."""
    records = read_sources([SMOKE_CSV], alphabet)
    path = str(tmp_path / 'cache')
    cache = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    epoch_features(records, cache, 1)
    cache.close()
    index = json.loads(open(path + '.json').read())
    del index['key']['format']
    index['entries'] = {i: entry[:2] for i, entry in index['entries'].items()}
    with open(path + '.json', 'w') as old:
        json.dump(index, old)
    capsys.readouterr()
    (_, read), = epoch_features(records, FeatureCache(path, records, 26, KEY, cache_for_epochs=0), 1)
    assert len(read) == len(records)
    assert 'Feature cache {} was made for other cache format (an older version of this trainer): recomputing ' \
        'it'.format(path) in capsys.readouterr().out


def test_beyond_the_first_damaged_entries_named_the_rest_are_counted_at_the_save(tmp_path, alphabet, capsys,
                                                                                 monkeypatch):
    monkeypatch.setattr(feature_cache, 'NAMED_DAMAGED', 1)
    records = read_sources([SMOKE_CSV], alphabet)
    path = str(tmp_path / 'cache')
    cache = FeatureCache(path, records, 26, KEY, cache_for_epochs=0)
    epoch_features(records, cache, 1)
    cache.close()
    with open(path, 'r+b') as data:
        data.write(bytes(os.path.getsize(path)))          # every entry zeroed
    capsys.readouterr()
    (_, read), = epoch_features(records, FeatureCache(path, records, 26, KEY, cache_for_epochs=0), 1)
    assert len(read) == len(records)
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2 and warnings[0].endswith('recomputing them from the audio; further damaged entries are '
                                                       'counted when the epoch ends')
    assert warnings[1] == 'W Feature cache {}: 3 damaged entries recomputed from the audio since the last save'.format(
        path)


@pytest.mark.slow    # a horovodrun (about a minute): not in the fast tier
def test_cache_is_recomputed_when_csv_or_feature_flags_change_and_per_rank_under_horovod(tmp_path):
    corpus = make_corpus(tmp_path / 'corpus', 12, seed=5)
    train_csv = str(corpus / 'train.csv')
    cache = tmp_path / 'features'
    common = ['--train_files', train_csv, '--epochs', 1, '--train_batch_size', 2, '--feature_cache', cache]
    first = run_deepspeech(*common, *tiny_model_flags(tmp_path / 'a'))
    index = json.loads((tmp_path / 'features.json').read_text())
    n_train = index['key']['n_samples']
    assert len(index['entries']) == n_train
    assert 'Feature cache' not in first.output      # nothing to reuse yet

    again = run_deepspeech(*common, *tiny_model_flags(tmp_path / 'b'))
    assert 'Feature cache {}: {} of {} samples cached'.format(cache, n_train, n_train) in again.output

    lines = open(train_csv).read().splitlines()
    edited = corpus / 'edited.csv'
    edited.write_text('\n'.join(lines[:-1]) + '\n')
    # the CSV edited and a feature flag changed in one run: the message names each part of the key that changed
    changed = run_deepspeech(*(common[:1] + [edited] + common[2:]), '--feature_win_step', 10,
                             *tiny_model_flags(tmp_path / 'c'))
    assert 'Feature cache {} was made for other feature flags, number of samples, samples: recomputing it'.format(
        cache) in changed.output

    run_horovod(2, *common, *tiny_model_flags(tmp_path / 'd'), timeout=240)
    shards = [json.loads((tmp_path / 'features.rank{}.json'.format(r)).read_text()) for r in (0, 1)]
    rank_entries = [set(shard['entries']) for shard in shards]
    assert not rank_entries[0] & rank_entries[1]          # each rank computed only its own samples
    assert len(rank_entries[0]) + len(rank_entries[1]) == n_train - n_train % 4   # trimmed to 2 ranks x 2
