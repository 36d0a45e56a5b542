"""--augment: DeepSpeech 0.9's augmentation grammar and operations, for training samples only.

Grammar (one --augment per operation, applied in the order given)::

    NAME[KEY=VALUE,...]     e.g.  overlay[p=0.5,source=noise.csv,snr=12~6]  tempo[factor=1:1.2~0.05]

Every operation takes `p`, the probability that it applies to a sample. Numeric values are ranges:
`V` fixed, `V~R` uniform in [V-R, V+R], `A:B` moving from A to B over the run (the "clock": 0 at
the first epoch of the run, 1 at its end), `A:B~R` both.

Sample operations change the decoded audio in Python (numpy, scipy, librosa, soundfile); graph
operations are TensorFlow ops inside the input pipeline on the signal, the spectrogram or the MFCC
features (their `domain`). Every random choice is seeded by (--random_seed, epoch, sample index), so
a run is reproducible, and a sample is augmented the same way whatever the number of ranks.
"""
import io
import os
import re
from dataclasses import dataclass

import librosa
import numpy as np
import scipy.signal
import soundfile
import tensorflow as tf

from . import opus
from .audio import AudioError, read_audio
from .samples import csv_audio_paths

SPECTROGRAM, FEATURES, SIGNAL = 'spectrogram', 'features', 'signal'


class AugmentationError(ValueError):
    """A malformed --augment value; the message names the bad part and the accepted forms."""


RANGE_FORMS = 'V, V~R, A:B or A:B~R, e.g. 1.1, 1.1~0.1, 1:1.2, 1:1.2~0.05'
_NUMBER = r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?'
_RANGE = re.compile(r'^({0})(?::({0}))?(?:~({0}))?$'.format(_NUMBER))


@dataclass(frozen=True)
class ValueRange:
    start: float
    end: float
    radius: float = 0.0
    integer: bool = False

    @classmethod
    def parse(cls, text, integer, where):
        match = _RANGE.match(text.strip())
        if not match:
            raise AugmentationError('{}: {!r} is not a number range ({})'.format(where, text, RANGE_FORMS))
        start, end, radius = match.groups()
        value = cls(float(start), float(end if end is not None else start), float(radius or 0.0), integer)
        if value.radius < 0:
            raise AugmentationError('{}: the radius after ~ must not be negative'.format(where))
        if integer and not all(float(v).is_integer() for v in (value.start, value.end, value.radius)):
            raise AugmentationError('{}: {!r} must be whole numbers'.format(where, text))
        return value

    def pick(self, rng, clock):
        """One value for a sample (Python side)."""
        centre = self.start + (self.end - self.start) * clock
        value = rng.uniform(centre - self.radius, centre + self.radius) if self.radius else centre
        return int(round(value)) if self.integer else value

    def pick_tensor(self, draw, clock, shape=()):
        """The same inside the graph; `draw` gives seeded random tensors, `clock` is a float tensor."""
        centre = self.start + (self.end - self.start) * clock
        value = centre + self.radius * (2.0 * draw.uniform(shape) - 1.0) if self.radius else centre + tf.zeros(shape)
        return tf.cast(tf.round(value), tf.int32) if self.integer else value


class Draw:
    """Seeded random tensors for one operation on one sample: stateless ops keyed by the sample's seed
    and a counter, so the graph gives the same draws for the same (seed, epoch, index)."""

    def __init__(self, sample_seed, salt):
        self.sample_seed, self.salt, self.count = sample_seed, salt, 0

    def _seed(self):
        self.count += 1
        return tf.stack([self.sample_seed, tf.constant(self.salt * 1000 + self.count, tf.int64)])

    def uniform(self, shape=()):
        return tf.random.stateless_uniform(shape, self._seed())

    def normal(self, shape=()):
        return tf.random.stateless_normal(shape, self._seed())


class Augmentation:
    """Base: PARAMS maps each parameter to (kind, default); kind is float, int, str or a tuple of choices.
    DOMAINS: where it may apply, the first by default; with several, the `domain` parameter picks."""
    PARAMS = {}
    DOMAINS = (SPECTROGRAM,)
    name = ''

    def __init__(self, spec, values):
        self.spec = spec
        self.p = _probability(spec, values.pop('p', '1.0'))
        params = dict(self.PARAMS)
        if len(self.DOMAINS) > 1:
            params['domain'] = (self.DOMAINS, self.DOMAINS[0])
        unknown = sorted(set(values) - set(params))
        if unknown:
            raise AugmentationError('{}: unknown parameter(s) {} of {} (it takes p, {})'.format(
                spec, ', '.join(unknown), self.name, ', '.join(params)))
        for key, (kind, default) in params.items():
            setattr(self, key, _parse_value(spec, key, kind, values.get(key, default)))
        self.domain = getattr(self, 'domain', self.DOMAINS[0])

    def check_sample_rate(self, sample_rate):
        """Raise AugmentationError if this operation cannot work at `sample_rate`."""


