"""--augment: the grammar, every operation at p=0 and p=1 on real speech, seeding, and training only."""
import numpy as np
import pytest
import soundfile
import tensorflow.compat.v1 as tfv1

from tests.helpers.suite import CSV_HEADER, SMOKE_CSV, run_deepspeech, tiny_model_flags
from test_features import CONFIG
from deepspeech_training.data.plans import InputSet
from deepspeech_training.iterators import build_input
from deepspeech_training.data.augmentations import (AugmentationError, Augmenter, parse_augmentation,
                                                     parse_augmentations, sample_seed)
from deepspeech_training.data.batching import eval_batches, train_batches
from deepspeech_training.data.feeding import audio_to_features
from deepspeech_training.data.samples import read_sources

RATE = 16000


@pytest.fixture(scope='module')
def noise_csv(tmp_path_factory):
    """A noise set as --augment overlay takes it: a DeepSpeech CSV of (here: white and hum) recordings."""
    folder = tmp_path_factory.mktemp('noise')
    rng = np.random.default_rng(1)
    seconds = np.arange(RATE) / RATE
    for name, audio in [('white.wav', 0.3 * rng.standard_normal(RATE)),
                        ('hum.wav', 0.5 * np.sin(2 * np.pi * 50 * seconds))]:
        soundfile.write(str(folder / name), audio.astype(np.float32), RATE, subtype='PCM_16')
    csv = folder / 'noise.csv'
    csv.write_text(CSV_HEADER + '\nwhite.wav,0,\nhum.wav,0,\n')
    return str(csv)


SAMPLE_SPECS = ['overlay[source={noise},snr=10~5,layers=1:2]', 'reverb[delay=20~5,decay=10]', 'resample[rate=8000]',
                'codec[bitrate=8000]', 'volume[dbfs=-10~2]']
GRAPH_SPECS = ['pitch[pitch=1.2]', 'tempo[factor=1.25]', 'warp[nt=2,nf=2,wt=0.2,wf=0.2]', 'frequency_mask[n=2,size=3]',
               'time_mask[n=3,size=200]', 'time_mask[domain=signal,n=3,size=200]', 'dropout[rate=0.3]',
               'add[stddev=1]', 'multiply[stddev=0.5]', 'dropout[domain=features,rate=0.3]']


def augmented_features(speech, specs, epoch=0, index=3):
    """MFCC features of `speech` after `specs`, through the same functions the input pipeline uses."""
    augmenter = Augmenter(parse_augmentations(specs), random_seed=4568, epochs=1)
    seed = sample_seed(4568, epoch, index)
    audio = augmenter.augment_audio(speech, RATE, seed, 0.0)
    with tfv1.Graph().as_default():
        def augment(domain, tensor, units_per_ms):
            return augmenter.augment_tensor(domain, tensor, tfv1.constant(seed, tfv1.int64),
                                            tfv1.constant(0.0), units_per_ms, tfv1.constant(5))
        features = audio_to_features(tfv1.constant(audio), CONFIG, augment)
        with tfv1.Session() as session:
            return session.run(features)


@pytest.fixture(scope='module')
def plain(speech):
    return augmented_features(speech, [])


@pytest.mark.parametrize('spec', SAMPLE_SPECS)
def test_sample_operation_changes_audio_at_p1_and_not_at_p0(spec, speech, noise_csv):
    spec = spec.format(noise=noise_csv)
    name, rest = spec.split('[')
    for p, changed in (('1', True), ('0', False)):
        augmenter = Augmenter([parse_augmentation('{}[p={},{}'.format(name, p, rest))], random_seed=1, epochs=1)
        audio = augmenter.augment_audio(speech, RATE, sample_seed(1, 0, 0), 0.0)
        assert audio.dtype == np.float32 and audio.shape == speech.shape
        assert np.all(np.abs(audio) <= 1.0) and np.isfinite(audio).all()
        assert (not np.allclose(audio, speech, atol=1e-4)) == changed, (spec, p)


@pytest.mark.parametrize('spec', GRAPH_SPECS)
def test_graph_operation_changes_features_at_p1_and_not_at_p0(spec, speech, plain):
    name, rest = spec.split('[')
    unchanged = augmented_features(speech, ['{}[p=0,{}'.format(name, rest)])
    np.testing.assert_array_equal(unchanged, plain)
    changed = augmented_features(speech, ['{}[p=1,{}'.format(name, rest)])
    assert changed.dtype == np.float32 and changed.shape[1] == 26 and np.isfinite(changed).all()
    if name == 'tempo':
        assert changed.shape[0] == round(plain.shape[0] / 1.25)
    else:
        assert changed.shape == plain.shape
        assert not np.allclose(changed, plain, atol=1e-3)


def test_tempo_never_leaves_fewer_frames_than_the_transcript_needs(speech, plain):
    fast = augmented_features(speech, ['tempo[factor=1000]'])
    assert fast.shape[0] == 5   # min_frames given by augmented_features


