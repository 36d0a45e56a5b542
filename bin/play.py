#!/usr/bin/env python3
"""Play (or write) samples of a CSV, a sample database (.sdb), a tar shard or one audio file, with --augment
operations applied: DeepSpeech 0.9's bin/play.py, with its options, over this project's readers and
augmentations (training/deepspeech_training/data/augmentations.py).

    $PY bin/play.py data/smoke_test/smoke_test.csv --number 1                   # play the first sample
    $PY bin/play.py my/train.sdb --random --augment 'reverb[delay=50,decay=2]'   # random samples, with reverb
    $PY bin/play.py my.wav --augment 'codec[bitrate=4000]' --pipe > codec.wav    # the augmented WAV on stdout

--pipe writes the first sample as a 16-bit PCM WAV file to stdout (no audio device needed). Without it
the samples are played: through the Python package simpleaudio if it is installed (as DeepSpeech), else
through the first of aplay, paplay, ffplay or play (sox) found on PATH; with none of them, or no sound
device, the command says so and exits 1 (use --pipe, e.g. `--pipe > sample.wav`).

Only sample operations (overlay, reverb, resample, codec, volume) change the audio here; graph operations
(pitch, tempo, warp, masks, dropout, add, multiply) work on the training graph's spectrogram or features and
are reported and skipped, as DeepSpeech's play.py did. --clock is where in the run the augmentation's A:B
ranges are taken (0: start, 1: end). Each play draws new random values unless --seed is given.
"""
import argparse
import io
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
from deepspeech_training.entry import quiet_tensorflow  # noqa: E402
quiet_tensorflow('2')     # augmentations.py imports TensorFlow: as the entry points do, without its start-up noise
import numpy as np  # noqa: E402
import soundfile  # noqa: E402
from deepspeech_training.util.alphabet import UTF8Alphabet  # noqa: E402

from deepspeech_training.data import opus, sdb  # noqa: E402
from deepspeech_training.data.audio import AudioError, RecordAudio  # noqa: E402
from deepspeech_training.data.augmentations import (AugmentationError, Augmenter, SampleAugmentation,  # noqa: E402
                                                     parse_augmentations, sample_seed)
from deepspeech_training.data.byte_ranges import DEFAULT_READ_BUFFER  # noqa: E402
from deepspeech_training.data.samples import DataError, read_records  # noqa: E402

PLAYERS = (['aplay', '-q'], ['paplay'], ['play', '-q'], ['ffplay', '-nodisp', '-autoexit', '-loglevel', 'error'])
NO_DEVICE = 'use --pipe to write the sample instead, e.g. bin/play.py SOURCE --pipe > sample.wav'


def sound_device():
    """Whether this machine has a sound card (ALSA) or a PulseAudio / PipeWire server to play on."""
    runtime = os.environ.get('XDG_RUNTIME_DIR', '')
    return bool((os.path.isdir('/dev/snd') and any(name.startswith('pcm') for name in os.listdir('/dev/snd')))
                or os.environ.get('PULSE_SERVER')
                or (runtime and os.path.exists(os.path.join(runtime, 'pulse', 'native'))))


class PlayError(Exception):
    """A problem the user can fix; the message says how."""


def is_audio_file(path):
    """A single audio file (not a CSV, .sdb or tar shard): by extension, as DeepSpeech (.wav, .opus), plus
    whatever libsndfile reads (.flac, .ogg ...)."""
    ext = os.path.splitext(path)[1].lower().lstrip('.')
    return ext in ('wav', 'opus') or ext.upper() in soundfile.available_formats()


def collection(source):
    """(records, labeled): the source's sample records, with transcripts if it has them."""
    if is_audio_file(source):
        if not os.path.isfile(source):
            raise PlayError('{}: no such audio file'.format(source))
        return [source], False
    if not os.path.exists(source):
        raise PlayError('{}: no such file (expected a CSV, a .sdb, a .tar shard or an audio file)'.format(source))
    try:
        return read_records([source], UTF8Alphabet()), True     # any transcript is printable
    except DataError:
        pass
    try:
        return read_records([source], None), False               # unlabeled, or empty transcripts
    except DataError as error:
        raise PlayError(str(error)) from None


def decode(data, audio_type=sdb.WAV):
    """(mono float32 samples, rate) of audio bytes: a file's (WAV, FLAC, Ogg ...), or a .sdb's Opus framing."""
    if audio_type != sdb.OPUS:
        try:
            audio, rate = soundfile.read(io.BytesIO(data), dtype='float32', always_2d=True)
        except (RuntimeError, soundfile.LibsndfileError) as error:
            raise AudioError('cannot decode audio: {}'.format(error)) from None
    else:
        try:
            pcm, rate, channels = opus.decode(data)
        except opus.OpusError as error:
            raise AudioError('cannot decode Opus audio: {}'.format(error)) from None
        audio = np.frombuffer(pcm, '<i2').reshape(-1, channels).astype(np.float32) / 32768.0
    if audio.shape[1] != 1:
        raise AudioError('{} channels: training and --augment take mono audio (convert with: sox in.wav -c 1 '
                         'out.wav)'.format(audio.shape[1]))
    return np.ascontiguousarray(audio[:, 0]), rate


