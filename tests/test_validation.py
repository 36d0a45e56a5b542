"""The validation pass (data/validation.py and the CSV checks of data/samples.py), as a user meets it:
a real `python DeepSpeech.py` (or two Horovod ranks) fed bad inputs built in tmp_path from the bundled
smoke-test wavs, each kind in a row or CSV of its own (a run lists every problem it finds, so one run checks
several kinds). Every failure must name the CSV, the line, the audio file, what is wrong and
the fix, exit non-zero, and leave no checkpoint, flags.txt or summary behind."""
import shutil

import numpy as np
import pytest
import soundfile

from tests.helpers.suite import CSV_HEADER, SMOKE_DIR, run_deepspeech, run_horovod, tiny_model_flags
from deepspeech_training.data.validation import samples_at_rate

pytestmark = pytest.mark.slow
GOOD_ROWS = ['good_morning.wav,42668,good morning', 'hello_world.wav,46760,hello world',
             'the_cat_sat.wav,48226,the cat sat']


@pytest.fixture
def data(tmp_path):
    """A folder with the three smoke-test wavs; bad files and CSVs are added by each test."""
    folder = tmp_path / 'data'
    folder.mkdir()
    for row in GOOD_ROWS:
        shutil.copy(str(SMOKE_DIR) + '/' + row.split(',')[0], str(folder))
    return folder


def smoke_audio():
    audio, rate = soundfile.read(str(SMOKE_DIR) + '/good_morning.wav', dtype='int16')
    return audio, rate


def write_csv(folder, rows, name='bad.csv', header=CSV_HEADER):
    path = folder / name
    path.write_text('\n'.join([header] + rows) + '\n', encoding='utf-8')
    return path


def fails(tmp_path, *flags):
    """Run DeepSpeech.py expecting a data error; assert that nothing was written."""
    run = run_deepspeech(*tiny_model_flags(tmp_path, 16), '--epochs', 1, *flags, check=False, timeout=120)
    assert run.returncode != 0, run.output
    assert 'problem(s) in the input data' in run.output, run.output
    assert not (tmp_path / 'checkpoints').exists(), 'a checkpoint dir (or flags.txt) was created'
    assert not (tmp_path / 'summaries').exists(), 'a summary dir was created'
    return run.output


def bad_missing(folder, name):
    return '{},1000,hello'.format(name), 'audio file not found', 'relative to the CSV'


def bad_corrupt(folder, name):
    wav = (folder / 'good_morning.wav').read_bytes()
    (folder / name).write_bytes(wav[:30])           # the header cut before its data chunk
    return '{},30,hello'.format(name), 'not a readable audio file', 're-encode it'


def bad_empty_file(folder, name):
    (folder / name).write_bytes(b'')
    return '{},0,hello'.format(name), 'the audio file is empty (0 bytes)', 're-create it, or remove the row'


def bad_not_wav(folder, name):
    (folder / name).write_text('this is a transcript, not audio\n')
    return '{},32,hello'.format(name), 'not a readable audio file (Format not recognised', 'sox in.wav -b 16 -c 1'


def bad_sample_rate(folder, name):
    audio, _ = smoke_audio()
    soundfile.write(str(folder / name), audio[::2], 8000, subtype='PCM_16')
    return '{},21000,hello'.format(name), 'sample rate 8000 Hz, expected 16000 Hz', 'drop --nonormalize_sample_rate'


def bad_stereo(folder, name):
    audio, rate = smoke_audio()
    soundfile.write(str(folder / name), np.stack([audio, audio], axis=1), rate, subtype='PCM_16')
    return '{},85000,hello'.format(name), '2 channels, expected mono', 'sox in.wav -c 1 out.wav'


