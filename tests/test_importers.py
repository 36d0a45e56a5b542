"""The importers in bin/ (Common Voice, LibriSpeech, a folder, TED-LIUM, TIMIT, VCTK, M-AILABS, TUDA-De,
VoxForge) on small corpora laid out like the real ones, with real speech (espeak-ng, encoded by ffmpeg, or
sox for NIST SPHERE), and the shared transcript normalisation."""
import csv
import os
import re
import shutil
import subprocess
import sys
import tarfile
import wave
from concurrent.futures import ThreadPoolExecutor

import pytest
import soundfile
from tests.helpers.suite import ALPHABET, ROOT
from deepspeech_training.data.importers import normalize_transcript
from deepspeech_training.data.samples import read_records
from deepspeech_training.util.text import load_alphabet

needs_tools = pytest.mark.skipif(shutil.which('espeak-ng') is None or shutil.which('ffmpeg') is None,
                                 reason='needs espeak-ng and ffmpeg (apt-get install espeak-ng ffmpeg)')

LONG_TEXT = ('this sentence goes on and on for much longer than any clip should last so that the importer '
             'has to drop it because it is over the limit of seconds that was set for the samples of this small '
             'test corpus which was made for the tests')


def speak(jobs):
    """Write each (path, text, ffmpeg options) as real speech; ffmpeg picks the codec from the name."""
    def one(job):
        path, text, options = job
        os.makedirs(os.path.dirname(path), exist_ok=True)
        raw = path + '.espeak.wav'
        subprocess.run(['espeak-ng', '-s', '160', '-w', raw, text], check=True)
        subprocess.run(['ffmpeg', '-loglevel', 'error', '-y', '-i', raw] + options + [path], check=True)
        os.remove(raw)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, jobs))


def run_importer(script, *args, check=True):
    """Run an importer as a user would; returns (exit status, stdout and stderr)."""
    command = [sys.executable, os.path.join(ROOT, 'bin', script), '--jobs', '2'] + [str(a) for a in args]
    process = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True, timeout=120)
    if check:
        assert process.returncode == 0, process.stdout
    return process.returncode, process.stdout


def drop_counts(output, title):
    """{reason: count} from the report section headed by `title` (a CSV path, or the source folder)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('{}: '.format(title)))
    counts = {}
    for line in lines[start + 1:]:
        if not line.startswith('  '):
            break
        match = re.match(r'  (\d+) dropped: (.+), e\.g\.$', line)
        if match:
            counts[match.group(2)] = int(match.group(1))
    return counts


def conversions(output):
    """(converted, skipped, unreadable) from an importer's audio line."""
    match = re.search(r'audio: (\d+) converted, (\d+) already converted \(skipped\), (\d+) unreadable', output)
    return tuple(int(n) for n in match.groups())


def csv_rows(path, alphabet=ALPHABET):
    """[(wav_filename, transcript)] of a CSV, after checking that the trainer accepts it and that every
    wav is 16 kHz mono 16-bit with the listed size."""
    with open(path, newline='', encoding='utf-8') as csv_file:
        reader = csv.DictReader(csv_file)
        assert reader.fieldnames == ['wav_filename', 'wav_filesize', 'transcript']
        rows = list(reader)
    assert len(read_records([path], load_alphabet(alphabet))) == len(rows)
    for row in rows:
        wav_path = os.path.join(os.path.dirname(path), row['wav_filename'])
        assert int(row['wav_filesize']) == os.path.getsize(wav_path)
        with wave.open(wav_path, 'rb') as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (16000, 1, 2)
            assert wav.getnframes() > 8000, '{} is shorter than half a second'.format(wav_path)
    return [(row['wav_filename'], row['transcript']) for row in rows]


def snapshot(folder):
    """{path: (mtime, bytes)} of every wav and {path: bytes} of every CSV under folder, to show that a
    rerun converts nothing (CSVs are rewritten, with the same content)."""
    files = {}
    for parent, _, names in os.walk(str(folder)):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, 'rb') as data:
                if name.endswith('.wav'):
                    files[path] = (os.stat(path).st_mtime_ns, data.read())
                elif name.endswith('.csv'):
                    files[path] = data.read()
    return files