def load(record, reader):
    """(sample id, transcript or None, mono float32 audio, rate) of a record (or an audio file's path)."""
    if isinstance(record, str):
        with open(record, 'rb') as audio_file:
            return (record, None) + decode(audio_file.read())
    return (record.audio_name, record.transcript) + decode(*reversed(reader.raw(record)))


def play_order(records, args):
    """Indices into `records` in play order (--start, --number, --random), as DeepSpeech's play.py."""
    played, index = 0, args.start
    if not args.random and not -len(records) <= index < len(records):
        raise PlayError('No sample with index {} ({} sample(s))'.format(args.start, len(records)))
    index %= len(records)
    while not 0 <= args.number <= played:
        if args.random:
            yield random.randint(0, len(records) - 1)
        else:
            yield index
            index = (index + 1) % len(records)
        played += 1


def wav_bytes(audio, rate):
    out = io.BytesIO()
    soundfile.write(out, np.clip(audio, -1.0, 1.0), rate, format='WAV', subtype='PCM_16')
    return out.getvalue()


def player():
    """A function that plays WAV bytes, or PlayError saying what to install."""
    if not sound_device():
        raise PlayError('no sound device to play on (no ALSA card in /dev/snd, no PulseAudio server); ' + NO_DEVICE)
    try:
        import simpleaudio
    except ImportError:
        simpleaudio = None
    if simpleaudio is not None:
        def play_simpleaudio(wav):
            with soundfile.SoundFile(io.BytesIO(wav)) as sound:
                pcm = sound.read(dtype='int16').tobytes()
            simpleaudio.play_buffer(pcm, 1, 2, sound.samplerate).wait_done()
        return play_simpleaudio
    for command in PLAYERS:
        if shutil.which(command[0]):
            def play_command(wav, command=command):
                with tempfile.NamedTemporaryFile(suffix='.wav') as temporary:
                    temporary.write(wav)
                    temporary.flush()
                    if subprocess.run(command + [temporary.name]).returncode != 0:
                        raise PlayError('{} could not play the sample; {}'.format(command[0], NO_DEVICE))
            return play_command
    raise PlayError('no audio player: install the Python package simpleaudio (pip install simpleaudio, as '
                    'DeepSpeech) or one of aplay (alsa-utils), paplay, sox, ffplay; or ' + NO_DEVICE)


def play_collection(args):
    augmentations = parse_augmentations(args.augment)
    if any(not isinstance(a, SampleAugmentation) for a in augmentations):
        print('Warning: Some of the augmentations cannot be simulated by this command: {} (they work on the '
              'training graph\'s spectrogram or features)'.format(
                  ', '.join(a.spec for a in augmentations if not isinstance(a, SampleAugmentation))),
              file=sys.stderr)
    augmenter = Augmenter(augmentations, random_seed=0, epochs=1)
    seed = args.seed if args.seed is not None else random.getrandbits(31)
    records, labeled = collection(args.source)
    if not records:
        raise PlayError('{}: no samples'.format(args.source))
    play = None if args.pipe else player()
    reader = RecordAudio(DEFAULT_READ_BUFFER)
    try:
        for played, index in enumerate(play_order(records, args)):
            sample_id, transcript, audio, rate = load(records[index], reader)
            for augmentation in augmenter.samples:
                augmentation.check_sample_rate(rate)
            audio = augmenter.augment_audio(audio, rate, sample_seed(seed, played, index), args.clock)
            if not args.quiet:
                print('Sample "{}"'.format(sample_id), file=sys.stderr)
                if labeled:
                    print('  "{}"'.format(transcript), file=sys.stderr)
            wav = wav_bytes(audio, rate)
            if args.pipe:
                sys.stdout.buffer.write(wav)
                sys.stdout.buffer.flush()
                return
            play(wav)
    finally:
        reader.close()


def handle_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Tool for playing (and augmenting) single samples or samples from Sample Databases (SDB files) '
                    'and DeepSpeech CSV files')
    parser.add_argument('source', help='Sample DB, CSV or WAV file to play samples from')
    parser.add_argument('--start', type=int, default=0,
                        help='Sample index to start at (negative numbers are relative to the end of the collection)')
    parser.add_argument('--number', type=int, default=-1, help='Number of samples to play (-1 for endless)')
    parser.add_argument('--random', action='store_true', help='If samples should be played in random order')
    parser.add_argument('--augment', action='append', help='Add an augmentation operation (as training\'s --augment)')
    parser.add_argument('--clock', type=float, default=0.5,
                        help='Simulates clock value used for augmentations during training. Ranges from 0.0 '
                             '(representing parameter start values) to 1.0 (representing parameter end values)')
    parser.add_argument('--pipe', action='store_true',
                        help='Pipe first sample as wav file to stdout. Forces --number to 1.')
    parser.add_argument('--quiet', action='store_true', help='No info logging to console')
    parser.add_argument('--seed', type=int, default=None,
                        help='Seed of the augmentations\' random choices (default: new ones on every run)')
    args = parser.parse_args(argv)
    if not 0.0 <= args.clock <= 1.0:
        parser.error('--clock must be between 0.0 and 1.0')
    return args


def main(argv=None):
    args = handle_args(argv)
    try:
        play_collection(args)
    except (PlayError, AugmentationError, AudioError, OSError) as error:
        print('Error: {}'.format(error), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(' Stopped', file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
