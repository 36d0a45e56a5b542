"""Run the trainer's first training step (Trainer's own graph: input pipeline, model, distributed seam,
optimizer, through its train op) and write to <out>/rank<N>.npz the gradients that train op applied
(averaged over the ranks), as `local/...` this rank's own gradients before averaging and as
`weights/...` the weights the step started from. Run once plainly and once under horovodrun to
compare: python dump_gradients.py OUT CSV BATCH_SIZE [--horovod] [--dropout RATE] [--also_without_dropout]
(with the checkout's training/ on PYTHONPATH: tests/helpers/suite.py's PACKAGE_ENV)

--also_without_dropout first runs the same batch without dropout (the rates' placeholders at their
default 0, no update) and writes this rank's own gradients of that as `nodropout/...` too."""
import os
import sys

import numpy as np
import tensorflow.compat.v1 as tfv1

from deepspeech_training import distributed
from deepspeech_training.cli import run_script
from deepspeech_training.config import settings_from_flags
from deepspeech_training.data.samples import read_sources
from deepspeech_training.step_runner import set_steps
from deepspeech_training.session import create_session
from deepspeech_training.trainer import Trainer
from deepspeech_training.util import logging

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def first_step(_):
    settings = settings_from_flags()
    dist = distributed.init(settings.run.horovod)
    logging.configure(dist, settings.run.show_progressbar)
    os.makedirs(settings.checkpoints.save_dir, exist_ok=True)
    trainer = Trainer(dist, settings, read_sources(settings.input.train_files, settings.model.alphabet), {})
    step = trainer.step
    variables = [v for _, v in step.gradients]
    local = tfv1.gradients(step.forward.mean_loss, variables)
    with create_session(dist) as session:
        trainer.checkpointer.load_for_training(session, 'init')
        session.run(trainer.broadcast)
        weights = session.run({'weights/' + v.op.name: v for v in variables})
        without_dropout = {}
        if ALSO_WITHOUT_DROPOUT:
            fetches = {'nodropout/' + v.op.name: g for g, v in zip(local, variables)}
            values = next(set_steps(session, trainer.training, step.forward, 0, fetches, {}))
            without_dropout = {name: value for name, value in values.items() if name.startswith('nodropout/')}
        fetches = dict(train=step.train_op)
        fetches.update({'gradient/' + v.op.name: g for g, v in step.gradients})
        fetches.update({'local/' + v.op.name: g for g, v in zip(local, variables)})
        values = next(set_steps(session, trainer.training, step.forward, 0, fetches, step.feed))
    saved = {name[len('gradient/'):] if name.startswith('gradient/') else name: value
             for name, value in values.items() if name.startswith(('gradient/', 'local/'))}
    np.savez(os.path.join(OUT_DIR, 'rank{}.npz'.format(dist.rank)), **saved, **weights, **without_dropout)


if __name__ == '__main__':
    OUT_DIR, csv_path, batch_size = sys.argv[1:4]
    options = sys.argv[4:]
    dropout = options[options.index('--dropout') + 1] if '--dropout' in options else '0'
    ALSO_WITHOUT_DROPOUT = '--also_without_dropout' in options
    sys.argv = [sys.argv[0], '--train_files', csv_path, '--train_batch_size', batch_size, '--n_hidden', '24',
                '--random_seed', '1', '--dropout_rate', dropout, '--noshow_progressbar',
                '--alphabet_config_path', os.path.join(ROOT, 'data', 'alphabet.txt'),
                '--checkpoint_dir', os.path.join(OUT_DIR, 'checkpoints'),
                '--summary_dir', os.path.join(OUT_DIR, 'summaries')] + (['--horovod'] if '--horovod' in options else [])
    run_script(first_step)
