"""DeepSpeech.py's command line: flags -> Settings (config.py, their one reader), input read and checked,
then train, test, export and transcribe as the settings ask."""
import dataclasses
import os
import sys

import tensorflow as tf
import tensorflow.compat.v1 as tfv1
from absl import app

from . import distributed
from .checkpoints import CheckpointError, check_writable
from .config import settings_from_flags
from .data.batching import SetTooSmallError
from .data.samples import DataError
from .data.validation import validate_groups
from .decoding import make_decoder
from .evaluate import test, transcribe
from .export import export
from .flags import create_flags, list_in_short_help
from .inputs import log_skipped_transcripts, read_input
from .scorer import ScorerError
from .signals import Interrupted
from .trainer import Trainer
from .util import logging, startup
from .util.launchers import launcher


def main(_):
    run(settings_from_flags())


def run(settings):
    """Everything `settings` ask of DeepSpeech.py, on this rank."""
    startup.mark('import')
    options, inputs = settings.run, settings.input
    dist = distributed.init(options.horovod, options.horovod_elastic)
    # --one_shot_infer: stdout is the transcript alone (`... --one_shot_infer a.wav > out.txt`), logs go to stderr
    logging.configure(dist, options.show_progressbar, logs_to_stderr=bool(options.one_shot_infer),
                      log_level=options.log_level)
    if not (inputs.train_files or inputs.test_files or settings.export.export_dir or options.one_shot_infer):
        raise app.UsageError('nothing to do: give --train_files (and --dev_files) to train, --test_files to test, '
                             '--export_dir to export or --one_shot_infer to transcribe a file')
    started_by = launcher(os.environ)
    logging.log_every_rank('Rank {} of {} computes on: {}{}'.format(
        dist.rank, dist.size, distributed.devices(dist), '' if started_by is None else ', started by ' + started_by))
    if not settings.model.bytes_output_mode:
        logging.log_info('Alphabet: {} ({} labels)'.format(os.path.abspath(settings.model.alphabet_path),
                                                          settings.model.alphabet.GetSize()))
    try:
        # All input is read and checked before any graph is built or file written: every sample's audio
        # (header only), the same outcome on every rank, before any collective.
        skipped = [] if inputs.skip_invalid_samples else None
        train_records, dev_sets, test_sets, metrics_sets = read_input(inputs, settings.model, skipped)
        startup.mark('read sources')
        if skipped and dist.is_chief:
            log_skipped_transcripts(skipped)
        train_records, sets = validate_groups(dist.before_sync(), settings.model, train_records,
                                              dict(dev=dev_sets, test=test_sets, metrics=metrics_sets),
                                              inputs.skip_invalid_samples)
        startup.mark('validation')
        decoder = make_decoder(settings)
        if train_records and dist.is_chief:
            check_writable(settings.checkpoints.save_dir, 'checkpoints')
            check_writable(settings.training.summary_dir, 'summaries')
        if train_records:
            Trainer(dist, settings, train_records, sets['dev'], sets['metrics']).run()
        if sets['test']:
            test(dist, settings, sets['test'], decoder)
        if settings.export.export_dir and dist.is_chief:
            export(settings)
        if options.one_shot_infer and dist.is_chief:
            print(transcribe(settings, [options.one_shot_infer], decoder)[0])
    except (DataError, SetTooSmallError, CheckpointError, ScorerError, distributed.RankDivergenceError) as error:
        logging.log_error(str(error))
        sys.exit(1)
    except Interrupted as interrupted:
        # 130 after SIGINT, 143 after SIGTERM. Under Horovod only rank 0 says so: a non-zero exit of
        # another rank would make horovodrun kill rank 0 while it shuts down. Logged too, because
        # horovodrun 0.28.1 may report 0 for ranks it stopped itself (doc/HOROVOD.rst).
        logging.log_info('Exiting with code {}'.format(interrupted.exit_code))
        sys.exit(interrupted.exit_code if dist.is_chief else 0)


def evaluate_main(_):
    """evaluate.py: DeepSpeech.py on the test path alone. As DeepSpeech 0.9's evaluate.py, --test_files is
    required and the flags of the other tasks do nothing; a warning names those given, so none is dropped
    unseen."""
    settings = settings_from_flags()
    if not settings.input.test_files:
        raise app.UsageError('You need to specify what files to use for evaluation via the --test_files flag.')
    ignored = [flag for flag, given in (('train_files', settings.input.train_files),
                                        ('export_dir', settings.export.export_dir),
                                        ('one_shot_infer', settings.run.one_shot_infer)) if given]
    if ignored:
        logging.log_warn('evaluate.py only tests: ignoring --{} (DeepSpeech.py does the rest)'
                         .format(', --'.join(ignored)))
    run(dataclasses.replace(settings, input=dataclasses.replace(settings.input, train_files=[]),
                            export=dataclasses.replace(settings.export, export_dir=''),
                            run=dataclasses.replace(settings.run, one_shot_infer='')))


def run_script(entry=main, define_tool_flags=None):
    """Start a command-line tool on the training flags (and `define_tool_flags`' own, if any): DeepSpeech.py's
    main, or `entry`."""
    tfv1.disable_eager_execution()
    tf.get_logger().setLevel('ERROR')   # TensorFlow's Python deprecation notices drown our log
    create_flags()
    if define_tool_flags:
        define_tool_flags()
    list_in_short_help(sys.argv[0])
    app.run(entry)
