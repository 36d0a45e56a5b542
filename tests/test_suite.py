"""The suite's own rules (tests/helpers/fast_tier.py, doc/TESTING.rst): the fast tier starts no launcher and trains
no long run; a test that would is stopped, naming the fix."""
import pytest

from tests.helpers.fast_tier import FAST_TIER_MAX_EPOCHS, FastTierViolation, check_fast_tier_command
from tests.helpers.suite import SMOKE_CSV, run_command, run_deepspeech, run_horovod, settings_from_args


def test_the_fast_tier_refuses_to_start_horovodrun(tmp_path):
    with pytest.raises(FastTierViolation, match='starts horovodrun: mark it slow'):
        run_horovod(2, '--train_files', SMOKE_CSV, '--epochs', 1, '--checkpoint_dir', tmp_path)


@pytest.mark.parametrize('launcher', ['mpirun', '/usr/bin/srun', 'sbatch'])
def test_the_fast_tier_refuses_the_other_launchers(launcher):
    with pytest.raises(FastTierViolation, match='starts ' + launcher.rpartition('/')[2]):
        run_command(['sh', '-c', 'true', launcher])


def test_the_fast_tier_refuses_a_run_longer_than_its_bound_in_a_subprocess_and_in_process(tmp_path):
    too_long = FAST_TIER_MAX_EPOCHS + 1
    with pytest.raises(FastTierViolation, match='trains {} --epochs'.format(too_long)):
        run_deepspeech('--train_files', SMOKE_CSV, '--epochs', too_long, '--checkpoint_dir', tmp_path)
    with pytest.raises(FastTierViolation, match='trains {} --total_epochs'.format(too_long)):
        settings_from_args('--train_files', SMOKE_CSV, '--total_epochs={}'.format(too_long))
    check_fast_tier_command(['DeepSpeech.py', '--epochs', FAST_TIER_MAX_EPOCHS])     # the bound itself is allowed


@pytest.mark.slow
def test_the_full_suite_starts_launchers_and_long_runs():
    run_command(['sh', '-c', 'true', 'horovodrun', '--epochs', 1000])
