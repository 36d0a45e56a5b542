"""DeepSpeech.py's command line: flags -> Settings, input read and checked, then train, test, export
and transcribe as asked. With config.settings_from_flags, the only reader of FLAGS."""
import os
import sys

import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from absl import app

from . import distributed
from .checkpoints import CheckpointError, check_writable
from .config import settings_from_flags
from .data.batching import SetTooSmallError
from .data.samples import DataError, read_sources
from .data.validation import validate_groups
from .evaluate import Decoder, test, transcribe
from .export import export
from .flags import FLAGS, create_flags, list_in_short_help, split_files
from .scorer import ScorerError, load_scorer
from .signals import Interrupted
from .trainer import Trainer
from .util import logging, startup
from .util.launchers import launcher


def read_set(csv_paths, config, limit, reverse, kind, skipped=None):
    before = len(skipped or [])
    records = read_sources(csv_paths, config.alphabet, limit=limit, reverse=reverse, skipped=skipped,
                           cache_dir=config.data_cache_dir)
    if not records:
        left_out = len(skipped or []) - before
        raise DataError(['{}: no samples in {}{}'.format(
            kind, ', '.join(csv_paths), ' (--skip_invalid_samples left out all {}: transcripts the alphabet cannot '
            'encode; run without it to list them)'.format(left_out) if left_out else '')])
    return records      # their audio is checked by validate_groups(), all sets at once


def read_sets(csv_list, config, limit, reverse, kind, skipped=None):
    """{csv: records} of each file of `csv_list`: sets reported one by one."""
    return {p: read_set([p], config, limit, reverse, kind, skipped) for p in split_files(csv_list)}


def read_input(config, skipped=None):
    """(train records, dev sets, test sets) as the flags ask ({csv: records}; None when not asked). With a
    list as `skipped` (--skip_invalid_samples), samples whose transcript the alphabet cannot encode are left
    out and their problems appended there."""
    train_records = dev_sets = None
    if FLAGS.train_files:
        train_records = read_set(split_files(FLAGS.train_files), config, FLAGS.limit_train, FLAGS.reverse_train,
                                 'train', skipped)
        dev_sets = read_sets(FLAGS.dev_files, config, FLAGS.limit_dev, FLAGS.reverse_dev, 'dev', skipped)
    return train_records, dev_sets, read_test_sets(config, skipped)


def read_test_sets(config, skipped=None):
    """--test_files' sets ({csv: records}); None without them."""
    if not FLAGS.test_files:
        return None
    return read_sets(FLAGS.test_files, config, FLAGS.limit_test, FLAGS.reverse_test, 'test', skipped)


def read_metrics_sets(config, skipped=None):
    """--metrics_files' sets ({csv: records}), read as the dev sets are (DeepSpeech 0.9: --limit_dev,
    --reverse_dev); None when not training."""
    if not FLAGS.train_files:
        return None
    return read_sets(FLAGS.metrics_files, config, FLAGS.limit_dev, FLAGS.reverse_dev, 'metrics', skipped)


def log_skipped_transcripts(skipped, examples=5):
    """--skip_invalid_samples' summary of the samples left out for their transcripts (the audio check
    gives its own)."""
    skipped = list(dict.fromkeys(skipped))      # a CSV given as two sets is listed once
    logging.log_warn('--skip_invalid_samples: skipping {} sample(s) whose transcript the alphabet cannot encode '
                     '(or is empty). The first {}:\n{}'.format(len(skipped), min(examples, len(skipped)),
                                                               '\n'.join('  ' + p for p in skipped[:examples])))


def make_decoder(settings):
    """The Decoder the flags ask for; a bad scorer fails here, not after hours of training."""
    decoding, model = settings.decoding, settings.model
    scorer = (load_scorer(decoding.scorer_path, decoding.lm_alpha, decoding.lm_beta, model.alphabet_path,
                          model.bytes_output_mode) if decoding.scorer_path else None)
    return Decoder(settings.model.alphabet, decoding, scorer)