def wavs(files):
    """The wav entries of a snapshot."""
    return {path: data for path, data in files.items() if path.endswith('.wav')}


def write_tsv(path, rows):
    """A Common Voice TSV (unquoted, tab-separated) of (clip, sentence, up_votes, down_votes) rows."""
    lines = ['client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccent\n']
    lines += ['speaker{}\t{}\t{}\t{}\t{}\t\t\t\n'.format(i, *row) for i, row in enumerate(rows)]
    path.write_text(''.join(lines), encoding='utf-8')


@needs_tools
def test_common_voice(tmp_path):
    clips = tmp_path / 'en' / 'clips'
    mp3 = ['-ar', '48000']  # Common Voice clips are 48 kHz mp3
    spoken = {'c1': 'hello world', 'c2': 'cafe au lait sil vous plait', 'c3': 'i have three cats', 'c4': LONG_TEXT,
              'c5': 'good morning', 'c6': 'good night', 'c7': 'the cat sat', 'c8': 'where is the dog', 'c9': 'yes',
              'c11': 'huh'}  # no c10.mp3: its row must be dropped as unreadable
    speak([(str(clips / (name + '.mp3')), text, mp3) for name, text in spoken.items()])
    train = [('c1.mp3', 'Hello, World!', 2, 0), ('c2.mp3', 'Café au lait, s’il vous plaît.', 3, 1),
             ('c3.mp3', 'I have 3 cats.', 2, 0), ('c4.mp3', LONG_TEXT, 2, 0), ('c5.mp3', 'good morning', 1, 0),
             ('c9', 'a sentence far too long to have been spoken in this short clip', 2, 0)]
    dev = [('c6.mp3', 'Good night.', 2, 2), ('c7.mp3', 'The "cat" sat.', 2, 0)]
    test = [('c8.mp3', 'Where is the dog?', 4, 0), ('c10.mp3', 'Hello again', 2, 0), ('c11.mp3', '?!', 2, 0)]
    validated = train[:3] + dev[1:] + test[:1]
    for name, rows in (('train', train), ('dev', dev), ('test', test), ('validated', validated)):
        write_tsv(tmp_path / 'en' / (name + '.tsv'), rows)

    _, output = run_importer('import_cv.py', tmp_path / 'en', '--filter_alphabet', ALPHABET)
    assert conversions(output) == (6, 0, 1)
    assert csv_rows(str(clips / 'train.csv')) == [('c1.wav', 'hello world'),
                                                  ('c2.wav', "cafe au lait s'il vous plait")]
    assert csv_rows(str(clips / 'dev.csv')) == [('c7.wav', 'the cat sat')]
    assert csv_rows(str(clips / 'test.csv')) == [('c8.wav', 'where is the dog')]
    assert [wav for wav, _ in csv_rows(str(clips / 'validated.csv'))] == ['c1.wav', 'c2.wav', 'c7.wav', 'c8.wav']
    assert drop_counts(output, clips / 'train.csv') == {
        'characters not in the alphabet': 1, 'too long': 1, 'too few votes': 1, 'too short for its transcript': 1}
    assert drop_counts(output, clips / 'dev.csv') == {'too few votes': 1}
    assert drop_counts(output, clips / 'test.csv') == {'audio unreadable': 1, 'empty transcript': 1}
    assert drop_counts(output, clips / 'validated.csv') == {'characters not in the alphabet': 1}
    assert "train.tsv line 4 (c3.mp3): '3' in 'i have 3 cats'" in output
    assert 'c10.mp3: file not found' in output

    before = snapshot(tmp_path)
    (clips / 'c1.mp3').unlink()  # deleting converted clips to save space must not lose them
    _, output = run_importer('import_cv.py', tmp_path / 'en', '--filter_alphabet', ALPHABET)
    assert conversions(output) == (0, 6, 1)
    assert snapshot(tmp_path) == before


def test_common_voice_without_tsvs_says_what_to_give(tmp_path):
    (tmp_path / 'clips').mkdir()
    status, output = run_importer('import_cv.py', tmp_path, check=False)
    assert status == 1
    assert 'none of train.tsv, dev.tsv, test.tsv, validated.tsv found in {}'.format(tmp_path) in output


