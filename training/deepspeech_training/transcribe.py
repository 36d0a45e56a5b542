"""Transcribe WAV files with a trained checkpoint (and optionally a scorer), as DeepSpeech 0.9's
transcribe.py: long audio is split on silence, each piece decoded, the pieces joined.

    deepspeech-transcribe --src talk.wav[,other.wav] --checkpoint_dir ... [--scorer_path kenlm.scorer]
    (in a checkout: python transcribe.py ...)

Prints one line per file and writes its transcription log beside it, named as DeepSpeech did (talk.wav ->
talk.tlog): JSON pieces with start/end seconds and transcript. A file at another sample rate than the
model's is resampled, with DeepSpeech's client's warning."""
import json
import os
import tempfile
from dataclasses import dataclass

import librosa
import soundfile
from absl import app, flags

from .config import from_flags, settings_from_flags
from .data.audio import read_audio
from .decoding import make_decoder
from .evaluate import transcribe
from .flags import split_files
from .util.logging import configure, log_warn


def pieces(audio, sample_rate, max_seconds, top_db):
    """(start, end) sample ranges covering all the audio, each at most `max_seconds` where the
    audio allows: split at the longest silent gap first (librosa's energy split), cutting in its
    middle, so pieces end between sentences before they end between words, and keep the silence
    around their speech that the model was trained with."""
    speech = librosa.effects.split(audio, top_db=top_db)
    gaps = [(next_start - end, (end + next_start) // 2) for (_, end), (next_start, _) in zip(speech, speech[1:])]
    limit = int(max_seconds * sample_rate)

    def split(start, end):
        inside = [gap for gap in gaps if start < gap[1] < end]
        if end - start <= limit or not inside:
            return [(start, end)]
        cut = max(inside)[1]
        return split(start, cut) + split(cut, end)
    return split(0, len(audio))


def tlog_path(wav):
    """Where the transcription log of `wav` goes: DeepSpeech 0.9's transcribe.py, the extension replaced."""
    return os.path.splitext(wav)[0] + '.tlog'


def read_resampled(wav, rate, normalize_sample_rate):
    """read_audio(), warning as DeepSpeech's client did when the file's rate is not the model's."""
    try:
        file_rate = soundfile.info(wav).samplerate
    except (RuntimeError, soundfile.LibsndfileError):
        file_rate = rate                            # read_audio() says what is wrong with the file
    if file_rate != rate and normalize_sample_rate:
        log_warn('{}: original sample rate ({}) is different than {}hz. Resampling might produce erratic speech '
                 'recognition.'.format(wav, file_rate, rate))
    return read_audio(wav, rate, normalize_sample_rate)


@dataclass
class TranscribeSettings:
    """The tool's own flags (define_flags())."""
    src: str
    max_piece_seconds: float
    silence_top_db: float


def transcribe_files(_):
    options = from_flags(TranscribeSettings)
    if not options.src:
        raise app.UsageError('give --src: WAV file(s), comma-separated')
    configure(show_progressbar=False)
    settings = settings_from_flags()
    decoder = make_decoder(settings)
    rate = settings.model.sample_rate
    with tempfile.TemporaryDirectory() as scratch:
        jobs = []
        for wav in split_files(options.src):
            audio = read_resampled(wav, rate, settings.model.normalize_sample_rate)
            for number, (start, end) in enumerate(pieces(audio, rate, options.max_piece_seconds, options.silence_top_db)):
                path = os.path.join(scratch, '{}-{}.wav'.format(len(jobs), number))
                soundfile.write(path, audio[start:end], rate, subtype='PCM_16')
                jobs.append((wav, start / rate, end / rate, path))
        texts = transcribe(settings, [job[3] for job in jobs], decoder)
    for wav in split_files(options.src):
        log = [{'start': start, 'end': end, 'transcript': text}
               for (source, start, end, _), text in zip(jobs, texts) if source == wav]
        with open(tlog_path(wav), 'w') as out:
            json.dump(log, out, indent=2)
        print('{}: {}'.format(wav, ' '.join(piece['transcript'] for piece in log if piece['transcript'])))


def define_flags():
    flags.DEFINE_string('src', '', 'WAV file(s) to transcribe, comma-separated')
    flags.DEFINE_float('max_piece_seconds', 15.0, 'longest piece of audio decoded at once')
    flags.DEFINE_float('silence_top_db', 30.0, 'audio this many dB below the peak counts as silence')