def main(_):
    startup.mark('import')
    dist = distributed.init(FLAGS.horovod, FLAGS.horovod_elastic)
    # --one_shot_infer: stdout is the transcript alone (`... --one_shot_infer a.wav > out.txt`), logs go to stderr
    logging.configure(dist, FLAGS.show_progressbar, logs_to_stderr=bool(FLAGS.one_shot_infer),
                      log_level=FLAGS.log_level)
    if not (FLAGS.train_files or FLAGS.test_files or FLAGS.export_dir or FLAGS.one_shot_infer):
        raise app.UsageError('nothing to do: give --train_files (and --dev_files) to train, --test_files to test, '
                             '--export_dir to export or --one_shot_infer to transcribe a file')
    settings = settings_from_flags()
    started_by = launcher(os.environ)
    logging.log_every_rank('Rank {} of {} computes on: {}{}'.format(
        dist.rank, dist.size, distributed.devices(dist), '' if started_by is None else ', started by ' + started_by))
    if not settings.model.bytes_output_mode:
        logging.log_info('Alphabet: {} ({} labels)'.format(os.path.abspath(settings.model.alphabet_path),
                                                          settings.model.alphabet.GetSize()))
    try:
        # All input is read and checked before any graph is built or file written: every sample's audio
        # (header only), the same outcome on every rank, before any collective.
        skipped = [] if FLAGS.skip_invalid_samples else None
        train_records, dev_sets, test_sets = read_input(settings.model, skipped)
        metrics_sets = read_metrics_sets(settings.model, skipped)
        startup.mark('read sources')
        if skipped and dist.is_chief:
            log_skipped_transcripts(skipped)
        train_records, sets = validate_groups(dist.before_sync(), settings.model, train_records,
                                              dict(dev=dev_sets, test=test_sets, metrics=metrics_sets),
                                              FLAGS.skip_invalid_samples)
        startup.mark('validation')
        decoder = make_decoder(settings)
        if train_records and dist.is_chief:
            check_writable(settings.checkpoints.save_dir, 'checkpoints')
            check_writable(settings.training.summary_dir, 'summaries')
        if train_records:
            Trainer(dist, settings, train_records, sets['dev'], sets['metrics']).run(FLAGS.flags_into_string())
        if sets['test']:
            test(dist, settings, sets['test'], decoder)
        if settings.export.export_dir and dist.is_chief:
            export(settings)
        if FLAGS.one_shot_infer and dist.is_chief:
            print(transcribe(settings, [FLAGS.one_shot_infer], decoder)[0])
    except (DataError, SetTooSmallError, CheckpointError, ScorerError, distributed.RankDivergenceError) as error:
        logging.log_error(str(error))
        sys.exit(1)
    except Interrupted as interrupted:
        # 130 after SIGINT, 143 after SIGTERM. Under Horovod only rank 0 says so: a non-zero exit of
        # another rank would make horovodrun kill rank 0 while it shuts down. Logged too, because
        # horovodrun 0.28.1 may report 0 for ranks it stopped itself (doc/HOROVOD.rst).
        logging.log_info('Exiting with code {}'.format(interrupted.exit_code))
        sys.exit(interrupted.exit_code if dist.is_chief else 0)


# What evaluate.py leaves to DeepSpeech.py: the flags that ask for another task than testing.
OTHER_TASKS = ('train_files', 'export_dir', 'one_shot_infer')


def evaluate_main(argv):
    """evaluate.py: main() on the test path alone. As DeepSpeech 0.9's evaluate.py, --test_files is required
    and the flags of the other tasks do nothing; a warning names those given, so none is dropped unseen."""
    if not FLAGS.test_files:
        raise app.UsageError('You need to specify what files to use for evaluation via the --test_files flag.')
    ignored = [name for name in OTHER_TASKS if FLAGS[name].value != FLAGS[name].default]
    if ignored:
        logging.log_warn('evaluate.py only tests: ignoring --{} (DeepSpeech.py does the rest)'
                         .format(', --'.join(ignored)))
    for name in ignored:
        FLAGS[name].value = FLAGS[name].default
    main(argv)


def run_script(entry=None):
    """Start a command-line tool on the training flags: DeepSpeech.py's main, or `entry`."""
    tfv1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')   # TensorFlow's Python deprecation notices drown our log
    create_flags()
    list_in_short_help(sys.argv[0])
    app.run(entry or main)
