#!/usr/bin/env python3
"""Synthesise a small speech corpus with espeak-ng and sox, as DeepSpeech CSVs.

Tests and smoke runs need real speech with known transcripts, yet this project must not download
data sets at run time. espeak-ng (a Debian package) speaks any text we give it, so we make our own:

  --smoke OUT_DIR       the tiny bundled set (data/smoke_test/): three short utterances spoken by one
                        voice, listed in smoke_test.csv, the first alone in smoke_test_single.csv.
  --out_dir DIR --count N
                        a larger corpus of N utterances: seeded random sentences over a fixed
                        vocabulary, spoken by several voices at varied speeds and pitches, split into
                        train.csv / dev.csv / test.csv by sentence text, so no dev or test sentence is
                        ever a train sentence. Also writes train_sentences.txt and vocabulary.txt.

Audio is 16 kHz mono 16-bit PCM WAV; CSVs have the DeepSpeech header wav_filename,wav_filesize,transcript
with file names relative to the CSV's folder. Corpus wavs are named by a hash of (text, voice, speed,
pitch), so a rerun reuses the wavs already there. The options that made a corpus are kept in its
corpus.json: a rerun with other options into the same DIR stops with an error instead of rewriting the
CSVs of the corpus there (a benchmark's default --utterances once silently shrank an 800-utterance corpus
to 300). Needs: apt-get install espeak-ng sox
"""
import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import wave
from concurrent.futures import ThreadPoolExecutor

from deepspeech_training.data.samples import CSV_COLUMNS

SAMPLE_RATE = 16000
INSTALL_HINT = 'apt-get install espeak-ng sox'
SYNTH_VERSION = 1  # bump when the synthesis command changes, so old wavs are not reused

# 'good morning' first: it is the utterance the overfit test learns exactly (measured: loss 0.24
# after 200 epochs at n_hidden 100, against 1.2 for 'hello world').
SMOKE_SENTENCES = ['good morning', 'hello world', 'the cat sat']
SMOKE_VOICE, SMOKE_SPEED, SMOKE_PITCH = 'en-us', 150, 50

DEFAULT_VOICES = 'en,en-us,en-gb-scotland,en-gb-x-rp,en-029,en-us-nyc,en-us+f3,en+m3'

VOCABULARY = sorted(set("""
    a about after all am an and any are as ask at away back bad be bed big bird black blue boat book
    box boy bring but by call can car cat city cold come cup dark day did do dog don't door down draw
    eat egg eight every eye fast find fish five flower for four friend from fun game get girl give go
    good green hand happy has have he help her here home hot house i i'm in is it it's jump just keep
    kind know late left let light like little long look make man many may me milk more morning my name
    new night nine no not now of old on one open our out over play please put rain read red right run
    said see seven she shoe sing sit six sleep slow small so some stop sun table take ten that the
    they this three time to today tree two under up very walk want warm water way we well what when
    where white who will window with word work yellow yes you your
""".split()))


def check_tools():
    """Exit with an install hint unless espeak-ng and sox are on PATH."""
    missing = [tool for tool in ('espeak-ng', 'sox') if shutil.which(tool) is None]
    if missing:
        sys.exit('error: {} not found; install with: {}'.format(' and '.join(missing), INSTALL_HINT))


def wav_name(text, voice, speed, pitch):
    """A file name that identifies the utterance by its content and synthesis parameters."""
    key = '{}|{}|{}|{}|{}'.format(SYNTH_VERSION, text, voice, speed, pitch)
    return hashlib.sha1(key.encode('utf-8')).hexdigest()[:16] + '.wav'


def wav_seconds(path):
    """Duration of a 16 kHz mono 16-bit WAV, or None if the file is missing or not in that format."""
    try:
        with wave.open(path, 'rb') as wav:
            if (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) != (SAMPLE_RATE, 1, 2):
                return None
            return wav.getnframes() / SAMPLE_RATE if wav.getnframes() > 0 else None
    except (OSError, EOFError, wave.Error):
        return None


def run(command):
    """Run a command; raise RuntimeError carrying its stderr if it fails."""
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as error:
        raise RuntimeError('cannot run {}: {} (install with: {})'.format(command[0], error, INSTALL_HINT))
    if result.returncode != 0:
        raise RuntimeError('{} failed ({}): {}'.format(' '.join(command), result.returncode,
                                                        result.stderr.decode('utf-8', 'replace').strip()))


