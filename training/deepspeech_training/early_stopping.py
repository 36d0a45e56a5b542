"""What to do after a validation: save best_dev, stop early, or reduce the learning rate on a plateau.

DeepSpeech 0.9's rules: a dev loss counts as an improvement when it is lower than the best minus
`es_min_delta`; the early stop fires after `es_epochs` epochs without improvement and the plateau
every `plateau_epochs` epochs without improvement. Pure logic, fed with the dev loss that is the same
on every rank, so every rank decides the same.
"""
from dataclasses import dataclass


@dataclass
class Decision:
    save_best: bool
    stop: bool
    plateau: bool


class DevTracker:
    def __init__(self, best_loss, min_delta, es_epochs=None, plateau_epochs=None):
        """`es_epochs` / `plateau_epochs` None switch that rule off."""
        self.best_loss = best_loss
        self.min_delta = min_delta
        self.es_epochs = es_epochs
        self.plateau_epochs = plateau_epochs
        self.epochs_without_improvement = 0

    def update(self, dev_loss):
        save_best = dev_loss < self.best_loss
        if dev_loss < self.best_loss - self.min_delta:
            self.epochs_without_improvement = 0
        else:
            self.epochs_without_improvement += 1
        if save_best:
            self.best_loss = dev_loss
        waited = self.epochs_without_improvement
        stop = self.es_epochs is not None and waited >= self.es_epochs
        plateau = (not stop and self.plateau_epochs is not None and waited > 0
                   and waited % self.plateau_epochs == 0)
        return Decision(save_best, stop, plateau)
