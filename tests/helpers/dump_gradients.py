"""Write the averaged gradients of the first training step to <out>/rank<N>.npz (and, as `local/...`,
this rank's own gradients before averaging), using the trainer's own input pipeline, model and
distributed seam. Run once plainly and once under horovodrun to
compare: python dump_gradients.py OUT CSV BATCH_SIZE [--horovod] [--dropout RATE]"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'training'))

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tfv1  # noqa: E402

from deepspeech_training import distributed  # noqa: E402
from deepspeech_training.graph import InputSet, build_forward, build_input, seed_graph  # noqa: E402
from deepspeech_training.data.batching import train_batches  # noqa: E402
from deepspeech_training.config import Config, N_CONTEXT, N_INPUT  # noqa: E402
from deepspeech_training.data.samples import read_sources  # noqa: E402
from deepspeech_training.util.text import load_alphabet  # noqa: E402


def main(out_dir, csv_path, batch_size, use_horovod, dropout):
    tfv1.disable_eager_execution()
    dist = distributed.init(use_horovod)
    alphabet = load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt'))
    config = Config(alphabet, N_INPUT, N_CONTEXT, 512, 320, 24, alphabet.GetSize() + 1)
    records = read_sources([csv_path], alphabet)
    plan = lambda epoch: train_batches(len(records), batch_size, dist.size, dist.rank, epoch)[:1]  # noqa: E731
    training = InputSet('first batch', records, plan, batch_size)
    seed_graph(1, dist.rank)     # as train() does
    batch, (iterator,) = build_input([training], config)
    forward = build_forward(batch, config)
    optimizer = dist.wrap_optimizer(tfv1.train.AdamOptimizer(0.001))
    grads_and_vars = optimizer.compute_gradients(forward.mean_loss)
    local = tfv1.gradients(forward.mean_loss, [v for _, v in grads_and_vars])
    broadcast = dist.broadcast_op()
    with tfv1.Session() as session:
        session.run(tfv1.global_variables_initializer())
        session.run(broadcast)
        session.run(iterator.initializer, {iterator.epoch: 0})
        fetches = {v.op.name: g for g, v in grads_and_vars}
        fetches.update({'local/' + v.op.name: g for g, (_, v) in zip(local, grads_and_vars)})
        values = session.run(fetches, {rate: dropout for rate in forward.dropout_rates})   # one run: one batch
        weights = session.run({'weights/' + v.op.name: v for _, v in grads_and_vars})
    np.savez(os.path.join(out_dir, 'rank{}.npz'.format(dist.rank)), **values, **weights)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), '--horovod' in sys.argv,
         float(sys.argv[sys.argv.index('--dropout') + 1]) if '--dropout' in sys.argv else 0.0)