def synthesise(text, voice, speed, pitch, out_path, reuse=True):
    """Speak text into out_path (16 kHz mono 16-bit, 0.1 s of silence each side); returns
    (seconds, reused). With reuse, a valid wav already at out_path is kept as it is."""
    if reuse:
        seconds = wav_seconds(out_path)
        if seconds is not None:
            return seconds, True
    with tempfile.TemporaryDirectory(prefix='speech_corpus_') as tmp:
        raw, part = os.path.join(tmp, 'espeak.wav'), os.path.join(tmp, 'out.wav')
        run(['espeak-ng', '-v', voice, '-s', str(speed), '-p', str(pitch), '-w', raw, text])
        # -R -D: repeatable and undithered, so the same input always gives the same bytes
        run(['sox', '-R', '-D', raw, '-r', str(SAMPLE_RATE), '-c', '1', '-b', '16', part, 'pad', '0.1', '0.1'])
        seconds = wav_seconds(part)
        if seconds is None:
            raise RuntimeError('sox wrote no usable audio for {!r} (voice {})'.format(text, voice))
        shutil.move(part, out_path)  # whole files only: an interrupted run leaves nothing half-written
    return seconds, False


def write_csv(path, rows):
    """Write a DeepSpeech CSV of (wav_path, transcript) rows, file names relative to the CSV's folder."""
    folder = os.path.dirname(os.path.abspath(path))
    with open(path, 'w', newline='', encoding='utf-8') as csv_file:
        writer = csv.writer(csv_file, lineterminator='\n')
        writer.writerow(CSV_COLUMNS)
        for wav_path, transcript in rows:
            writer.writerow([os.path.relpath(wav_path, folder), os.path.getsize(wav_path), transcript])


def make_smoke(out_dir):
    """The bundled smoke-test set: three utterances, smoke_test.csv and smoke_test_single.csv."""
    os.makedirs(out_dir, exist_ok=True)
    rows, seconds = [], []
    for text in SMOKE_SENTENCES:
        path = os.path.join(out_dir, text.replace(' ', '_') + '.wav')
        seconds.append(synthesise(text, SMOKE_VOICE, SMOKE_SPEED, SMOKE_PITCH, path, reuse=False)[0])
        rows.append((path, text))
    write_csv(os.path.join(out_dir, 'smoke_test.csv'), rows)
    write_csv(os.path.join(out_dir, 'smoke_test_single.csv'), rows[:1])
    print('smoke: {} utterances, {:.2f} s of audio ({}) in {}'.format(
        len(rows), sum(seconds), ', '.join('{:.2f}'.format(s) for s in seconds), out_dir))


def plan_utterances(count, seed, voices):
    """Deterministic (text, voice, speed, pitch) tuples: random 2-7 word sentences, about one in five
    spoken again by another voice, so that splitting by sentence is not the same as by utterance."""
    rng = random.Random(seed)
    plan, seen = [], set()
    while len(plan) < count:
        if plan and rng.random() < 0.2:
            text = rng.choice(plan)[0]
        else:
            text = ' '.join(rng.choice(VOCABULARY) for _ in range(rng.randint(2, 7)))
        utterance = (text, rng.choice(voices), rng.randint(140, 190), rng.randint(30, 70))
        if utterance not in seen:
            seen.add(utterance)
            plan.append(utterance)
    return plan


def split_sentences(sentences, seed, dev_fraction, test_fraction):
    """Assign each unique sentence to 'train', 'dev' or 'test'; a non-zero fraction gets at least one
    sentence, as long as at least one is left for train."""
    unique = sorted(set(sentences))
    random.Random(seed).shuffle(unique)
    n_test = max(1, round(len(unique) * test_fraction)) if test_fraction > 0 else 0
    n_dev = max(1, round(len(unique) * dev_fraction)) if dev_fraction > 0 else 0
    if n_test + n_dev >= len(unique):
        raise ValueError('{} distinct sentences are too few for dev and test splits'.format(len(unique)))
    split = {text: 'test' for text in unique[:n_test]}
    split.update({text: 'dev' for text in unique[n_test:n_test + n_dev]})
    return {text: split.get(text, 'train') for text in unique}


