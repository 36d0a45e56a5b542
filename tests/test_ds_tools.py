"""DeepSpeech 0.9's user tools, run as a user's scripts run them: bin/play.py and bin/compare_samples.py (the
sample-augmentation check of DeepSpeech's CI, bin/run-ci-sample_augmentations.sh, on the bundled speech),
bin/import_ldc93s1.py, and the top-level setup.py and requirements.txt."""
import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from tests.helpers.suite import ROOT, SMOKE_CSV, SMOKE_DIR

PLAY = os.path.join(ROOT, 'bin', 'play.py')
COMPARE = os.path.join(ROOT, 'bin', 'compare_samples.py')
SPEECH = os.path.join(SMOKE_DIR, 'hello_world.wav')


def run(script, *args, timeout=120):
    """(exit status, stdout bytes, stderr text) of a bin/ script run as a user runs it."""
    process = subprocess.run([sys.executable, script] + [str(a) for a in args], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED='1'))
    return process.returncode, process.stdout, process.stderr.decode(errors='replace')


def compare(*args):
    status, _, stderr = run(COMPARE, *args)
    return status, stderr


def play_to(path, source, *args):
    """bin/play.py SOURCE ARGS --pipe > path, as DeepSpeech's CI ran it; returns its stderr."""
    status, wav, stderr = run(PLAY, source, '--number', 1, *args, '--pipe')
    assert status == 0, stderr
    path.write_bytes(wav)
    return stderr


@pytest.fixture(scope='module')
def reversed_speech(tmp_path_factory):
    """DeepSpeech's overlay source: the sample reversed (sox reverse there), listed in a CSV."""
    folder = tmp_path_factory.mktemp('overlay')
    audio, rate = soundfile.read(SPEECH, dtype='int16')
    soundfile.write(str(folder / 'reversed.wav'), audio[::-1], rate, subtype='PCM_16')
    (folder / 'overlay.csv').write_text('wav_filename\n{}\n'.format(folder / 'reversed.wav'))
    return folder


