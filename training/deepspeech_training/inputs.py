"""The sets a run reads, as its InputSettings name them: {file: records} per set, transcripts checked
against the alphabet (their audio is checked by data.validation, all sets at once, after this)."""
from .data.samples import DataError, read_sources
from .util import logging


def read_set(paths, config, limit, reverse, kind, skipped=None):
    """The records of `paths` merged; a set with none fails here, naming why."""
    before = len(skipped or [])
    records = read_sources(paths, config.alphabet, limit=limit, reverse=reverse, skipped=skipped,
                           cache_dir=config.data_cache_dir)
    if not records:
        left_out = len(skipped or []) - before
        raise DataError(['{}: no samples in {}{}'.format(
            kind, ', '.join(paths), ' (--skip_invalid_samples left out all {}: transcripts the alphabet cannot '
            'encode; run without it to list them)'.format(left_out) if left_out else '')])
    return records


def read_sets(paths, config, limit, reverse, kind, skipped=None):
    """{path: records} of each file of `paths`: sets reported one by one."""
    return {p: read_set([p], config, limit, reverse, kind, skipped) for p in paths}


def read_input(inputs, config, skipped=None):
    """(train records, dev sets, test sets, metrics sets) as `inputs` (InputSettings) ask ({file: records};
    None when not asked). The metrics sets are read as the dev sets are (DeepSpeech 0.9: --limit_dev,
    --reverse_dev), and only when training. With a list as `skipped` (--skip_invalid_samples), samples whose
    transcript the alphabet cannot encode are left out and their problems appended there."""
    train_records = dev_sets = metrics_sets = None
    if inputs.train_files:
        train_records = read_set(inputs.train_files, config, inputs.limit_train, inputs.reverse_train, 'train',
                                 skipped)
        dev_sets = read_sets(inputs.dev_files, config, inputs.limit_dev, inputs.reverse_dev, 'dev', skipped)
        metrics_sets = read_sets(inputs.metrics_files, config, inputs.limit_dev, inputs.reverse_dev, 'metrics',
                                 skipped)
    return train_records, dev_sets, read_test_sets(inputs, config, skipped), metrics_sets


def read_test_sets(inputs, config, skipped=None):
    """--test_files' sets ({file: records}); None without them."""
    if not inputs.test_files:
        return None
    return read_sets(inputs.test_files, config, inputs.limit_test, inputs.reverse_test, 'test', skipped)


def log_skipped_transcripts(skipped, examples=5):
    """--skip_invalid_samples' summary of the samples left out for their transcripts (the audio check
    gives its own)."""
    skipped = list(dict.fromkeys(skipped))      # a file given as two sets is listed once
    logging.log_warn('--skip_invalid_samples: skipping {} sample(s) whose transcript the alphabet cannot encode '
                     '(or is empty). The first {}:\n{}'.format(len(skipped), min(examples, len(skipped)),
                                                               '\n'.join('  ' + p for p in skipped[:examples])))