def test_augmentation_is_seeded_by_sample_and_epoch(speech, noise_csv):
    specs = ['overlay[source={}]'.format(noise_csv), 'warp[wt=0.3]', 'time_mask', 'add[stddev=2]']
    first = augmented_features(speech, specs, epoch=1, index=7)
    np.testing.assert_array_equal(first, augmented_features(speech, specs, epoch=1, index=7))
    assert not np.allclose(first, augmented_features(speech, specs, epoch=2, index=7))
    assert not np.allclose(first, augmented_features(speech, specs, epoch=1, index=8))


def test_ranges_follow_the_clock():
    rng = np.random.default_rng(0)
    moving = parse_augmentation('tempo[factor=1:2]').factor
    assert (moving.pick(rng, 0.0), moving.pick(rng, 0.5), moving.pick(rng, 1.0)) == (1.0, 1.5, 2.0)
    spread = parse_augmentation('resample[rate=8000~1000]').rate
    picks = [spread.pick(rng, 0.0) for _ in range(200)]
    assert all(isinstance(v, int) and 7000 <= v <= 9000 for v in picks) and len(set(picks)) > 50


@pytest.mark.parametrize('spec, message', [
    ('tempo[factor=fast]', "tempo[factor=fast]: factor: 'fast' is not a number range"),
    ('temp[factor=1.1]', "unknown augmentation 'temp'"),
    ('tempo[speed=1.1]', 'unknown parameter(s) speed of tempo (it takes p, factor, max_time)'),
    ('pitch[p=1.5]', 'p=1.5 must be a probability between 0 and 1'),
    ('reverb[delay]', "'delay' is not KEY=VALUE"),
    ('reverb[delay=1,delay=2]', 'delay is given twice'),
    ('warp[nt=1.5]', "nt: '1.5' must be whole numbers"),
    ('dropout[domain=audio]', 'domain=audio must be one of spectrogram, signal, features'),
    ('overlay[snr=3]', 'overlay needs source=NOISE.csv'),
    ('tempo[factor=1.1', 'expected NAME or NAME[KEY=VALUE,...]'),
])
def test_malformed_augment_names_the_bad_part(spec, message):
    with pytest.raises(AugmentationError) as error:
        parse_augmentation(spec)
    assert message in str(error.value)


def test_every_operation_is_documented():
    with open('doc/TRAINING.rst') as doc:
        text = doc.read()
    from deepspeech_training.data.augmentations import OPERATIONS
    for name, operation in OPERATIONS.items():
        assert '``{}``:'.format(name) in text, name
        for param in operation.PARAMS:
            assert '``{}``'.format(param) in text, (name, param)


def test_only_training_samples_are_augmented(alphabet):
    """Validation batches built beside an augmented training set carry the plain features."""
    records = read_sources([SMOKE_CSV], alphabet)
    augmenter = Augmenter(parse_augmentations(['add[stddev=3]', 'time_mask']), random_seed=1, epochs=1)
    training = InputSet('augmented', records, lambda epoch: train_batches(len(records), 3), 3, augmenter)
    plain = InputSet('plain', records, lambda epoch: train_batches(len(records), 3), 3)
    dev = InputSet('dev', records, lambda epoch: eval_batches(len(records), 3), 3)
    with tfv1.Graph().as_default():
        batch, iterators = build_input([training, plain, dev], CONFIG)
        with tfv1.Session() as session:
            features = {}
            for iterator in iterators:
                session.run(iterator.initializer)
                features[iterator.name] = session.run(batch[2], iterator.select(session))
    assert not np.allclose(features['augmented'], features['plain'])
    np.testing.assert_array_equal(features['dev'], features['plain'])


def test_training_with_augmentation_runs_and_a_bad_spec_stops_at_start(tmp_path, noise_csv):
    common = ['--train_files', SMOKE_CSV, '--dev_files', SMOKE_CSV, '--epochs', 2, '--train_batch_size', 3]
    result = run_deepspeech(*common, *tiny_model_flags(tmp_path),
                            '--augment', 'overlay[p=0.5,source={},snr=20~5]'.format(noise_csv),
                            '--augment', 'reverb[p=0.5]', '--augment', 'tempo[p=0.5,factor=1~0.1]',
                            '--augment', 'frequency_mask[p=0.8]', '--augment', 'add[p=0.5,stddev=0.5]')
    assert 'Finished training epoch 1' in result.output
    bad = run_deepspeech(*common, *tiny_model_flags(tmp_path / 'bad'), '--augment', 'tempo[factr=1.1]', check=False)
    assert bad.returncode != 0
    assert 'tempo[factr=1.1]: unknown parameter(s) factr of tempo' in bad.output
    assert not (tmp_path / 'bad').exists()
