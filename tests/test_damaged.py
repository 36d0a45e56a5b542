"""Files damaged from outside (a copy cut short, a lost write, flipped bytes), each row of doc/TRAINING.rst's
table "Damaged files": a real run's checkpoints, audio files, feature cache, sample databases and tar shards
are damaged here, then the same command runs again. Each case: one line naming the file and what is wrong,
then a logged safe fallback (an older intact checkpoint, a state rebuilt from the files present, best_dev's
loss evaluated anew, features recomputed from the audio) or a clear error with the fix; never a traceback,
never fresh weights unasked, never a worse model in best_dev's place, never damaged data fed to training."""
import json
import os
import re
import shutil
import struct
import tarfile

import pytest
import soundfile

from tests.helpers.suite import (CSV_HEADER, SMOKE_CSV, SMOKE_DIR, run_deepspeech, run_horovod, start_step,
                                 tiny_model_flags)

from tests.helpers.sdb_cases import layout, tool as sdb_tool

EPOCHS = 3      # 3 steps an epoch on the smoke data: train-3, train-6, train-9 and best_dev-9


def train_flags(directory, epochs=1):
    return [*tiny_model_flags(directory), '--train_files', SMOKE_CSV, '--dev_files', SMOKE_CSV, '--epochs', epochs]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A run's directory after EPOCHS epochs, each validated (the dev loss falls: best_dev-9 is the best)."""
    directory = tmp_path_factory.mktemp('trained')
    run_deepspeech(*train_flags(directory, EPOCHS))
    return directory


@pytest.fixture
def checkpoints(trained, tmp_path):
    """A copy of the trained run's checkpoints under tmp_path (tiny_model_flags(tmp_path) uses it)."""
    shutil.copytree(str(trained / 'checkpoints'), str(tmp_path / 'checkpoints'))
    return tmp_path / 'checkpoints'


def without_traceback(run):
    """`run`, asserted to hold no traceback: every damage gives a line that names it, or a clear error."""
    assert 'Traceback' not in run.output, run.output[-5000:]
    return run


def rerun(directory, *flags, check=True):
    """The same command again (one more epoch, `flags` added)."""
    return without_traceback(run_deepspeech(*train_flags(directory), *flags, check=check))


def loaded(output):
    """The checkpoint the run loaded: the last one it announced loading."""
    return re.findall(r'Loading (?:most recent|best validating) checkpoint from \S+/(\S+)', output)[-1]


def truncate(path, size=100):
    with open(str(path), 'r+b') as damaged:
        damaged.truncate(size)


def garble(path):
    with open(str(path), 'wb') as damaged:
        damaged.write(bytes(range(256)) * 2)


def truncated_data(checkpoints, name):
    truncate(checkpoints / (name + '.data-00000-of-00001'))
    return name + '.data-00000-of-00001', 'damaged or incomplete'


def garbled_index(checkpoints, name):
    garble(checkpoints / (name + '.index'))
    return name + '.index', 'cannot be read'


def missing_index(checkpoints, name):
    (checkpoints / (name + '.index')).unlink()
    return name + '.index', 'is missing'


def missing_data(checkpoints, name):
    (checkpoints / (name + '.data-00000-of-00001')).unlink()
    return name + '.data-00000-of-00001', 'data file is missing'


def damage(checkpoints, damages):
    """Apply {checkpoint name: damage function}; returns the run's output check: each named with its file and
    what is wrong, in a warning that it is skipped."""
    damaged = {name: how(checkpoints, name) for name, how in damages.items()}

    def named(output):
        for name, (damaged_file, what) in damaged.items():
            line = re.search(r'W cannot load checkpoint \S+/{}: (.*); skipping it'.format(name), output)
            assert line and damaged_file in line.group(1) and what in line.group(1), (name, output[-3000:])
    return named


