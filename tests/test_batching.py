"""The shard arithmetic Horovod depends on: equal batch counts on every rank, disjoint train shards,
every eval sample exactly once."""
import pytest
from hypothesis import given, settings, strategies as st

from deepspeech_training.data import batching
from deepspeech_training.data.batching import PADDING, SetTooSmallError


def train_batches(*args, **kwargs):
    return [batch.tolist() for batch in batching.train_batches(*args, **kwargs)]


def eval_batches(*args, **kwargs):
    return [batch.tolist() for batch in batching.eval_batches(*args, **kwargs)]


def test_single_process_keeps_every_sample_in_length_order():
    assert train_batches(5, 2) == [[0, 1], [2, 3], [4]]


def test_two_ranks_take_neighbouring_sub_batches():
    assert train_batches(8, 2, size=2, rank=0) == [[0, 1], [4, 5]]
    assert train_batches(8, 2, size=2, rank=1) == [[2, 3], [6, 7]]


def test_left_out_samples_rotate_between_epochs():
    left_out = []
    for epoch in range(7):
        kept = {i for rank in range(2) for b in train_batches(7, 1, 2, rank, epoch) for i in b}
        left_out.append(set(range(7)) - kept)
    assert all(len(s) == 1 for s in left_out)
    assert set.union(*left_out) == set(range(7))


def test_shuffle_is_seeded_and_the_same_on_every_rank():
    a = train_batches(40, 2, 2, 0, epoch=3, seed=1, shuffle=True)
    b = train_batches(40, 2, 2, 1, epoch=3, seed=1, shuffle=True)
    assert a == train_batches(40, 2, 2, 0, epoch=3, seed=1, shuffle=True)
    assert a != train_batches(40, 2, 2, 0, epoch=4, seed=1, shuffle=True)
    assert [x[0] // 4 for x in a] == [x[0] // 4 for x in b]   # same global batches, same order


def test_shuffle_takes_numpy_epochs_and_seeds():
    import numpy as np    # the epoch computed from the global step is a numpy integer (Python 3.11's Random refuses it)
    assert (train_batches(40, 2, epoch=np.int64(3), seed=np.int64(1), shuffle=True)
            == train_batches(40, 2, epoch=3, seed=1, shuffle=True))


def test_set_smaller_than_ranks_times_batch_is_an_error():
    with pytest.raises(SetTooSmallError, match='3 training samples cannot fill one step of 2 ranks x batch size 2'):
        train_batches(3, 2, size=2)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 60), size=st.integers(1, 6), batch=st.integers(1, 8), epoch=st.integers(0, 5))
def test_shard_properties(n, size, batch, epoch):
    if n >= size * batch or size == 1:
        shards = [train_batches(n, batch, size, r, epoch, seed=7, shuffle=True) for r in range(size)]
        assert len({len(s) for s in shards}) == 1
        flat = [i for s in shards for b in s for i in b]
        assert len(flat) == len(set(flat))
        if size > 1:
            assert all(len(b) == batch for s in shards for b in s)
            assert len(flat) == n - n % (size * batch)
        else:
            assert sorted(flat) == list(range(n))
    evals = [eval_batches(n, batch, size, r) for r in range(size)]
    assert len({len(e) for e in evals}) == 1
    assert all(len(b) == batch for e in evals for b in e)
    real = [i for e in evals for b in e for i in b if i != PADDING]
    assert sorted(real) == list(range(n))
