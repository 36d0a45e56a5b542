"""Bad flags fail at once, with a message that says what to do, and before anything is written."""
import os
import sys

import pytest

from tests.helpers.suite import CSV_HEADER, ROOT, SMOKE_CSV, import_noise, run_as_user, run_deepspeech


@pytest.mark.parametrize('args, message', [
    (['--n_hiden', '10'], "Unknown command line flag 'n_hiden'"),
    (['--train_files', SMOKE_CSV, '--dropout_rate', '1.5'], 'must be in [0, 1)'),
    (['--train_files', 'no/such.csv'], 'names a CSV file that does not exist'),
    (['--train_files', SMOKE_CSV, '--early_stop'], 'give --dev_files too'),
    (['--load_train', 'newest'], 'value should be one of'),
    ([], 'nothing to do'),
    (['--train_files', SMOKE_CSV, '--horovod_elastic'], '--horovod_elastic needs --horovod'),
])
def test_bad_flags_are_rejected_with_a_clear_message(tmp_path, args, message):
    result = run_deepspeech('--checkpoint_dir', tmp_path / 'ckpt', *args, check=False)
    assert result.returncode != 0
    assert message in result.output
    assert not (tmp_path / 'ckpt').exists()


def test_bad_csv_row_stops_before_any_checkpoint_or_summary(tmp_path):
    csv_path = tmp_path / 'bad.csv'
    csv_path.write_text(CSV_HEADER + '\nmissing.wav,10,Hello World\n')
    result = run_deepspeech('--train_files', csv_path, '--checkpoint_dir', tmp_path / 'ckpt',
                            '--summary_dir', tmp_path / 'summaries', check=False)
    assert result.returncode == 1
    assert "bad.csv: line 2: missing.wav: characters not in the alphabet: 'H' 'W'" in result.output
    assert not (tmp_path / 'ckpt').exists() and not (tmp_path / 'summaries').exists()


@pytest.mark.parametrize('script, help_flag, listed', [
    ('DeepSpeech.py', '--helpshort', ['--train_files', '--n_hidden', '--epochs', '--[no]early_stop']),
    ('DeepSpeech.py', '--help', ['--train_files', '--checkpoint_dir', '--export_dir']),
    ('transcribe.py', '--helpshort', ['--src', '--checkpoint_dir', '--scorer_path']),
    ('lm_optimizer.py', '--helpshort', ['--n_trials', '--test_files']),
])
def test_short_help_lists_the_tools_flags(script, help_flag, listed):
    """As DeepSpeech 0.9's did; absl's flag errors point to --helpshort. Started as a user starts them, they
    print none of TensorFlow's import noise (test_training.py: training's and the other tools')."""
    output = run_as_user([sys.executable, os.path.join(ROOT, script), help_flag], codes=(1,))
    assert import_noise(output) == []
    for flag in listed:
        assert '\n  {}:'.format(flag) in output, flag
    assert '--log_dir' not in output        # absl's own flags stay for --helpfull