def _probability(spec, text):
    try:
        p = float(text)
    except ValueError:
        p = -1.0
    if not 0.0 <= p <= 1.0:
        raise AugmentationError('{}: p={} must be a probability between 0 and 1'.format(spec, text))
    return p


def _parse_value(spec, key, kind, value):
    where = '{}: {}'.format(spec, key)
    if not isinstance(value, str):
        value = str(value)
    if kind is str:
        return value
    if isinstance(kind, tuple):
        if value not in kind:
            raise AugmentationError('{}={} must be one of {}'.format(where, value, ', '.join(kind)))
        return value
    return ValueRange.parse(value, kind is int, where)


# ---- sample operations (numpy, on mono float32 audio in [-1, 1]) -------------------------------

def peak_dbfs(audio):
    """Peak level on DeepSpeech's scale, where a full-scale sine (peak 1.0) is 3.0103 dBFS."""
    return 20.0 * np.log10(max(1e-16, float(np.max(np.abs(audio))) if len(audio) else 1e-16)) + 3.0103


def set_peak_dbfs(audio, dbfs):
    gain = 10.0 ** ((dbfs - peak_dbfs(audio)) / 20.0)
    return np.clip(audio * gain, -1.0, 1.0).astype(np.float32)


class SampleAugmentation(Augmentation):
    DOMAINS = (SIGNAL,)

    def apply(self, audio, sample_rate, rng, clock):
        raise NotImplementedError


