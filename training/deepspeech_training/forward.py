"""The forward pass shared by training, validation and testing: the model on a batch with its per-sample CTC
loss and probabilities, and the graph seed its dropout masks draw from."""
from dataclasses import dataclass

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from .model import create_model, ctc_loss, dropout_placeholders, lstm_function


@dataclass
class Forward:
    indices: object
    weights: object
    losses: object          # per sample, 0 where the weight is 0
    mean_loss: object
    logits: object          # time-major
    probabilities: object   # softmax of the logits, batch-major, for the CTC decoder
    seq_length: object
    dropout_rates: list


def seed_graph(seed, rank):
    """The graph-level seed of rank `rank`: with one seed for all, row (t, b) of every rank would get the
    same dropout mask at every step, noise correlated across the global batch. The variables are
    broadcast from rank 0 anyway, and data order and augmentation are seeded by sample, not by this.
    (Fixed when the graph is built: after an elastic reset renumbers the ranks, two may share one.)"""
    tfv1.set_random_seed(seed + rank)


def build_forward(batch, config, mixed_precision=None):
    """The model on `batch`, its CTC loss and probabilities; `mixed_precision`: --automatic_mixed_precision's
    16-bit type (None: float32)."""
    indices, weights, windows, seq_length, labels, label_lengths = batch
    dropout_rates = dropout_placeholders()
    logits, _ = create_model(windows, seq_length, config, dropout_rates,
                             lstm=lstm_function(config.lstm_impl, mixed_precision))
    losses = ctc_loss(logits, seq_length, labels, label_lengths) * weights
    mean_loss = tf.reduce_sum(losses) / tf.maximum(tf.reduce_sum(weights), 1.0)
    probabilities = tf.nn.softmax(tf.transpose(logits, [1, 0, 2]))
    return Forward(indices, weights, losses, mean_loss, logits, probabilities, seq_length, dropout_rates)