@needs_tools
def test_librispeech(tmp_path):
    flac = ['-ar', '16000']  # LibriSpeech is 16 kHz FLAC
    chapters = {('train-clean-100', '19', '198'): [('0000', 'HELLO WORLD', 'hello world'),
                                                  ('0001', "IT'S A NAÏVE CAFÉ", 'its a naive cafe'),
                                                  ('0002', 'CHAPTER 3', 'chapter three'),
                                                  ('0003', 'GOOD MORNING', None)],  # its flac is missing
                ('train-clean-100', '26', '495'): [('0000', 'THE CAT SAT', 'the cat sat')],
                ('dev-clean', '84', '121123'): [('0000', 'WHERE IS THE DOG', 'where is the dog'),
                                                ('0001', LONG_TEXT.upper(), LONG_TEXT)]}
    jobs = []
    for (subset, speaker, chapter), utterances in chapters.items():
        folder = tmp_path / 'LibriSpeech' / subset / speaker / chapter
        folder.mkdir(parents=True)
        prefix = '{}-{}-'.format(speaker, chapter)
        (folder / '{}-{}.trans.txt'.format(speaker, chapter)).write_text(
            ''.join('{}{} {}\n'.format(prefix, number, text) for number, text, _ in utterances), encoding='utf-8')
        jobs += [(str(folder / (prefix + number + '.flac')), spoken, flac)
                 for number, _, spoken in utterances if spoken]
    speak(jobs)
    root = tmp_path / 'LibriSpeech'

    _, output = run_importer('import_librispeech.py', root, '--max_duration', 5)
    assert conversions(output) == (5, 0, 1)
    assert csv_rows(str(root / 'librivox-train-clean-100.csv')) == [
        ('train-clean-100-wav/19-198-0000.wav', 'hello world'),
        ('train-clean-100-wav/19-198-0001.wav', "it's a naive cafe"),
        ('train-clean-100-wav/26-495-0000.wav', 'the cat sat')]
    assert csv_rows(str(root / 'librivox-dev-clean.csv')) == [
        ('dev-clean-wav/84-121123-0000.wav', 'where is the dog')]
    assert drop_counts(output, root / 'librivox-train-clean-100.csv') == {
        'characters not in the alphabet': 1, 'audio unreadable': 1}
    assert drop_counts(output, root / 'librivox-dev-clean.csv') == {'too long': 1}

    before = snapshot(root)
    _, output = run_importer('import_librispeech.py', root, '--max_duration', 5)
    assert conversions(output) == (0, 5, 1)
    assert snapshot(root) == before

    status, output = run_importer('import_librispeech.py', root, '--subsets', 'test-clean', check=False)
    assert status == 1 and 'test-clean not found in {}; it has: dev-clean, train-clean-100'.format(root) in output


