"""The batch input of all sets of a run (train, dev, test...): an iterator per set behind one input, the set
chosen by feeding its iterator's handle, so one graph serves them all."""
from dataclasses import dataclass

import tensorflow.compat.v1 as tfv1


@dataclass
class SetIterator:
    """The iterator build_input made for one InputSet, and where it stands.

    Its initializer, run with `epoch` and `first_batch` fed, says where the set's (endless) dataset
    starts; feeding `handle` to `selector` makes the input read this set."""
    input_set: object       # data.plans.InputSet
    end_epoch: int = None   # the first epoch the run will not reach (None: not known)
    initializer: object = None
    epoch: object = None
    first_batch: object = None
    string_handle: object = None
    selector: object = None
    handle: bytes = None
    # (epoch, first batch) the iterator yields next, None when unknown (never started, or a run of its
    # batches did not finish): set_steps starts the iterator there only when it is somewhere else.
    position: tuple = None

    @property
    def name(self):
        return self.input_set.name

    def n_batches(self, epoch=0):
        return self.input_set.n_batches(epoch)

    def planned(self, epoch):
        """This set's batches of `epoch`, none from `end_epoch` on: the dataset ends there instead of
        reading ahead into an epoch that never comes."""
        return [] if self.end_epoch is not None and epoch >= self.end_epoch else self.input_set.plan(epoch)

    def select(self, session, feed=None):
        """`feed` plus what makes the input read this set's next batch."""
        if self.handle is None:
            self.handle = session.run(self.string_handle)
        feed = dict(feed or {})
        feed[self.selector] = self.handle
        return feed

    def restart(self, end_epoch):
        """Forget where the iterator stands (after an elastic reset the plans are the new ranks'), and
        end it before `end_epoch`."""
        self.position, self.end_epoch = None, end_epoch


def build_input(sets, config):
    """One batch input for all `sets`: (the batch tensors, a SetIterator per set). It reads the first
    set unless another's handle is fed (SetIterator.select)."""
    iterators = []
    for input_set in sets:
        iterator = SetIterator(input_set)
        dataset, iterator.epoch, iterator.first_batch = input_set.make_dataset(
            input_set.records, iterator.planned, input_set.batch_size, config, augmenter=input_set.augmenter,
            feature_cache=input_set.feature_cache)
        tf_iterator = tfv1.data.make_initializable_iterator(dataset)
        iterator.initializer, iterator.string_handle = tf_iterator.initializer, tf_iterator.string_handle()
        iterators.append(iterator)
    selector = tfv1.placeholder_with_default(iterators[0].string_handle, [], 'input_set')
    for iterator in iterators:
        iterator.selector = selector
    batch = tfv1.data.Iterator.from_string_handle(selector, tfv1.data.get_output_types(dataset),
                                                  tfv1.data.get_output_shapes(dataset)).get_next()
    return batch, iterators
