"""Which samples each rank reads, in which batches: pure arithmetic on sample indices.

The indices refer to records sorted by length, so consecutive indices batch together with little
padding. Every rank gets the same number of batches by construction, which Horovod requires (a rank
that runs out of batches early makes the others hang in their next allreduce):

- training trims the epoch to a multiple of ranks x batch, rotating the left-out samples from epoch
  to epoch so that none is lost for good;
- evaluation pads with `PADDING` entries (weight 0, masked out of every metric) so that every sample
  is counted exactly once.

A global batch holds `size * batch_size` consecutive indices; rank r takes the r-th sub-batch, so at
each step all ranks work on samples of similar length.
"""
import random

import numpy as np

PADDING = -1   # stands for a silent dummy sample with weight 0


class SetTooSmallError(ValueError):
    pass


def train_batches(n_samples, batch_size, size=1, rank=0, epoch=0, seed=0, shuffle=False):
    """This rank's training batches (arrays of sample indices) for `epoch`: numpy arithmetic and a list
    of batches, nothing per sample in Python (a plan is made every epoch, of up to millions of samples).

    With one process the last batch may be smaller (as in DeepSpeech, nothing is left out)."""
    global_batch = batch_size * size
    kept = np.arange(n_samples, dtype=np.int64)
    if size > 1:
        steps = n_samples // global_batch
        if steps == 0:
            raise SetTooSmallError('{} training samples cannot fill one step of {} ranks x batch size {}: use more '
                                   'samples, fewer ranks or a smaller --train_batch_size'
                                   .format(n_samples, size, batch_size))
        left_out = n_samples - steps * global_batch
        if left_out:
            kept = np.delete(kept, ((epoch * left_out) % n_samples + np.arange(left_out)) % n_samples)
    global_batches = [kept[i:i + global_batch] for i in range(0, len(kept), global_batch)]
    if shuffle:
        # int(): an epoch or seed from numpy (the epoch from the global step is one) is no seed since Python 3.11
        random.Random(int(seed) * 1000003 + int(epoch)).shuffle(global_batches)
    return [b[rank * batch_size:(rank + 1) * batch_size] for b in global_batches]


def eval_batches(n_samples, batch_size, size=1, rank=0):
    """This rank's evaluation batches: every sample exactly once over all ranks, every batch full
    (padded with PADDING), the same number of batches on every rank."""
    global_batch = batch_size * size
    n_batches = max(1, -(-n_samples // global_batch))
    padded = np.full(n_batches * global_batch, PADDING, np.int64)
    padded[:n_samples] = np.arange(n_samples)
    return list(padded.reshape(n_batches, size, batch_size)[:, rank])