@needs_tools
def test_folder(tmp_path):
    src = tmp_path / 'src'
    speak([(str(src / 'a' / 'one.wav'), 'one small step', []),  # espeak-ng's own 22.05 kHz
           (str(src / 'a' / 'two.flac'), 'two ways', ['-ar', '44100']),
           (str(src / 'b' / 'three.mp3'), 'three little birds', ['-ar', '44100', '-ac', '2']),
           (str(src / 'b' / 'four.ogg'), 'four seasons', ['-ar', '48000']),
           (str(src / 'b' / 'six.mp3'), 'call nine one one', []),
           (str(src / 'c' / 'seven.flac'), LONG_TEXT, [])])
    transcripts = {'a/one': 'One small step.', 'a/two': 'Two—ways', 'b/three': 'Three little birds\n',
                   'b/four': 'Four seasons', 'b/four_again': 'four seasons', 'b/six': 'Call 911',
                   'c/seven': LONG_TEXT, 'c/eight': 'eight'}
    for stem, text in transcripts.items():
        (src / (stem + '.txt')).write_text(text, encoding='utf-8')
    shutil.copy(str(src / 'b' / 'four.ogg'), str(src / 'b' / 'four_again.ogg'))  # the same sentence again
    shutil.copy(str(src / 'a' / 'one.wav'), str(src / 'b' / 'five.wav'))  # no five.txt
    shutil.copy(str(src / 'a' / 'one.wav'), str(src / 'c' / 'eight.wav'))  # eight.wav and eight.mp3
    shutil.copy(str(src / 'b' / 'six.mp3'), str(src / 'c' / 'eight.mp3'))
    shutil.copy(str(src / 'a' / 'one.wav'), str(src / 'c' / 'nine.wav'))
    (src / 'c' / 'nine.txt').write_bytes('café'.encode('latin-1'))
    (src / 'notes.txt').write_text('not a transcript: no audio file has this name', encoding='utf-8')
    out = src / 'wav16k'  # inside the source tree: a rerun must not import its own output

    _, output = run_importer('import_folder.py', src, out, '--max_duration', 5)
    assert conversions(output) == (6, 0, 0)
    rows = csv_rows(str(out / 'all.csv'))
    assert rows == [('a/one.wav', 'one small step'), ('a/two.wav', 'two ways'), ('b/four.wav', 'four seasons'),
                    ('b/four_again.wav', 'four seasons'), ('b/three.wav', 'three little birds')]
    assert drop_counts(output, out / 'all.csv') == {
        'several audio files for one transcript': 2, 'no transcript file': 1, 'transcript file not UTF-8': 1,
        'characters not in the alphabet': 1, 'too long': 1}
    for stem, source in (('a/one', 'a/one.wav'), ('b/three', 'b/three.mp3'), ('b/four', 'b/four.ogg')):
        assert soundfile.info(str(out / (stem + '.wav'))).duration == pytest.approx(
            soundfile.info(str(src / source)).duration, abs=0.05)

    before = snapshot(out)
    _, output = run_importer('import_folder.py', src, out, '--max_duration', 5,
                             '--dev_fraction', 0.25, '--test_fraction', 0.25, '--seed', 1)
    assert conversions(output) == (0, 6, 0)
    assert drop_counts(output, src)['no transcript file'] == 1
    assert wavs(snapshot(out)) == wavs(before)
    splits = {name: csv_rows(str(out / (name + '.csv'))) for name in ('train', 'dev', 'test')}
    assert sorted(sum(splits.values(), [])) == sorted(rows)
    sentences = {name: {text for _, text in split} for name, split in splits.items()}
    assert [len(sentences[name]) for name in ('train', 'dev', 'test')] == [2, 1, 1]
    assert not (sentences['train'] & sentences['dev'] or sentences['train'] & sentences['test']
                or sentences['dev'] & sentences['test'])  # both 'four seasons' landed in one split


def test_normalisation_touches_only_what_the_alphabet_lacks(tmp_path):
    english = load_alphabet(ALPHABET)
    assert normalize_transcript(english, '  «Ça va», dit-il — d’accord?\n') == "ca va dit il d'accord"
    assert normalize_transcript(english, 'ﬁne_tuning') == 'fine tuning'
    assert normalize_transcript(english, 'Tom & Jerry: 100%') == 'tom & jerry 100%'  # spoken: left to be dropped
    cased = tmp_path / 'cased.txt'
    cased.write_text(''.join(c + '\n' for c in ' abcdeéfghijklmnopqrstuvwxyzABCDEÉ'), encoding='utf-8')
    assert normalize_transcript(load_alphabet(str(cased)), 'Été, Ève!') == 'Été Eve'


def sox(*args):
    subprocess.run(['sox'] + [str(a) for a in args], check=True)


def check_rerun_and_wrong_folder(script, folder, converted, wrong_folder, message, *args):
    """A rerun of `script` on `folder` reuses all `converted` WAVs and rewrites the CSVs unchanged; run on
    `wrong_folder` (with the same `args`), it fails with one error line containing `message` (the download
    URL, the fix)."""
    before = snapshot(folder)
    _, output = run_importer(script, folder, *args)
    assert conversions(output) == (0, converted, 0) and snapshot(folder) == before
    status, output = run_importer(script, wrong_folder, *args, check=False)
    assert status == 1 and message in output, output


def make_tgz(archive, folder, arcname):
    """A .tgz of `folder`, named `arcname` in it."""
    with tarfile.open(str(archive), 'w:gz') as tar:
        tar.add(str(folder), arcname=arcname)


