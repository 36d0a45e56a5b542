"""Input plans: which records a set feeds and in which batches, for this rank. Training and evaluation
both build their sets here, so neither imports the other."""
from dataclasses import dataclass
from typing import Callable, List

from .augmentations import Augmenter, parse_augmentations
from .batching import eval_batches, train_batches
from .feature_cache import open_feature_cache
from .feeding import create_dataset


@dataclass
class InputSet:
    """One set (a CSV, or the merged train CSVs) to feed: its records and batch plan."""
    name: str
    records: list
    plan: Callable[[int], List[list]]     # epoch -> this rank's batches of record indices
    batch_size: int
    augmenter: object = None                # augmentations.Augmenter, for training only
    feature_cache: object = None            # feature_cache.FeatureCache, for training only
    make_dataset: Callable = create_dataset   # create_dataset's signature (a benchmark feeds cached batches)

    def n_batches(self, epoch=0):
        return len(self.plan(epoch))


def train_set(records, dist, config, training):
    """The training InputSet of this rank; a set too small for ranks x batch fails here, before any work."""
    def plan(epoch):
        return train_batches(len(records), training.train_batch_size, dist.size, dist.rank, epoch,
                             training.random_seed, training.shuffle_batches)
    plan(0)
    augmenter = None
    if training.augment:
        # A:B ranges over the epochs of end_epochs(): all of them with --total_epochs
        augmenter = Augmenter(parse_augmentations(training.augment), training.random_seed,
                              training.total_epochs or training.epochs)
    feature_cache = open_feature_cache(training.feature_cache, records, config, training, dist.process_name())
    return InputSet('Training', records, plan, training.train_batch_size, augmenter, feature_cache)


def eval_set(name, records, batch_size, dist):
    """A validation or test InputSet: this rank's padded share of every sample."""
    def plan(epoch):
        return eval_batches(len(records), batch_size, dist.size, dist.rank)
    return InputSet(name, records, plan, batch_size)