def bad_transcript_too_long(folder, name):
    audio, rate = smoke_audio()
    soundfile.write(str(folder / name), audio[:rate // 10], rate, subtype='PCM_16')   # 0.1 s: 4 frames
    return ('{},3244,hello'.format(name), 'transcript too long for the audio: its 5 label(s) need at least 6 '
            'feature frames under CTC, the 0.10 s of audio give 4', 'check that the transcript belongs to this file')


AUDIO_PROBLEMS = {'missing_file': bad_missing, 'corrupt_file': bad_corrupt, 'empty_file': bad_empty_file,
                  'not_a_wav_file': bad_not_wav, 'wrong_sample_rate': bad_sample_rate, 'stereo': bad_stereo,
                  'transcript_too_long': bad_transcript_too_long}


def test_bad_audio_is_reported_with_csv_line_file_what_and_fix(tmp_path, data):
    """Each kind of bad audio in a row of its own among good ones, all in one run: the check lists every
    problem of a set before stopping (test_more_than_20_problems_...), each on its own line."""
    rows = {problem: AUDIO_PROBLEMS[problem](data, problem + '.wav') for problem in sorted(AUDIO_PROBLEMS)}
    csv_path = write_csv(data, [GOOD_ROWS[0]] + [row for row, _, _ in rows.values()] + [GOOD_ROWS[1]])
    output = fails(tmp_path, '--train_files', csv_path, '--nonormalize_sample_rate')
    for number, (problem, (row, what, fix)) in enumerate(rows.items(), start=3):
        line = [line for line in output.splitlines() if 'line {}:'.format(number) in line]
        assert len(line) == 1 and line[0].strip().startswith('{}: line {}: {}: '.format(
            csv_path, number, data / '{}.wav'.format(problem))), output
        assert what in line[0] and fix in line[0], (problem, output)
    assert '{} problem(s) in the input data'.format(len(rows)) in output


CSV_PROBLEMS = {
    'empty_transcript': ('good_morning.wav,42668,', 'good_morning.wav: empty transcript'),
    'out_of_alphabet': ('hello_world.wav,46760,Good morning!',
                        "hello_world.wav: characters not in the alphabet: 'G' '!' (normalise the "
                        "transcript, or add them to the alphabet file)"),
}


def test_bad_csvs_are_reported_with_csv_line_and_fix(tmp_path, data):
    """Three bad CSVs in one run (the CSV reader reports every file's problems before stopping): the two bad
    transcripts in one, a header without the three columns, a row that is not UTF-8."""
    problems = [CSV_PROBLEMS[problem] for problem in sorted(CSV_PROBLEMS)]
    transcripts = write_csv(data, [row for row, _ in problems] + GOOD_ROWS[2:])
    header = write_csv(data, ['good_morning.wav,good morning'], name='header.csv', header='path,text')
    latin1 = data / 'latin1.csv'
    latin1.write_bytes('\n'.join([CSV_HEADER, GOOD_ROWS[0], 'hello_world.wav,46760,caf\xe9 au lait', GOOD_ROWS[2]])
                       .encode('latin-1') + b'\n')
    output = fails(tmp_path, '--train_files', ','.join(str(path) for path in (transcripts, header, latin1)))
    for number, (_, message) in enumerate(problems, start=2):
        assert '{}: line {}: {}'.format(transcripts, number, message) in output
    assert ('{}: line 1: missing column(s) wav_filename, wav_filesize, transcript (the header is "path,text"); '
            'a DeepSpeech CSV starts with the header "{}"'.format(header, CSV_HEADER)) in output
    assert '{}: line 3: not valid UTF-8 (byte 0xe9 at byte 26 of the line); re-encode the file'.format(latin1) \
        in output
    assert 'iconv -f LATIN1 -t UTF-8' in output
    assert '{} problem(s) in the input data'.format(len(problems) + 2) in output


def test_more_than_20_problems_lists_20_and_counts_the_rest(tmp_path, data):
    csv_path = write_csv(data, GOOD_ROWS + ['gone{}.wav,{},hello'.format(i, 1000 + i) for i in range(25)])
    dev_path = write_csv(data, ['gone_dev.wav,1,hello'], name='dev.csv')
    output = fails(tmp_path, '--train_files', csv_path, '--dev_files', dev_path)
    assert '26 problem(s) in the input data' in output    # every set is checked before stopping
    assert len([line for line in output.splitlines() if 'audio file not found' in line]) == 20
    assert '... and 6 more' in output


def test_skip_invalid_samples_trains_on_the_rest_and_prints_a_summary(tmp_path, data):
    """README: --skip_invalid_samples leaves out samples with characters outside the alphabet or an empty
    transcript (skipped when the CSV is read, so their audio is never checked) and samples whose audio is
    bad, instead of stopping; each kind has its summary. Both kinds in one CSV, one run."""
    bad_stereo(data, 'bad.wav')
    (data / 'empty.wav').write_bytes(b'')
    csv_path = write_csv(data, GOOD_ROWS[:2] + ['bad.wav,85000,hello', 'empty.wav,0,x', 'gone.wav,9,x',
                                                'the_cat_sat.wav,48226,Größe', 'the_cat_sat.wav,48226,'])
    run = run_deepspeech(*tiny_model_flags(tmp_path, 16), '--train_files', csv_path, '--dev_files', csv_path,
                         '--epochs', 1, '--skip_invalid_samples', timeout=120)
    assert ('--skip_invalid_samples: skipping 2 sample(s) whose transcript the alphabet cannot encode (or is '
            'empty). The first 2:') in run.output
    assert "{}: line 7: the_cat_sat.wav: characters not in the alphabet: 'G' 'ö' 'ß'".format(csv_path) in run.output
    assert '{}: line 8: the_cat_sat.wav: empty transcript'.format(csv_path) in run.output
    assert 'Checked the audio of 10 sample(s)' in run.output        # the 5 rows left of 7, in train and dev
    assert ('--skip_invalid_samples: skipping 3 invalid sample(s): 1 empty audio, 1 missing file, 1 not mono. '
            'The first 3:') in run.output
    assert '{}: line 4: {}: 2 channels, expected mono'.format(csv_path, data / 'bad.wav') in run.output
    assert 'train set ({}): using 2 of 5 sample(s)'.format(csv_path) in run.output
    assert 'Finished training epoch 0' in run.output
    assert (tmp_path / 'checkpoints' / 'flags.txt').exists()


def test_skip_invalid_samples_still_fails_when_a_set_becomes_empty(tmp_path, data):
    train_path = write_csv(data, GOOD_ROWS)
    dev_path = write_csv(data, ['gone.wav,9,x'], name='dev.csv')
    output = fails(tmp_path, '--train_files', train_path, '--dev_files', dev_path, '--skip_invalid_samples')
    assert 'dev set {}: every one of its 1 sample(s) is invalid, nothing is left to use'.format(dev_path) in output


def test_two_ranks_agree_and_both_fail_before_training(tmp_path, data):
    # Audio paths are split between ranks in sorted order: zz.wav (the 4th) is checked by rank 1 only,
    # yet both ranks must report it and stop, before any collective of training (no hang).
    bad_stereo(data, 'zz.wav')
    csv_path = write_csv(data, GOOD_ROWS + ['zz.wav,85000,hello'])
    run = run_horovod(2, *tiny_model_flags(tmp_path, 16), '--train_files', csv_path, '--epochs', 1, check=False,
                      timeout=120)
    assert run.returncode != 0
    message = '{}: line 5: {}: 2 channels, expected mono'.format(csv_path, data / 'zz.wav')
    assert len([line for line in run.output.splitlines() if message in line]) == 2, run.output
    for rank in range(2):
        assert '[{}]<stderr>:E 1 problem(s) in the input data'.format(rank) in run.output, run.output
    assert 'Training from global step' not in run.output
    assert not (tmp_path / 'checkpoints').exists() and not (tmp_path / 'summaries').exists()


def test_resampled_length_matches_librosa():
    import librosa
    for frames, rate in [(21312, 8000), (4410, 44100), (1, 22050), (12345, 48000)]:
        resampled = librosa.resample(np.zeros(frames, np.float32), orig_sr=rate, target_sr=16000)
        assert samples_at_rate(frames, rate, 16000) == len(resampled)