# Each kind of damage is on one train checkpoint of the next two tests: the loader's skip is one loop whatever
# the damage (checkpoints.py, _restore_intact), so one run shows two kinds, not a run per kind.
def test_damaged_newest_train_checkpoints_are_named_and_the_next_older_one_loads(checkpoints, tmp_path):
    named = damage(checkpoints, {'train-9': truncated_data, 'train-6': garbled_index})
    run = rerun(tmp_path)
    named(run.output)
    assert 'loaded {} instead of the damaged {}, {}'.format(checkpoints / 'train-3', checkpoints / 'train-9',
                                                            checkpoints / 'train-6') in run.output
    assert loaded(run.output) == 'train-3' and start_step(run.output) == 3


def test_with_every_train_checkpoint_damaged_best_dev_loads(checkpoints, tmp_path):
    named = damage(checkpoints, {'train-9': missing_index, 'train-6': missing_data, 'train-3': truncated_data})
    run = rerun(tmp_path)
    assert len(re.findall(r'W cannot load checkpoint \S+/train-\d: ', run.output)) == 3
    named(run.output)
    assert loaded(run.output) == 'best_dev-9' and start_step(run.output) == 9


def test_the_train_checkpoints_of_an_earlier_run_are_fallbacks_too(checkpoints, tmp_path):
    """The state file lists only the saves of the run that wrote it: here train-12 alone."""
    rerun(tmp_path)
    assert '"train-9"' not in (checkpoints / 'checkpoint').read_text()
    truncated_data(checkpoints, 'train-12')
    run = rerun(tmp_path)
    assert loaded(run.output) == 'train-9' and start_step(run.output) == 9


def test_with_no_intact_checkpoint_the_run_fails_with_the_fix_and_never_starts_afresh(checkpoints, tmp_path):
    for name in ('train-3', 'train-6', 'train-9', 'best_dev-9'):
        truncated_data(checkpoints, name)
    run = rerun(tmp_path, check=False)
    assert run.returncode == 1
    error = [line for line in run.output.splitlines() if line.startswith('E ')]
    assert len(error) == 1 and 'no intact checkpoint to load in {}'.format(checkpoints) in error[0], run.output[-3000:]
    assert '--load_train init' in error[0] and 'best_dev-9' in error[0]
    assert 'Initializing all variables' not in run.output and 'STARTING Optimization' not in run.output


def test_testing_with_a_damaged_best_dev_uses_the_newest_train_checkpoint(checkpoints, tmp_path):
    truncated_data(checkpoints, 'best_dev-9')
    run = without_traceback(run_deepspeech(*tiny_model_flags(tmp_path), '--test_files', SMOKE_CSV))  # evaluate auto
    assert re.search(r'W cannot load checkpoint \S+/best_dev-9: \S+/best_dev-9.data-00000-of-00001 is damaged',
                     run.output)
    assert loaded(run.output) == 'train-9' and 'Test on ' in run.output


def test_an_unreadable_checkpoint_state_file_is_rebuilt_from_the_train_checkpoints_present(checkpoints, tmp_path):
    garble(checkpoints / 'checkpoint')
    run = rerun(tmp_path)
    assert 'W {} cannot be read'.format(checkpoints / 'checkpoint') in run.output
    assert loaded(run.output) == 'train-9' and start_step(run.output) == 9     # not best_dev-9
    assert 'model_checkpoint_path: "train-12"' in (checkpoints / 'checkpoint').read_text()   # rewritten


def resume_from_train_3(checkpoints):
    """Make the state file name train-3 alone: one epoch from there reaches step 6, worse than best_dev-9."""
    (checkpoints / 'checkpoint').write_text('model_checkpoint_path: "train-3"\nall_model_checkpoint_paths: "train-3"\n')


def best_record(checkpoints):
    return json.loads((checkpoints / 'best_dev_loss.json').read_text())


def damage_best_dev_loss(checkpoints):
    """Garble best_dev_loss.json and resume from train-3: one epoch reaches step 6, whose dev loss is worse
    than best_dev-9's. Returns best_dev-9's recorded loss."""
    best_loss = best_record(checkpoints)['dev_loss']
    garble(checkpoints / 'best_dev_loss.json')
    resume_from_train_3(checkpoints)
    return best_loss


