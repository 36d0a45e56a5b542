"""Search the language model weight (alpha) and word bonus (beta) that give the lowest WER on a dev
set with optuna, as DeepSpeech 0.9's lm_optimizer.py: deepspeech-lm-optimizer (in a checkout: python
lm_optimizer.py) --test_files dev.csv --scorer_path kenlm.scorer --checkpoint_dir ... [--n_trials 2400
--lm_alpha_max 5 --lm_beta_max 5]

The acoustic model runs once on --test_files; its outputs are kept in memory and each trial decodes
them with its alpha and beta (the log says what the acoustic pass would have added to each trial)."""
import time
from dataclasses import dataclass

from absl import app, flags

from . import distributed
from .checkpoints import open_checkpoint
from .config import from_flags, settings_from_flags
from .data.plans import eval_set
from .decoding import make_decoder
from .evaluate import acoustic_outputs, build_evaluation, decode_outputs, summarize
from .inputs import read_test_sets
from .util.logging import configure, log_info

try:
    import optuna
except ImportError:     # an extra: pip install 'deepspeech_training[lm]'
    optuna = None


@dataclass
class SearchSettings:
    """The search's own flags (define_flags())."""
    lm_alpha_max: float
    lm_beta_max: float
    n_trials: int


def optimize(_):
    if optuna is None:
        raise SystemExit('lm_optimizer needs optuna: pip install "deepspeech_training[lm]" (bin/setup.sh installs it)')
    settings, search = settings_from_flags(), from_flags(SearchSettings)
    configure(show_progressbar=settings.run.show_progressbar)
    test_sets = read_test_sets(settings.input, settings.model) if settings.decoding.scorer_path else None
    if not test_sets:
        raise app.UsageError('give --test_files (a dev set) and --scorer_path')
    single = distributed.Single()
    sets = [eval_set(path, records, settings.decoding.test_batch_size, single) for path, records in test_sets.items()]
    decoder = make_decoder(settings)
    forward, iterators = build_evaluation(settings, sets)
    with open_checkpoint(settings, single) as session:
        started = time.time()
        outputs = []
        for iterator in iterators:
            iterator.restart(end_epoch=1)
            outputs.append((list(acoustic_outputs(session, iterator, forward)), iterator.input_set.records))
        acoustic_seconds = time.time() - started

        def objective(trial):
            decoder.set_lm_weights(trial.suggest_float('lm_alpha', 0, search.lm_alpha_max),
                                   trial.suggest_float('lm_beta', 0, search.lm_beta_max))
            trial_started = time.time()
            results = [r for o, records in outputs for r in decode_outputs(session, o, records, decoder, single)]
            if trial.number == 0:
                log_info('Acoustic model: {:.2f} s once; beam search: {:.2f} s a trial'.format(
                    acoustic_seconds, time.time() - trial_started))
            return summarize(results)[0]

        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=settings.training.random_seed))
        study.optimize(objective, n_trials=search.n_trials)
    log_info('Best params: lm_alpha={} and lm_beta={} with WER={}'.format(
        study.best_params['lm_alpha'], study.best_params['lm_beta'], study.best_value))


def define_flags():
    flags.DEFINE_float('lm_alpha_max', 5, 'largest language model weight to try')
    flags.DEFINE_float('lm_beta_max', 5, 'largest word insertion bonus to try')
    flags.DEFINE_integer('n_trials', 2400, 'number of trials', lower_bound=1)