needs_sox = pytest.mark.skipif(shutil.which('sox') is None, reason='needs sox (apt-get install sox)')


@needs_tools
@needs_sox
def test_ted(tmp_path):
    """TED-LIUM release 2: whole talks as 16 kHz .sph, cut into segments by the .stm times."""
    release = tmp_path / 'TEDLIUM_release2'
    parts = {'train': [('AlGore_2006', ['hello world', 'it is a nice day', 'good morning', 'the cat sat'])],
             'dev': [('BillGates_2010', ['where is the dog'])], 'test': []}
    jobs = [(str(tmp_path / 'parts' / '{}-{}.wav'.format(talk, i)), text, ['-ar', '16000'])
            for talks in parts.values() for talk, texts in talks for i, text in enumerate(texts)]
    speak(jobs)
    transcripts = {'hello world': 'hello world', 'it is a nice day': "it 's a nice day",
                   'good morning': 'ignore_time_segment_in_scoring', 'the cat sat': 'the <unk> sat',
                   'where is the dog': 'where is the dog'}
    for name, talks in parts.items():
        (release / name / 'stm').mkdir(parents=True)
        (release / name / 'sph').mkdir(parents=True)
        for talk, texts in talks:
            pieces = [tmp_path / 'parts' / '{}-{}.wav'.format(talk, i) for i in range(len(texts))]
            sox(*pieces, release / name / 'sph' / (talk + '.sph'))
            lines, start = [], 0.0
            for piece, text in zip(pieces, texts):
                end = start + soundfile.info(str(piece)).duration
                lines.append('{} 1 {} {:.2f} {:.2f} <o,f0,male> {}\n'.format(talk, talk, start, end, transcripts[text]))
                start = end
            (release / name / 'stm' / (talk + '.stm')).write_text(''.join(lines), encoding='utf-8')

    _, output = run_importer('import_ted.py', tmp_path)
    assert conversions(output) == (3, 0, 0)
    train = csv_rows(str(tmp_path / 'ted-train.csv'))
    assert [text for _, text in train] == ['hello world', "it's a nice day"]
    assert re.fullmatch(r'TEDLIUM_release2/train/wav/AlGore_2006-0\.00-\d+\.\d\d\.wav', train[0][0])
    assert soundfile.info(str(tmp_path / train[0][0])).duration == pytest.approx(
        soundfile.info(str(tmp_path / 'parts' / 'AlGore_2006-0.wav')).duration, abs=0.02)
    dev = csv_rows(str(tmp_path / 'ted-dev.csv'))
    assert len(dev) == 1 and dev[0][0].startswith('TEDLIUM_release2/dev/wav/BillGates_2010-0.00-')
    assert dev[0][1] == 'where is the dog'
    assert csv_rows(str(tmp_path / 'ted-test.csv')) == []
    assert drop_counts(output, tmp_path / 'ted-train.csv') == {'unknown word <unk>': 1}
    assert os.path.isfile(str(release / 'train' / 'sph' / 'AlGore_2006.sph'))

    check_rerun_and_wrong_folder('import_ted.py', tmp_path, 3, tmp_path / 'parts',
                                 'download http://www.openslr.org/resources/19/TEDLIUM_release2.tar.gz')