class Overlay(SampleAugmentation):
    """Mixes `layers` noise recordings from the `source` CSV into the sample at `snr` dB below its peak."""
    name = 'overlay'
    PARAMS = {'source': (str, ''), 'snr': (float, '3.0'), 'layers': (int, '1')}

    def __init__(self, spec, values):
        super().__init__(spec, values)
        if not os.path.isfile(self.source):
            raise AugmentationError('{}: overlay needs source=NOISE.csv, an existing DeepSpeech CSV of noise '
                                    'recordings ({!r} is not a file)'.format(spec, self.source))
        self.noise_paths, self.noise = csv_audio_paths(self.source), {}
        if not self.noise_paths:
            raise AugmentationError('{}: {} lists no noise recordings'.format(spec, self.source))

    def _noise_audio(self, index, sample_rate):
        if index not in self.noise:   # decoded once, on first use
            try:
                self.noise[index] = read_audio(self.noise_paths[index], sample_rate)
            except (AudioError, OSError) as error:
                raise AugmentationError('{}: noise recording {} of {}: {}'.format(
                    self.spec, self.noise_paths[index], self.source, error)) from None
        return self.noise[index]

    def apply(self, audio, sample_rate, rng, clock):
        mix = np.zeros_like(audio)
        for _ in range(max(1, self.layers.pick(rng, clock))):
            noise = self._noise_audio(int(rng.integers(len(self.noise_paths))), sample_rate)
            if not len(noise):
                continue
            repeated = np.tile(noise, -(-(len(audio) + len(noise)) // len(noise)))
            start = int(rng.integers(len(noise)))
            mix += repeated[start:start + len(audio)]
        if not np.any(mix):
            return audio
        level = peak_dbfs(audio)
        noisy = audio + set_peak_dbfs(mix, level - self.snr.pick(rng, clock)) if np.any(audio) else mix
        return set_peak_dbfs(noisy, level)


class Reverb(SampleAugmentation):
    """Five feedback comb filters at prime-ratio delays (so their echoes do not line up), `delay` ms for
    the first and each echo `decay` dB quieter than the previous; the peak level is kept."""
    name = 'reverb'
    PARAMS = {'delay': (float, '20.0'), 'decay': (float, '10.0')}
    PRIMES = (17, 19, 23, 29, 31)

    def apply(self, audio, sample_rate, rng, clock):
        delay_ms, decay_db = self.delay.pick(rng, clock), self.decay.pick(rng, clock)
        gain = 10.0 ** (-decay_db / 20.0)
        wet = audio.astype(np.float64)
        for prime in self.PRIMES:
            lag = max(16, int(delay_ms * prime / self.PRIMES[0] * sample_rate / 1000.0))
            feedback = np.zeros(lag + 1)
            feedback[0], feedback[lag] = 1.0, -gain      # y[n] = x[n] + gain * y[n - lag]
            wet += scipy.signal.lfilter([1.0], feedback, audio)
        return set_peak_dbfs(wet, peak_dbfs(audio))


class Resample(SampleAugmentation):
    """Down to `rate` Hz and back: the band-limited sound of a narrow-band recording."""
    name = 'resample'
    PARAMS = {'rate': (int, '8000')}

    def apply(self, audio, sample_rate, rng, clock):
        rate = max(1000, self.rate.pick(rng, clock))
        low = librosa.resample(audio, orig_sr=sample_rate, target_sr=rate)
        back = librosa.resample(low, orig_sr=rate, target_sr=sample_rate)
        return np.pad(back, (0, max(0, len(audio) - len(back))))[:len(audio)].astype(np.float32)


class Codec(SampleAugmentation):
    """Through the lossy Opus codec at about `bitrate` bit/s, as a phone call or voice message sounds."""
    name = 'codec'
    PARAMS = {'bitrate': (int, '3200')}
    # libsndfile sets Opus's rate by a compression level in [0, 1]: 0 is the highest rate it uses.
    MIN_BITRATE, MAX_BITRATE = 6000, 256000

    def check_sample_rate(self, sample_rate):
        if sample_rate not in opus.RATES:
            raise AugmentationError('{}: Opus works at {} Hz, not at --audio_sample_rate {}'.format(
                self.spec, ', '.join(map(str, opus.RATES)), sample_rate))

    def apply(self, audio, sample_rate, rng, clock):
        bitrate = self.bitrate.pick(rng, clock)
        level = (self.MAX_BITRATE - bitrate) / (self.MAX_BITRATE - self.MIN_BITRATE)
        encoded = io.BytesIO()
        soundfile.write(encoded, audio, sample_rate, format='OGG', subtype='OPUS',
                        compression_level=float(np.clip(level, 0.0, 1.0)))
        encoded.seek(0)
        decoded, _ = soundfile.read(encoded, dtype='float32')
        return np.pad(decoded, (0, max(0, len(audio) - len(decoded))))[:len(audio)]


class Volume(SampleAugmentation):
    """Levels the sample's peak to `dbfs` (3.0103, the default, is full scale)."""
    name = 'volume'
    PARAMS = {'dbfs': (float, '3.0103')}

    def apply(self, audio, sample_rate, rng, clock):
        return set_peak_dbfs(audio, self.dbfs.pick(rng, clock)) if np.any(audio) else audio


# ---- graph operations (TensorFlow, on [time, bins]: the signal is [samples, 1]) ------------------

class GraphAugmentation(Augmentation):
    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        """`tensor` [time, bins] -> augmented; `units_per_ms` converts ms to time steps of the domain;
        `min_frames` is the fewest frames the transcript needs (tempo never goes below it)."""
        raise NotImplementedError


def _resize(tensor, time_size, bin_size):
    return tf.image.resize(tensor[tf.newaxis, :, :, tf.newaxis], tf.stack([time_size, bin_size]))[0, :, :, 0]


class Pitch(GraphAugmentation):
    """Stretches the spectrogram along frequency by `pitch` (cropped or zero-padded to its size)."""
    name = 'pitch'
    PARAMS = {'pitch': (float, '1.075~0.125')}

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        shape = tf.shape(tensor)
        bins = tf.maximum(1, tf.cast(tf.cast(shape[1], tf.float32) * self.pitch.pick_tensor(draw, clock), tf.int32))
        stretched = _resize(tensor, shape[0], bins)[:, :shape[1]]
        return tf.pad(stretched, [[0, 0], [0, tf.maximum(0, shape[1] - bins)]])


class Tempo(GraphAugmentation):
    """Speeds the spectrogram up by `factor` (resampled along time), never below what the transcript
    needs under CTC; at most `max_time` seconds long when max_time > 0."""
    name = 'tempo'
    PARAMS = {'factor': (float, '1.1'), 'max_time': (float, '-1')}

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        shape = tf.shape(tensor)
        factor = tf.maximum(self.factor.pick_tensor(draw, clock), 1e-3)
        frames = tf.cast(tf.round(tf.cast(shape[0], tf.float32) / factor), tf.int32)
        max_time = self.max_time.pick_tensor(draw, clock)
        frames = tf.where(max_time > 0, tf.minimum(frames, tf.cast(max_time * 1000.0 * units_per_ms, tf.int32)),
                          frames)
        return _resize(tensor, tf.maximum(frames, tf.maximum(min_frames, 1)), shape[1])


def _warp_axis(tensor, axis, count, warp, draw):
    """Piecewise-linear warp of one axis: `count` inner knots each moved by up to `warp` of a segment."""
    size = tf.shape(tensor)[axis]
    last = tf.cast(size - 1, tf.float32)
    count = tf.maximum(count, 0)
    source = tf.linspace(0.0, last, count + 2)
    segment = last / tf.cast(count + 1, tf.float32)
    moves = tf.clip_by_value(warp, 0.0, 0.49) * segment * (2.0 * draw.uniform([count]) - 1.0)
    target = source + tf.pad(moves, [[1, 1]])
    positions = tf.range(size, dtype=tf.float32)
    piece = tf.clip_by_value(tf.searchsorted(target, positions, side='right') - 1, 0, count)
    t0, t1 = tf.gather(target, piece), tf.gather(target, piece + 1)
    s0, s1 = tf.gather(source, piece), tf.gather(source, piece + 1)
    where = tf.clip_by_value(s0 + (positions - t0) * (s1 - s0) / tf.maximum(t1 - t0, 1e-6), 0.0, last)
    low = tf.cast(tf.floor(where), tf.int32)
    high = tf.minimum(low + 1, size - 1)
    fraction = where - tf.floor(where)
    fraction = tf.reshape(fraction, [-1, 1] if axis == 0 else [1, -1])
    return tf.gather(tensor, low, axis=axis) * (1.0 - fraction) + tf.gather(tensor, high, axis=axis) * fraction


class Warp(GraphAugmentation):
    """Non-linear stretch of time and frequency: `nt`/`nf` knots moved by up to `wt`/`wf` of a segment."""
    name = 'warp'
    PARAMS = {'nt': (int, '1'), 'nf': (int, '1'), 'wt': (float, '0.1'), 'wf': (float, '0.0')}

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        tensor = _warp_axis(tensor, 0, self.nt.pick_tensor(draw, clock), self.wt.pick_tensor(draw, clock), draw)
        return _warp_axis(tensor, 1, self.nf.pick_tensor(draw, clock), self.wf.pick_tensor(draw, clock), draw)


def _stripes(length, count, size, draw):
    """A [length] float mask with `count` zeroed stripes of `size` (per stripe) at random places."""
    count = tf.maximum(count, 0)
    size = tf.clip_by_value(size, 1, tf.maximum(length - 1, 1))
    starts = tf.cast(draw.uniform([count]) * tf.cast(length - size + 1, tf.float32), tf.int32)
    positions = tf.range(length)[tf.newaxis, :]
    hit = (positions >= starts[:, tf.newaxis]) & (positions < (starts + size)[:, tf.newaxis])
    return 1.0 - tf.cast(tf.reduce_any(hit, axis=0), tf.float32)


class FrequencyMask(GraphAugmentation):
    """SpecAugment's frequency masks: `n` bands of `size` bins set to zero."""
    name = 'frequency_mask'
    PARAMS = {'n': (int, '3'), 'size': (int, '2')}

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        n = self.n.pick_tensor(draw, clock)
        return tensor * _stripes(tf.shape(tensor)[1], n, self.size.pick_tensor(draw, clock, [n]), draw)[tf.newaxis]


class TimeMask(GraphAugmentation):
    """SpecAugment's time masks: `n` stretches of `size` milliseconds set to zero."""
    name = 'time_mask'
    PARAMS = {'n': (int, '3'), 'size': (float, '10.0')}
    DOMAINS = (SPECTROGRAM, SIGNAL, FEATURES)

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        n = self.n.pick_tensor(draw, clock)
        size = tf.cast(self.size.pick_tensor(draw, clock, [n]) * units_per_ms, tf.int32)
        return tensor * _stripes(tf.shape(tensor)[0], n, size, draw)[:, tf.newaxis]


class Dropout(GraphAugmentation):
    """Sets a `rate` share of the values to zero."""
    name = 'dropout'
    PARAMS = {'rate': (float, '0.05')}
    DOMAINS = (SPECTROGRAM, SIGNAL, FEATURES)

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        return tensor * tf.cast(draw.uniform(tf.shape(tensor)) >= self.rate.pick_tensor(draw, clock), tf.float32)


class Add(GraphAugmentation):
    """Adds Gaussian noise of standard deviation `stddev`."""
    name = 'add'
    PARAMS = {'stddev': (float, '5')}
    DOMAINS = (FEATURES, SPECTROGRAM, SIGNAL)

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        return tensor + draw.normal(tf.shape(tensor)) * self.stddev.pick_tensor(draw, clock)


class Multiply(GraphAugmentation):
    """Multiplies by Gaussian noise of mean 1 and standard deviation `stddev`."""
    name = 'multiply'
    PARAMS = {'stddev': (float, '5')}
    DOMAINS = (FEATURES, SPECTROGRAM, SIGNAL)

    def apply(self, tensor, draw, clock, units_per_ms, min_frames):
        return tensor * (1.0 + draw.normal(tf.shape(tensor)) * self.stddev.pick_tensor(draw, clock))


OPERATIONS = {op.name: op for op in (Overlay, Reverb, Resample, Codec, Volume, Pitch, Tempo, Warp,
                                     FrequencyMask, TimeMask, Dropout, Add, Multiply)}
_SPEC = re.compile(r'^\s*(\w+)\s*(?:\[(.*)\])?\s*$')


def parse_augmentation(spec):
    """One --augment value -> an Augmentation; AugmentationError names the bad part."""
    match = _SPEC.match(spec)
    if not match:
        raise AugmentationError('{!r}: expected NAME or NAME[KEY=VALUE,...], e.g. tempo[p=0.5,factor=1.1~0.1]'
                                .format(spec))
    name, body = match.group(1), match.group(2)
    if name not in OPERATIONS:
        raise AugmentationError('{!r}: unknown augmentation {!r} (known: {})'.format(spec, name, ', '.join(OPERATIONS)))
    values = {}
    for part in (body or '').split(','):
        if not part.strip() and not (body or '').strip():
            continue
        key, equals, value = part.partition('=')
        if not equals or not key.strip() or not value.strip():
            raise AugmentationError('{!r}: {!r} is not KEY=VALUE'.format(spec, part.strip()))
        if key.strip() in values:
            raise AugmentationError('{!r}: {} is given twice'.format(spec, key.strip()))
        values[key.strip()] = value.strip()
    return OPERATIONS[name](spec, values)


def parse_augmentations(specs):
    return [parse_augmentation(spec) for spec in specs or []]


def sample_seed(random_seed, epoch, index):
    """The seed of one sample's augmentations in one epoch (an int64 for the stateless graph ops)."""
    return int(np.random.SeedSequence([random_seed & 0xFFFFFFFF, epoch, index]).generate_state(2, np.uint64)[0]
               >> np.uint64(1))


class Augmenter:
    """The parsed --augment operations of a run, split by where they apply."""

    def __init__(self, augmentations, random_seed, epochs):
        self.samples = [a for a in augmentations if isinstance(a, SampleAugmentation)]
        self.graph = [a for a in augmentations if isinstance(a, GraphAugmentation)]
        self.random_seed, self.epochs, self.first_epoch = random_seed, max(1, epochs), 0

    def clock(self, epoch, fraction):
        """Progress through this run in [0, 1]: the run starts at `first_epoch` (set after loading)."""
        return float(np.clip((epoch - self.first_epoch + fraction) / self.epochs, 0.0, 1.0))

    def augment_audio(self, audio, sample_rate, seed, clock):
        rng = np.random.default_rng(seed)
        for augmentation in self.samples:
            if rng.random() < augmentation.p:
                audio = np.asarray(augmentation.apply(audio, sample_rate, rng, clock), np.float32)
        return audio

    def augment_tensor(self, domain, tensor, seed, clock, units_per_ms, min_frames=0):
        """The graph operations of `domain`, each applied with its probability."""
        for position, augmentation in enumerate(self.graph):
            if augmentation.domain != domain:
                continue
            draw = Draw(seed, position + 1)
            applies = draw.uniform() < augmentation.p
            tensor = tf.cond(applies,
                             lambda a=augmentation, d=draw, t=tensor: a.apply(t, d, clock, units_per_ms, min_frames),
                             lambda t=tensor: t)
        return tensor