def claim_corpus_dir(out_dir, options):
    """Record the options of the corpus in out_dir/corpus.json; refuse a folder that holds a corpus made with
    other options (its CSVs would be rewritten to another corpus under the user's feet)."""
    os.makedirs(out_dir, exist_ok=True)
    record = os.path.join(out_dir, 'corpus.json')
    if os.path.exists(record):
        with open(record, encoding='utf-8') as record_file:
            existing = json.load(record_file)
        if existing != options:
            raise ValueError('{} holds a corpus made with {}; to reuse it, pass the same options (benchmarks: '
                             '--utterances {}), or give another --out_dir for {}'.format(
                                 out_dir, describe(existing), existing.get('count'), describe(options)))
        return
    with open(record, 'w', encoding='utf-8') as record_file:
        json.dump(options, record_file, indent=1)


def describe(options):
    return ', '.join('{} {}'.format(key, value) for key, value in sorted(options.items()))


def make_corpus(out_dir, count, seed, dev_fraction, test_fraction, voices, jobs):
    """The larger corpus: synthesise in parallel, then write the split CSVs and text files."""
    claim_corpus_dir(out_dir, dict(count=count, seed=seed, dev_fraction=dev_fraction, test_fraction=test_fraction,
                                   voices=','.join(voices)))
    plan = plan_utterances(count, seed, voices)
    split = split_sentences([u[0] for u in plan], seed, dev_fraction, test_fraction)
    paths = [os.path.join(out_dir, wav_name(*u)) for u in plan]
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # the work is in subprocesses: threads suffice
        results = list(pool.map(lambda args: synthesise(*args[0], args[1]), zip(plan, paths)))
    summary = []
    for name in ('train', 'dev', 'test'):
        rows = [(path, u[0]) for u, path in zip(plan, paths) if split[u[0]] == name]
        write_csv(os.path.join(out_dir, name + '.csv'), rows)
        summary.append('{} {} ({} sentences)'.format(name, len(rows), len({text for _, text in rows})))
    with open(os.path.join(out_dir, 'train_sentences.txt'), 'w', encoding='utf-8') as text_file:
        text_file.writelines(u[0] + '\n' for u in plan if split[u[0]] == 'train')
    with open(os.path.join(out_dir, 'vocabulary.txt'), 'w', encoding='utf-8') as text_file:
        text_file.writelines(word + '\n' for word in VOCABULARY)
    print('corpus: {}; {:.1f} s of audio; {} synthesised, {} reused; in {}'.format(
        ', '.join(summary), sum(s for s, _ in results), sum(not r for _, r in results),
        sum(r for _, r in results), out_dir))


def parse_args(argv=None):
    """Command-line options; exactly one of --smoke and --out_dir."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument('--smoke', metavar='OUT_DIR', help='write the small bundled smoke-test set here')
    mode.add_argument('--out_dir', help='write a larger corpus here (with --count)')
    parser.add_argument('--count', type=int, default=100, help='utterances in the corpus')
    parser.add_argument('--seed', type=int, default=0, help='seed for sentences, voices and split')
    parser.add_argument('--dev_fraction', type=float, default=0.1, help='share of sentences for dev.csv')
    parser.add_argument('--test_fraction', type=float, default=0.1, help='share of sentences for test.csv')
    parser.add_argument('--voices', default=DEFAULT_VOICES, help='comma-separated espeak-ng voices')
    parser.add_argument('--jobs', type=int, default=os.cpu_count() or 1, help='parallel synthesis jobs')
    args = parser.parse_args(argv)
    if args.count < 1 or args.jobs < 1:
        parser.error('--count and --jobs must be at least 1')
    return args


def main(argv=None):
    args = parse_args(argv)
    check_tools()
    try:
        if args.smoke:
            make_smoke(args.smoke)
        else:
            voices = [v.strip() for v in args.voices.split(',') if v.strip()]
            make_corpus(args.out_dir, args.count, args.seed, args.dev_fraction, args.test_fraction,
                        voices, args.jobs)
    except (RuntimeError, ValueError) as error:
        sys.exit('error: {}'.format(error))


if __name__ == '__main__':
    main()