@needs_tools
@needs_sox
def test_timit(tmp_path):
    """TIMIT: NIST SPHERE .WAV files with .TXT transcripts giving sample ranges; SA sentences left out."""
    timit = tmp_path / 'TIMIT'
    sentences = {'TRAIN/DR1/FCJF0/SI1027': 'She had your dark suit in greasy wash water all year.',
                 'TRAIN/DR1/FCJF0/SA1': 'Don\'t ask me to carry an oily rag like that.',
                 'TRAIN/DR2/MKLS0/SX127': 'Cats, dogs; and birds!',
                 'TEST/DR1/MDAB0/SX49': 'Where is the dog?', 'TEST/DR1/MDAB0/SX50': None}
    speak([(str(tmp_path / 'raw' / (stem + '.wav')), text or 'no transcript', ['-ar', '16000'])
           for stem, text in sentences.items()])
    for stem, text in sentences.items():
        (timit / stem).parent.mkdir(parents=True, exist_ok=True)
        sox(tmp_path / 'raw' / (stem + '.wav'), '-t', 'sph', timit / (stem + '.WAV'))
        if text:
            (timit / (stem + '.TXT')).write_text('0 46797 {}\n'.format(text), encoding='latin-1')

    _, output = run_importer('import_timit.py', tmp_path)
    assert conversions(output) == (3, 0, 0)
    train = csv_rows(str(timit / 'timit_train.csv'))
    assert train == [('TRAIN/DR1/FCJF0/SI1027_rif.wav', 'she had your dark suit in greasy wash water all year'),
                     ('TRAIN/DR2/MKLS0/SX127_rif.wav', 'cats dogs and birds')]
    test = csv_rows(str(timit / 'timit_test.csv'))
    assert test == [('TEST/DR1/MDAB0/SX49_rif.wav', 'where is the dog')]
    assert csv_rows(str(timit / 'timit_all.csv')) == train + test
    assert drop_counts(output, timit / 'timit_test.csv') == {'no transcript file': 1}

    check_rerun_and_wrong_folder('import_timit.py', tmp_path, 3, tmp_path / 'raw',
                                 'licensed by LDC (https://catalog.ldc.upenn.edu/LDC93S1)')

    (tmp_path / 'ldc').mkdir()  # only the archive, holding TIMIT/: extracted into TIMIT/ as DeepSpeech did
    make_tgz(tmp_path / 'ldc' / 'TIMIT-LDC93S1.tgz', timit, 'TIMIT')
    _, output = run_importer('import_timit.py', tmp_path / 'ldc')
    assert csv_rows(str(tmp_path / 'ldc' / 'TIMIT' / 'timit_train.csv')) == [
        ('TIMIT/' + wav, text) for wav, text in train]


@needs_tools
def test_vctk(tmp_path):
    """VCTK 0.80: 48 kHz wav48/<speaker>/ with txt/<speaker>/, a seeded shuffle cut into train/dev/test."""
    corpus = tmp_path / 'VCTK-Corpus'
    texts = {'p225/p225_001': 'Please call Stella.', 'p225/p225_002': 'Ask her to bring these things.',
             'p226/p226_001': 'Six spoons of fresh snow peas.', 'p226/p226_002': 'We also need a small plastic snake.',
             'p315/p315_001': None}
    speak([(str(corpus / 'wav48' / (stem + '.wav')), text or 'no text', ['-ar', '48000'])
           for stem, text in texts.items()])
    for stem, text in texts.items():
        if text:
            (corpus / 'txt' / stem).parent.mkdir(parents=True, exist_ok=True)
            (corpus / 'txt' / (stem + '.txt')).write_text(text + '\n', encoding='utf-8')

    _, output = run_importer('import_vctk.py', tmp_path, '--train_size', 2, '--dev_size', 1)
    assert conversions(output) == (4, 0, 0)
    full = csv_rows(str(tmp_path / 'vctk_full.csv'))
    assert full == [('VCTK-Corpus/wav16/p225/p225_001.wav', 'please call stella'),
                    ('VCTK-Corpus/wav16/p225/p225_002.wav', 'ask her to bring these things'),
                    ('VCTK-Corpus/wav16/p226/p226_001.wav', 'six spoons of fresh snow peas'),
                    ('VCTK-Corpus/wav16/p226/p226_002.wav', 'we also need a small plastic snake')]
    splits = [csv_rows(str(tmp_path / 'vctk_{}.csv'.format(name))) for name in ('train', 'dev', 'test')]
    assert [len(rows) for rows in splits] == [2, 1, 1] and sorted(sum(splits, [])) == full
    assert drop_counts(output, tmp_path / 'vctk_full.csv') == {'no transcript file': 1}
    assert soundfile.info(str(corpus / 'wav48' / 'p225' / 'p225_001.wav')).samplerate == 48000

    check_rerun_and_wrong_folder('import_vctk.py', tmp_path, 4, corpus, 'download https://datashare.is.ed.ac.uk/'
                                 'bitstream/handle/10283/2651/VCTK-Corpus.zip', '--train_size', 2, '--dev_size', 1)


