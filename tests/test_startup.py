"""util/startup.py: the phases' report a rank writes at its first step, and the exit after it (in a
process of its own, as the trainer's ranks do)."""
import json
import os
import sys

from tests.helpers.suite import PACKAGE_ENV, run_command

SCRIPT = '''
import time
from deepspeech_training.util import startup
for phase in startup.PHASES[:-1]:
    time.sleep(0.01)
    startup.mark(phase)
startup.mark('import')      # a second mark of a phase changes nothing
startup.first_step()
startup.first_step()        # later steps: nothing more
print('after the first step')
'''


def run_script(tmp_path, script=SCRIPT, **env):
    return run_command([sys.executable, '-c', script],
                       env=dict(env, DS_STARTUP_REPORT=str(tmp_path / 'startup'), **PACKAGE_ENV), timeout=60)


def test_first_step_writes_every_phase_in_order_under_the_launchers_rank_then_exits(tmp_path):
    run = run_script(tmp_path, HOROVOD_RANK='3', DS_STARTUP_EXIT='1')
    assert 'after the first step' not in run.output
    report = json.loads((tmp_path / 'startup.3').read_text())
    assert report['rank'] == 3 and report['process_start_known']
    assert list(report['phases']) == ['import', 'read sources', 'validation', 'planning', 'graph', 'first batch']
    assert min(report['phases'].values()) > 0
    assert report['seconds_to_first_step'] >= sum(report['phases'].values())
    assert report['peak_rss_mb'] > 1 and set(report['io']) == {'rchar', 'syscr', 'read_bytes'}


def test_without_the_exit_variable_training_goes_on_and_without_a_path_nothing_is_written(tmp_path):
    assert 'after the first step' in run_script(tmp_path).output
    assert os.listdir(tmp_path) == ['startup.0']
    # DS_STARTUP_EXIT alone: no report, so no exit either (a measurement without its numbers is no use)
    run = run_command([sys.executable, '-c', SCRIPT], env=dict(DS_STARTUP_EXIT='1', **PACKAGE_ENV), cwd=str(tmp_path),
                      timeout=60)
    assert 'after the first step' in run.output and os.listdir(tmp_path) == ['startup.0']


def test_the_reported_peak_is_one_a_phase_reached_though_memory_grows_after_the_last_mark(tmp_path):
    """Input threads keep allocating after the first step's mark: the report must not read the peak again
    (benchmarks/scale.py names the phase by whose end the peak was reached; a later, higher reading matched
    none and crashed it in CI). Here every reading of the peak is higher than the one before."""
    growing = 'import itertools\nreadings = itertools.count(100)\nstartup._peak_rss_mb = lambda: float(next(readings))\n'
    script = SCRIPT.replace('from deepspeech_training.util import startup\n',
                            'from deepspeech_training.util import startup\n' + growing)
    run_script(tmp_path, script)
    report = json.loads((tmp_path / 'startup.0').read_text())
    assert report['peak_rss_mb'] == max(report['peak_rss_mb_after'].values()) == report['peak_rss_mb_after']['first batch']
