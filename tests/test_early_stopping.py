import math

from deepspeech_training.early_stopping import DevTracker


def decisions(tracker, losses):
    return [tracker.update(loss) for loss in losses]


def test_best_is_saved_on_any_decrease_but_improvement_needs_min_delta():
    tracker = DevTracker(math.inf, min_delta=0.5)
    first, small, big = decisions(tracker, [10.0, 9.8, 9.0])
    assert first.save_best and small.save_best and big.save_best
    assert tracker.epochs_without_improvement == 0
    tracker.update(8.9)   # better, yet by less than min_delta
    assert tracker.epochs_without_improvement == 1


def test_early_stop_fires_after_es_epochs_without_improvement():
    tracker = DevTracker(math.inf, 0.0, es_epochs=2)
    stops = [d.stop for d in decisions(tracker, [5.0, 6.0, 7.0])]
    assert stops == [False, False, True]


def test_plateau_repeats_every_plateau_epochs():
    tracker = DevTracker(math.inf, 0.0, plateau_epochs=2)
    plateaus = [d.plateau for d in decisions(tracker, [5.0, 6.0, 6.0, 6.0, 6.0, 4.0, 6.0])]
    assert plateaus == [False, False, True, False, True, False, False]


def test_a_resumed_run_does_not_save_a_worse_best():
    tracker = DevTracker(best_loss=3.0, min_delta=0.0)
    assert not tracker.update(4.0).save_best
    assert tracker.update(2.0).save_best