@needs_tools
def test_m_ailabs(tmp_path):
    """M-AILABS: <language>.tgz with by_book/<gender>/<speaker>/<book>/metadata.csv and wavs/; every tenth
    kept sample from the first to test, from the second to dev."""
    book = tmp_path / 'src' / 'by_book' / 'female' / 'judy_bieber' / 'emerald_city'
    numbers = ('two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve')
    lines = ['Chapter 1.|Chapter one.'] + ['Line {0} of the book.|Line {0} of the book.'.format(n) for n in numbers]
    speak([(str(book / 'wavs' / 'emerald_city_{:02d}.wav'.format(i)), line.split('|')[1],
            ['-ar', '22050' if i == 3 else '16000']) for i, line in enumerate(lines)])
    (book / 'metadata.csv').write_text(''.join('emerald_city_{:02d}|{}\n'.format(i, line)
                                               for i, line in enumerate(lines)), encoding='utf-8')
    skipped = tmp_path / 'src' / 'by_book' / 'male' / 'elliot_miller' / 'pirates'
    skipped.mkdir(parents=True)
    (skipped / 'metadata.csv').write_text('pirates_01|Yo ho.|Yo ho.\n', encoding='utf-8')
    make_tgz(tmp_path / 'en_US.tgz', tmp_path / 'src' / 'by_book', 'by_book')
    shutil.rmtree(str(tmp_path / 'src'))

    _, output = run_importer('import_m-ailabs.py', tmp_path, '--language', 'en_US', '--skiplist', 'elliot_miller')
    assert conversions(output) == (1, 11, 0)  # the 22.05 kHz WAV converted in place, the others kept
    folder = tmp_path / 'en_US'
    wav = 'by_book/female/judy_bieber/emerald_city/wavs/emerald_city_{:02d}.wav'.format
    expected = [(wav(i), line.split('|')[1].lower().rstrip('.')) for i, line in enumerate(lines)]
    assert expected[0][1] == 'chapter one'  # the normalised text, not the original
    assert csv_rows(str(folder / 'en_US_test.csv')) == [expected[0], expected[10]]
    assert csv_rows(str(folder / 'en_US_dev.csv')) == [expected[1], expected[11]]
    assert csv_rows(str(folder / 'en_US_train.csv')) == expected[2:10]
    assert soundfile.info(str(folder / wav(3))).samplerate == 16000
    check_rerun_and_wrong_folder('import_m-ailabs.py', tmp_path, 12, tmp_path / 'en_US' / 'by_book',
                                 'download https://data.solak.de/data/Training/stt_tts/en_US.tgz',
                                 '--language', 'en_US', '--skiplist', 'elliot_miller')