def assert_best_dev_kept(output, checkpoints, best_loss):
    """The run said the record was unreadable, evaluated best_dev-9 anew and kept it over its worse model."""
    assert 'W {} cannot be read'.format(checkpoints / 'best_dev_loss.json') in output
    evaluated = float(re.search(r'Evaluated the saved best_dev on the dev set\(s\): loss (\S+)', output).group(1))
    assert evaluated == pytest.approx(best_loss, rel=1e-5)
    new_loss = float(re.search(r'Finished validating epoch 1 on \S+ - loss: (\S+)', output).group(1))
    assert new_loss > best_loss and 'Saved new best validating model' not in output
    assert best_record(checkpoints)['checkpoint'] == 'best_dev-9'     # and the record is readable again
    assert (checkpoints / 'best_dev_checkpoint').read_text().startswith('model_checkpoint_path: "best_dev-9"')


def test_an_unreadable_best_dev_loss_is_evaluated_anew_and_a_worse_model_does_not_replace_best_dev(
        checkpoints, tmp_path):
    best_loss = damage_best_dev_loss(checkpoints)
    assert_best_dev_kept(rerun(tmp_path).output, checkpoints, best_loss)


def test_a_best_dev_whose_files_are_gone_is_named_and_replaced_by_the_next_validation(checkpoints, tmp_path):
    for leftover in checkpoints.glob('best_dev-9.*'):
        leftover.unlink()
    run = rerun(tmp_path)
    assert 'best_dev-9, whose best_dev-9.index is missing: the next validation replaces it' in run.output
    assert best_record(checkpoints)['checkpoint'] == 'best_dev-12'


def test_a_plateau_that_finds_best_dev_damaged_stops_with_the_fix(checkpoints, tmp_path):
    """best_dev-9 (recorded loss intact) is truncated; from train-3 the next validation is worse: a plateau."""
    truncated_data(checkpoints, 'best_dev-9')
    resume_from_train_3(checkpoints)
    run = rerun(tmp_path, '--reduce_lr_on_plateau', '--plateau_epochs', 1, check=False)
    assert run.returncode == 1, run.output[-5000:]
    assert re.search(r'E cannot reload best_dev \S+/best_dev-9 on a plateau: \S+/best_dev-9.data-00000-of-00001 is '
                     r'damaged .* Put back a good copy of it', run.output)


def rerun_horovod(directory):
    """The same command under `horovodrun -np 2`."""
    return without_traceback(run_horovod(2, *train_flags(directory), timeout=300))


@pytest.mark.slow
def test_horovod_ranks_start_from_the_same_older_checkpoint_when_the_newest_is_truncated(checkpoints, tmp_path):
    truncated_data(checkpoints, 'train-9')
    run = rerun_horovod(tmp_path)
    assert re.search(r'cannot load checkpoint \S+/train-9: \S+/train-9.data-00000-of-00001 is damaged', run.output)
    assert loaded(run.output) == 'train-6' and start_step(run.output) == 6
    # Both ranks train from step 6 (checked each epoch) and end at the same step.
    assert 'ranks disagree' not in run.output and 'FINISHED optimization' in run.output


@pytest.mark.slow
def test_horovod_ranks_evaluate_an_unknown_best_dev_loss_together(checkpoints, tmp_path):
    """Rank 0 lends best_dev's weights; every rank runs the same collectives (no hang, same decision)."""
    best_loss = damage_best_dev_loss(checkpoints)
    assert_best_dev_kept(rerun_horovod(tmp_path).output, checkpoints, best_loss)


# ---------------------------------------------------------------------------------------------------------
# Damaged input data: audio files, the feature cache, tar shards and sample databases of a real run.

SMOKE_ROWS = [('good_morning', 'good morning'), ('hello_world', 'hello world'), ('the_cat_sat', 'the cat sat')]