def test_compare_samples_equal_different_and_of_other_format_or_length(tmp_path):
    """DeepSpeech's messages and exit status: content within the threshold is equal, --if-differ inverts, a
    different rate or length fails both ways, --no-success-output keeps quiet on success."""
    audio, rate = soundfile.read(SPEECH, dtype='int16')
    soundfile.write(str(tmp_path / 'same.wav'), audio, rate, subtype='PCM_16')
    quieter = (audio * 0.5).astype(np.int16)
    soundfile.write(str(tmp_path / 'quieter.wav'), quieter, rate, subtype='PCM_16')
    soundfile.write(str(tmp_path / '8k.wav'), audio[::2], rate // 2, subtype='PCM_16')
    soundfile.write(str(tmp_path / 'longer.wav'), np.concatenate([audio, audio[:rate // 100]]), rate,
                    subtype='PCM_16')
    soundfile.write(str(tmp_path / 'float.wav'), audio / 32768.0, rate, subtype='FLOAT')
    same, quiet = tmp_path / 'same.wav', tmp_path / 'quieter.wav'

    assert compare(SPEECH, same) == (0, 'Samples are considered equal (-316.99 dB difference)\n')
    assert compare(SPEECH, same, '--no-success-output') == (0, '')
    status, message = compare(SPEECH, same, '--if-differ')
    assert status == 1 and message.startswith('Samples are considered equal')
    status, message = compare(SPEECH, quiet)
    assert status == 1 and message.startswith('Samples differ on: sample data (')
    assert compare(SPEECH, quiet, '--if-differ', '--no-success-output') == (0, '')
    assert compare(SPEECH, quiet, '--threshold', 0)[0] == 0     # a higher threshold calls them equal
    for other, what in [('8k.wav', 'audio-format (AudioFormat(16000, 1, 2) and AudioFormat(8000, 1, 2))'),
                        ('float.wav', 'audio-format (AudioFormat(16000, 1, 2) and AudioFormat(16000, 1, 4))'),
                        ('longer.wav', 'duration (')]:
        for extra in ([], ['--if-differ']):
            status, message = compare(SPEECH, tmp_path / other, *extra)
            assert status == 1 and message.startswith('Samples differ on: ' + what), message
    status, message = compare(SPEECH, tmp_path / 'missing.wav')
    assert status == 1 and 'Cannot read sample' in message


@pytest.mark.slow
@pytest.mark.parametrize('augmentation', [
    'overlay[source={overlay},snr=20]', 'reverb[delay=50.0,decay=2.0]', 'resample[rate=4000]',
    'codec[bitrate=4000]', 'volume'])
def test_each_sample_augmentation_changes_the_content_and_nothing_else(augmentation, reversed_speech, tmp_path):
    """DeepSpeech's bin/run-ci-sample_augmentations.sh, one operation per test: play --augment X --pipe, then
    compare_samples --if-differ against the input (same rate, channels, width and length, other content)."""
    spec = augmentation.format(overlay=reversed_speech / 'overlay.csv')
    out = tmp_path / 'augmented.wav'
    assert play_to(out, SPEECH, '--quiet', '--augment', spec) == ''
    assert compare(SPEECH, out, '--if-differ', '--no-success-output') == (0, '')
    assert compare(SPEECH, out)[0] == 1


def test_every_sample_operation_is_in_the_play_test():
    """A new sample augmentation must join the test above."""
    from deepspeech_training.data.augmentations import OPERATIONS, SampleAugmentation
    tested = {'overlay', 'reverb', 'resample', 'codec', 'volume'}
    assert {name for name, op in OPERATIONS.items() if issubclass(op, SampleAugmentation)} == tested


@pytest.mark.slow
def test_play_without_augmentation_pipes_the_sample_unchanged_and_names_it(tmp_path):
    """From a CSV: --start picks the sample (negative from the end), the id and transcript go to stderr,
    stdout carries only the WAV; graph augmentations are reported as not simulated and skipped."""
    out = tmp_path / 'plain.wav'
    stderr = play_to(out, SMOKE_CSV, '--start', -3, '--augment', 'pitch[pitch=1.2]')
    assert stderr.splitlines() == [
        'Warning: Some of the augmentations cannot be simulated by this command: pitch[pitch=1.2] (they work on '
        'the training graph\'s spectrogram or features)',
        'Sample "{}"'.format(os.path.join(SMOKE_DIR, 'good_morning.wav')), '  "good morning"']
    assert compare(os.path.join(SMOKE_DIR, 'good_morning.wav'), out, '--no-success-output') == (0, '')
    assert compare(os.path.join(SMOKE_DIR, 'good_morning.wav'), out, '--if-differ')[0] == 1


@pytest.mark.slow
def test_play_reads_a_sample_database_and_fails_clearly(tmp_path):
    """From an Opus .sdb (data_set_tool.py's default): the sample decoded at its rate, its transcript shown.
    Without --pipe on a machine with no sound device (or player), the error says so and how to write it."""
    sdb = tmp_path / 'smoke.sdb'
    subprocess.run([sys.executable, os.path.join(ROOT, 'bin', 'data_set_tool.py'), SMOKE_CSV, sdb], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    out = tmp_path / 'from_sdb.wav'
    stderr = play_to(out, sdb, '--start', 1, '--augment', 'volume[dbfs=-20]')
    assert stderr.splitlines() == ['Sample "{}:1"'.format(sdb), '  "hello world"']
    info = soundfile.info(str(out))
    assert (info.samplerate, info.channels, info.subtype) == (16000, 1, 'PCM_16')
    assert abs(info.duration - soundfile.info(SPEECH).duration) < 0.05

    status, _, stderr = run(PLAY, SMOKE_CSV, '--number', 1, '--quiet')
    if not os.path.isdir('/dev/snd'):
        assert status == 1 and 'use --pipe to write the sample instead' in stderr, stderr
    status, _, stderr = run(PLAY, SMOKE_CSV, '--start', 7, '--pipe')
    assert status == 1 and 'No sample with index 7 (3 sample(s))' in stderr
    status, _, stderr = run(PLAY, SPEECH, '--augment', 'reverb[delay=x]', '--pipe')
    assert status == 1 and 'is not a number range' in stderr


# ---- bin/import_ldc93s1.py ----------------------------------------------------------------------------

LDC93S1 = os.path.join(ROOT, 'bin', 'import_ldc93s1.py')
LDC93S1_TEXT = '0 46797 She had your dark suit in greasy wash water all year.\n'


def test_import_ldc93s1_uses_files_in_place_and_writes_deepspeech_csv(tmp_path):
    """The files already in DATA_DIR are not downloaded (the site is unreachable here: a refused port stands
    in for it); the CSV is DeepSpeech's, and training reads it with the default alphabet."""
    from test_importers import speak
    data = tmp_path / 'ldc'
    speak([(str(data / 'LDC93S1.wav'), 'She had your dark suit in greasy wash water all year.',
            ['-ar', '16000', '-ac', '1', '-sample_fmt', 's16'])])
    (data / 'LDC93S1.txt').write_text(LDC93S1_TEXT)
    process = subprocess.run([sys.executable, LDC93S1, str(data)], cwd=str(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                             env=dict(os.environ, LDC93S1_BASE_URL='http://127.0.0.1:9/'))
    assert process.returncode == 0, process.stdout
    assert 'Downloading' not in process.stdout
    wav = data / 'LDC93S1.wav'
    assert (data / 'ldc93s1.csv').read_text() == (
        'wav_filename,wav_filesize,transcript\n{},{},she had your dark suit in greasy wash water all year\n'
        .format(wav, wav.stat().st_size))
    from deepspeech_training.data.samples import read_records
    from deepspeech_training.util.text import load_alphabet
    record, = read_records([str(data / 'ldc93s1.csv')], load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt')))
    assert record.audio_path == str(wav) and record.transcript.startswith('she had')


def test_import_ldc93s1_offline_names_the_url_and_the_fix(tmp_path):
    data = tmp_path / 'ldc'
    process = subprocess.run([sys.executable, LDC93S1, str(data)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, timeout=60,
                             env=dict(os.environ, LDC93S1_BASE_URL='http://127.0.0.1:9/addenda'))
    assert process.returncode == 1
    assert process.stderr.startswith('Error: cannot download http://127.0.0.1:9/addenda/LDC93S1.wav: ')
    assert ('fetch LDC93S1.wav and LDC93S1.txt from http://127.0.0.1:9/addenda/ on a machine that has it, put them '
            'into {} and run this again'.format(data)) in process.stderr
    assert not (data / 'ldc93s1.csv').exists() and os.listdir(str(data)) == []
    assert subprocess.run([sys.executable, LDC93S1], stderr=subprocess.PIPE, timeout=60).returncode == 2