@needs_tools
def test_tuda(tmp_path):
    """TUDA-De v2: <recording>.xml with the cleaned sentence, one <recording>_<microphone>.wav per microphone."""
    package = tmp_path / 'german-speechdata-package-v2'
    recordings = {('train', '2014-03-17-13-03-49'): ('Die Straße ist grün.', ['Kinect-RAW', 'Realtek']),
                  ('train', '2014-03-17-13-05-12'): ('Das CO2 steigt.', ['Realtek']),
                  ('train', '2014-03-17-13-07-30'): (None, ['Realtek']),
                  ('dev', '2015-01-27-11-31-32'): ('Guten Morgen.', ['Samson']), ('test', '2015-02-04-12-36-32'):
                  ('Wo ist der Hund?', ['Yamaha'])}
    speak([(str(package / name / '{}_{}.wav'.format(recording, mic)), text or 'hallo', ['-ar', '16000'])
           for (name, recording), (text, mics) in recordings.items() for mic in mics])
    for (name, recording), (text, _) in recordings.items():
        sentence = '<cleaned_sentence>{}</cleaned_sentence>'.format(text) if text else ''
        (package / name / (recording + '.xml')).write_text(
            '<?xml version="1.0" encoding="utf-8"?><recording><sentence>{0}</sentence>{1}</recording>'.format(
                text, sentence), encoding='utf-8')
    german = tmp_path / 'alphabet_de.txt'
    german.write_text(open(ALPHABET, encoding='utf-8').read() + 'ä\nö\nü\nß\n', encoding='utf-8')

    _, output = run_importer('import_tuda.py', tmp_path, '--alphabet', german)
    assert conversions(output) == (0, 5, 0)  # already 16 kHz mono 16-bit: used where they are
    assert csv_rows(str(tmp_path / 'tuda-v2-train.csv'), german) == [
        ('german-speechdata-package-v2/train/2014-03-17-13-03-49_Kinect-RAW.wav', 'die straße ist grün'),
        ('german-speechdata-package-v2/train/2014-03-17-13-03-49_Realtek.wav', 'die straße ist grün'),
        ('german-speechdata-package-v2/train/2014-03-17-13-05-12_Realtek.wav', 'das c o zwei steigt')]
    assert csv_rows(str(tmp_path / 'tuda-v2-dev.csv'), german) == [
        ('german-speechdata-package-v2/dev/2015-01-27-11-31-32_Samson.wav', 'guten morgen')]
    assert csv_rows(str(tmp_path / 'tuda-v2-test.csv'), german) == [
        ('german-speechdata-package-v2/test/2015-02-04-12-36-32_Yamaha.wav', 'wo ist der hund')]
    assert drop_counts(output, tmp_path / 'tuda-v2-train.csv') == {'no cleaned_sentence in the XML': 1}
    check_rerun_and_wrong_folder('import_tuda.py', tmp_path, 5, package, 'download http://ltdata1.informatik.'
                                 'uni-hamburg.de/kaldi_tuda_de/german-speechdata-package-v2.tar.gz',
                                 '--alphabet', german)


@needs_tools
def test_voxforge(tmp_path):
    """VoxForge: submission archives (etc/PROMPTS with wav/ or flac/) extracted into train/, dev/, test/."""
    submissions = {'anonymous-20080504-qzg': ('wav', ['-ar', '16000'], ['hello world', 'the cat sat']),
                   'ralfherzog-20071220-de34': ('flac', ['-ar', '48000'], ['good morning']),
                   'joe-20090101-abc': ('wav', ['-ar', '16000'], ['where is the dog'])}
    jobs = []
    for name, (kind, options, texts) in submissions.items():
        folder = tmp_path / 'src' / name
        (folder / 'etc').mkdir(parents=True)
        (folder / 'etc' / 'PROMPTS').write_text(''.join(
            '{}/mfc/a{:04d} {}\n'.format(name, i, text.upper()) for i, text in enumerate(texts)), encoding='utf-8')
        jobs += [(str(folder / kind / 'a{:04d}.{}'.format(i, kind)), text, options) for i, text in enumerate(texts)]
    speak(jobs)
    (tmp_path / 'data' / 'archive').mkdir(parents=True)
    for name in ('anonymous-20080504-qzg', 'ralfherzog-20071220-de34'):
        make_tgz(tmp_path / 'data' / 'archive' / (name + '.tgz'), tmp_path / 'src' / name, name)
    (tmp_path / 'data' / 'dev').mkdir()
    shutil.move(str(tmp_path / 'src' / 'joe-20090101-abc'), str(tmp_path / 'data' / 'dev'))
    data = tmp_path / 'data'

    _, output = run_importer('import_voxforge.py', data)
    assert conversions(output) == (1, 3, 0)  # the flac converted, the 16 kHz wavs used where they are
    assert csv_rows(str(data / 'voxforge-train.csv')) == [
        ('train/anonymous-20080504-qzg/wav/a0000.wav', 'hello world'),
        ('train/anonymous-20080504-qzg/wav/a0001.wav', 'the cat sat'),
        ('train/ralfherzog-20071220-de34/wav/a0000.wav', 'good morning')]
    assert csv_rows(str(data / 'voxforge-dev.csv')) == [('dev/joe-20090101-abc/wav/a0000.wav', 'where is the dog')]
    assert csv_rows(str(data / 'voxforge-test.csv')) == []
    check_rerun_and_wrong_folder('import_voxforge.py', data, 4, tmp_path / 'src',
                                 'download the *.tgz files of http://www.repository.voxforge1.org/downloads/'
                                 'SpeechCorpus/Trunk/Audio/Main/16kHz_16bit/')
