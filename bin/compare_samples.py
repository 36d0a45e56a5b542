#!/usr/bin/env python3
"""Compare two audio samples: DeepSpeech 0.9's bin/compare_samples.py, with its options and messages.

    $PY bin/compare_samples.py a.wav b.wav                 # exit 0 if equal (difference at most --threshold dB)
    $PY bin/compare_samples.py --if-differ a.wav b.wav     # exit 0 if the content differs (an augmentation worked)

Either way the two must have the same format (sample rate, channels, sample width) and durations within
1 ms, else the exit status is 1 with the difference named. The content is compared as DeepSpeech does: the
mean level (RMS, dBFS; full-scale sine = 3.0103) of the sample-wise difference, above --threshold (-60 dB)
is different. Reads WAV and what else libsndfile reads (FLAC, Ogg/Opus ...); needs no TensorFlow.
"""
import argparse
import math
import sys

import numpy as np
import soundfile

DURATION_TOLERANCE = 0.001     # seconds, as DeepSpeech
WIDTHS = {'PCM_S8': 1, 'PCM_U8': 1, 'PCM_16': 2, 'PCM_24': 3, 'PCM_32': 4, 'FLOAT': 4, 'DOUBLE': 8}


class AudioFormat:
    def __init__(self, rate, channels, width):
        self.rate, self.channels, self.width = rate, channels, width

    def __eq__(self, other):
        return (self.rate, self.channels, self.width) == (other.rate, other.channels, other.width)

    def __str__(self):
        return 'AudioFormat({}, {}, {})'.format(self.rate, self.channels, self.width)


def fail(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def load_sample(path):
    """(AudioFormat, duration in s, float64 samples [frames, channels] in [-1, 1]) of an audio file."""
    try:
        with soundfile.SoundFile(path) as sound:
            audio_format = AudioFormat(sound.samplerate, sound.channels, WIDTHS.get(sound.subtype, 2))
            audio = sound.read(dtype='float64', always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError, OSError) as error:
        fail('Cannot read sample {}: {}'.format(path, error))
    return audio_format, len(audio) / audio_format.rate, audio


def mean_dbfs(audio):
    rms = math.sqrt(np.mean(np.square(audio))) if audio.size else 0.0
    return 20.0 * math.log10(max(1e-16, rms)) + 3.0103


def compare_samples(args):
    format1, duration1, audio1 = load_sample(args.sample1)
    format2, duration2, audio2 = load_sample(args.sample2)
    if format1 != format2:
        fail('Samples differ on: audio-format ({} and {})'.format(format1, format2))
    if abs(duration1 - duration2) > DURATION_TOLERANCE:
        fail('Samples differ on: duration ({} and {})'.format(duration1, duration2))
    length = min(len(audio1), len(audio2))
    diff_dbfs = mean_dbfs(audio1[:length] - audio2[:length])
    differ_msg = 'Samples differ on: sample data ({:0.2f} dB difference) '.format(diff_dbfs)
    equal_msg = 'Samples are considered equal ({:0.2f} dB difference)'.format(diff_dbfs)
    if args.if_differ:
        if diff_dbfs <= args.threshold:
            fail(equal_msg)
        if not args.no_success_output:
            print(differ_msg, file=sys.stderr, flush=True)
    else:
        if diff_dbfs > args.threshold:
            fail(differ_msg)
        if not args.no_success_output:
            print(equal_msg, file=sys.stderr, flush=True)


def handle_args(argv=None):
    parser = argparse.ArgumentParser(description='Tool for checking similarity of two samples')
    parser.add_argument('sample1', help='Filename of sample 1 to compare')
    parser.add_argument('sample2', help='Filename of sample 2 to compare')
    parser.add_argument('--threshold', type=float, default=-60.0,
                        help='dB of sample deltas above which they are considered different')
    parser.add_argument('--if-differ', action='store_true',
                        help='If to succeed and return status code 0 on different signals and fail on equal ones '
                             '(inverse check). This will still fail on different formats or durations.')
    parser.add_argument('--no-success-output', action='store_true',
                        help='Stay silent on success (if samples are equal of - with --if-differ - samples are not '
                             'equal)')
    return parser.parse_args(argv)


if __name__ == '__main__':
    compare_samples(handle_args())