def flac_csv(folder, listed_size=None):
    """The smoke-test utterances as FLAC files (whose header cannot tell a file cut short) and their CSV,
    each row's wav_filesize its file's size, or `listed_size`."""
    folder.mkdir(exist_ok=True)
    rows = [CSV_HEADER]
    for name, transcript in SMOKE_ROWS:
        audio, rate = soundfile.read(os.path.join(SMOKE_DIR, name + '.wav'), dtype='int16')
        soundfile.write(str(folder / (name + '.flac')), audio, rate, subtype='PCM_16')
        size = (folder / (name + '.flac')).stat().st_size if listed_size is None else listed_size
        rows.append('{}.flac,{},{}'.format(name, size, transcript))
    (folder / 'flac.csv').write_text('\n'.join(rows) + '\n')
    return folder / 'flac.csv'


def train_once(directory, *flags, check=True):
    """One epoch of the tiny model from `flags`' data, files under `directory`."""
    return without_traceback(run_deepspeech(*tiny_model_flags(directory), '--epochs', 1, *flags, check=check))


def cut_in_half(path):
    truncate(path, path.stat().st_size // 2)


def test_an_audio_file_smaller_than_its_wav_filesize_is_named_with_csv_line_sizes_and_fix(tmp_path):
    csv_path = flac_csv(tmp_path / 'data')
    flac = tmp_path / 'data' / 'hello_world.flac'
    listed = flac.stat().st_size
    cut_in_half(flac)
    run = train_once(tmp_path, '--train_files', csv_path, check=False)
    assert run.returncode == 1
    problems = [line.strip() for line in run.output.splitlines() if line.startswith('  ')]
    assert problems == ['{}: line 3: {}: the file has {} bytes, its wav_filesize says {}: a copy or download cut short '
                        '(copy it again from its source; if the file is whole, the CSV is wrong: run the importer that '
                        'wrote it again, or write {} as its wav_filesize)'.format(csv_path, flac, listed // 2, listed,
                                                                                 listed // 2)], run.output[-3000:]
    assert not (tmp_path / 'checkpoints').exists()


def test_with_skip_invalid_samples_a_file_smaller_than_its_wav_filesize_is_left_out_and_counted(tmp_path):
    csv_path = flac_csv(tmp_path / 'data')
    cut_in_half(tmp_path / 'data' / 'hello_world.flac')
    run = train_once(tmp_path, '--train_files', csv_path, '--skip_invalid_samples')
    assert 'skipping 1 invalid sample(s): 1 audio file smaller than its wav_filesize' in run.output
    assert '{}: line 3: {}: the file has'.format(csv_path, tmp_path / 'data' / 'hello_world.flac') in run.output
    assert 'train set ({}): using 2 of 3 sample(s)'.format(csv_path) in run.output
    assert 'Finished training epoch 0' in run.output


def test_files_larger_than_their_wav_filesize_give_one_warning_and_train(tmp_path):
    """Hand-written CSVs put 0 (or rough sizes): not damage, but batching by length needs the sizes."""
    csv_path = flac_csv(tmp_path / 'data', listed_size=0)
    run = train_once(tmp_path, '--train_files', csv_path)
    warnings = [line for line in run.output.splitlines() if line.startswith('W ')]
    assert warnings == ["W 3 sample(s) have an audio file larger than their CSV's wav_filesize, e.g. {}: line 2: {}: "
                        "{} bytes, its wav_filesize says 0. Not an error, but samples are batched by wav_filesize "
                        "(similar lengths together): run the importer that wrote the CSV again for the right sizes"
                        .format(csv_path, tmp_path / 'data' / 'good_morning.flac',
                                (tmp_path / 'data' / 'good_morning.flac').stat().st_size)], run.output[-3000:]
    assert 'Finished training epoch 0' in run.output


def epoch_loss(output):
    return float(re.search(r'Finished training epoch \d+ - loss: (\S+),', output).group(1))


def rerun_cached(directory):
    """One more epoch of the run in `directory`, with its feature cache (`directory`/features)."""
    return train_once(directory, '--train_files', SMOKE_CSV, '--feature_cache', directory / 'features')


@pytest.fixture(scope='module')
def cached(tmp_path_factory):
    """A run's directory after one epoch with a feature cache of all three samples, and the loss of one more
    epoch from there with the cache intact."""
    directory = tmp_path_factory.mktemp('cached') / 'run'
    rerun_cached(directory)
    intact = directory.parent / 'intact'
    shutil.copytree(str(directory), str(intact))
    return directory, epoch_loss(rerun_cached(intact).output)


@pytest.fixture
def damaged_cache(cached, tmp_path):
    """(a copy of the cached run to damage, the loss of its next epoch with the cache intact)."""
    directory, loss = cached
    shutil.copytree(str(directory), str(tmp_path / 'damaged'))
    return tmp_path / 'damaged', loss


def test_a_damaged_feature_cache_entry_is_recomputed_from_the_audio_and_never_fed_to_training(damaged_cache):
    damaged, intact_loss = damaged_cache
    offset, frames, _ = json.loads((damaged / 'features.json').read_text())['entries']['1']
    with open(str(damaged / 'features'), 'r+b') as cache:     # the middle of sample 1's features: huge values
        cache.seek(offset + frames * 26 * 2)
        cache.write(b'\x7f\x7f\x7f\x7f' * 50)
    run = rerun_cached(damaged)
    warnings = [line for line in run.output.splitlines() if line.startswith('W ')]
    assert warnings == ['W Feature cache {}: the features of {}: line 3: {} are damaged (their checksum does not '
                        'match, at byte {}): recomputing them from the audio'.format(
                            damaged / 'features', SMOKE_CSV, os.path.join(SMOKE_DIR, 'hello_world.wav'), offset)]
    assert epoch_loss(run.output) == pytest.approx(intact_loss, rel=1e-5)
    assert 'W ' not in rerun_cached(damaged).output       # stored again, intact


def test_a_feature_cache_cut_short_recomputes_the_samples_past_its_end(damaged_cache):
    damaged, intact_loss = damaged_cache
    entries = json.loads((damaged / 'features.json').read_text())['entries']
    cut = sorted(offset for offset, _, _ in entries.values())[1] + 100     # the first entry whole, two cut off
    truncate(damaged / 'features', cut)
    run = rerun_cached(damaged)
    assert re.search(r'W Feature cache {} is shorter than its index says \({} bytes, the index needs \d+\): the '
                     r'features of 2 sample\(s\) past its end are recomputed'.format(
                         re.escape(str(damaged / 'features')), cut), run.output)
    assert epoch_loss(run.output) == pytest.approx(intact_loss, rel=1e-5)


def test_an_sdb_whose_index_lists_a_sample_twice_is_named_and_stops_the_run(tmp_path):
    """A damaged offset that points at another entry: one sample would be read twice, one lost."""
    path = tmp_path / 'smoke.sdb'
    assert sdb_tool('--audio_type', 'wav', SMOKE_CSV, path) == 0
    data = bytearray(path.read_bytes())
    _, index_start, offsets = layout(data)
    struct.pack_into('>Q', data, index_start + 24, offsets[0])      # sample 1 at sample 0's entry
    path.write_bytes(bytes(data))
    run = train_once(tmp_path, '--train_files', path, check=False)
    assert run.returncode == 1
    assert '{}: at byte {}: sample 1 is at byte {}, but the entries before it end at byte {}: the index is corrupt ' \
        '(write the file again, e.g. with bin/data_set_tool.py)'.format(path, index_start + 24, offsets[0],
                                                                        offsets[1]) in run.output
    assert 'W {}.index: not used, it belongs to another version of the container'.format(path) in run.output


def test_a_tar_shard_cut_between_two_samples_is_named_and_stops_the_run(tmp_path):
    """tarfile reads a shard cut at a member boundary as a shorter shard: the samples after the cut would
    vanish without a word."""
    path = tmp_path / 'smoke.tar'
    assert sdb_tool(SMOKE_CSV, path) == 0
    with tarfile.open(str(path)) as tar:
        third = [member for member in tar if member.name.endswith('.wav')][2]
    truncate(path, third.offset)
    run = train_once(tmp_path, '--train_files', path, check=False)
    assert run.returncode == 1
    assert '{}: at byte {}: the file ends after 2 sample(s), where a tar header or the end of the archive must be ' \
        '(truncated or damaged: copy or write it again)'.format(path, third.offset) in run.output
