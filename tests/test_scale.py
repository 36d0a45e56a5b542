"""The data path at corpus scale (issue 31), in process and in seconds: what start-up reads and keeps does
not grow per sample where it must not. Corpora of 10k and 100k samples are generated in the test: CSV rows
(files needed only where audio is checked), and .sdb files and tar shards of one tiny clip repeated, with
the index beside them written from what the test wrote (building it is container_index's own test)."""
import dataclasses
import io
import os
import re
import shutil
import tarfile

import numpy as np
import pytest
import soundfile

from tests.helpers.suite import CSV_HEADER, SMOKE_DIR
from deepspeech_training.config import settings_from_args
from deepspeech_training.data import container_index, headers, sdb
from deepspeech_training.data.audio import AudioError, RecordAudio
from deepspeech_training.data.feeding import read_checked_audio
from deepspeech_training.data.samples import DataError, read_records, read_sources
from deepspeech_training.data.validation import validate_sets
from deepspeech_training.distributed import Single
from deepspeech_training.util.text import load_alphabet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from tests.helpers.http_ranges import serving
from tests.helpers.threaded_dist import run_ranks, threaded_ranks
LETTERS = 'abcdefghijklmnopqrstuvwxyz'
MAX_BYTES_PER_SAMPLE = 100      # issue 31's bound for the sample index, with short paths and transcripts


@pytest.fixture(scope='module')
def alphabet():
    return load_alphabet(os.path.join(ROOT, 'data', 'alphabet.txt'))


def config(alphabet, cache_dir=None):
    return dataclasses.replace(settings_from_args(['--n_hidden', 8]).model, alphabet=alphabet, data_cache_dir=cache_dir)


def clip_bytes(seconds=0.04, rate=16000):
    """A WAV file's bytes: `seconds` of quiet noise, one feature frame: enough for a one-letter transcript."""
    out = io.BytesIO()
    noise = np.random.default_rng(0).integers(-300, 300, int(seconds * rate), dtype=np.int16)
    soundfile.write(out, noise, rate, format='WAV', subtype='PCM_16')
    return out.getvalue()


def transcript(number):
    return LETTERS[number % len(LETTERS)]


def write_csv(path, count, wav_name=lambda n: 'clips/common_{:07d}.wav'.format(n)):
    with open(path, 'w') as out:
        out.write(CSV_HEADER + '\n')
        out.writelines('{},{},{}\n'.format(wav_name(n), 3244 + n % 977, transcript(n)) for n in range(count))
    return str(path)


def index_for(path, offsets, lengths, audio, count):
    """The index of a container the test wrote (`count` samples of the one clip `audio`), beside it."""
    rate, channels, frames = 16000, 1, (len(audio) - 44) // 2
    texts = [transcript(n).encode() for n in range(count)]
    size, fingerprint = container_index.identify(path)
    index = container_index.ContainerIndex(
        size, fingerprint, sdb.WAV, True, np.asarray(offsets, np.int64), np.asarray(lengths, np.int64),
        np.full(count, len(audio), np.int64), b''.join(texts), np.cumsum([len(t) for t in texts]),
        np.full(count, rate, np.int32), np.full(count, channels, np.int32), np.full(count, frames, np.int64), {})
    container_index.write_index(index, path + container_index.SIDECAR)


def write_sdb(path, count):
    audio = clip_bytes()
    with open(path, 'wb') as out:
        writer = sdb.Writer(out, sdb.WAV)
        for n in range(count):
            writer.add(audio, transcript(n))
        writer.finish()
    entry = 4 + 4 + len(audio) + 4      # entry length field, audio column, transcript column lengths
    index_for(path, writer.offsets, [entry + len(transcript(n)) for n in range(count)], audio, count)
    return path


def write_tar(path, count):
    """A WebDataset shard as tarfile writes one, its member headers made by tarfile (TarInfo.tobuf) and the
    rest written here: tarfile.addfile takes ~15 s for 200k members."""
    audio, offsets = clip_bytes(), []
    with open(path, 'wb') as out:
        for n in range(count):
            for name, data in (('{:07d}.wav'.format(n), audio), ('{:07d}.txt'.format(n), transcript(n).encode())):
                member = tarfile.TarInfo(name)
                member.size = len(data)
                out.write(member.tobuf(tarfile.USTAR_FORMAT))
                if name.endswith('.wav'):
                    offsets.append(out.tell())
                out.write(data + bytes(-len(data) % tarfile.BLOCKSIZE))
        out.write(bytes(2 * tarfile.BLOCKSIZE))
    index_for(path, offsets, [len(audio)] * count, audio, count)
    return path


@pytest.fixture(scope='module')
def containers(tmp_path_factory):
    folder = tmp_path_factory.mktemp('containers')
    return {(kind, count): write(str(folder / '{}-{}.{}'.format(kind, count, kind)), count)
            for kind, write in (('sdb', write_sdb), ('tar', write_tar)) for count in (10000, 100000)}


def read_calls():
    with open('/proc/self/io') as io_file:
        return int(re.search(r'syscr: (\d+)', io_file.read()).group(1))


def start_up(source, alphabet, cache_dir=None):
    """What a rank does with a source before its first step: read its records, sort them, check its audio."""
    records = read_sources([source], alphabet, cache_dir=cache_dir)
    return validate_sets([('train', records)], config(alphabet, cache_dir), Single(), workers=1, cache_dir=cache_dir)[0]


@pytest.mark.parametrize('kind', ['sdb', 'tar'])
def test_start_up_reads_of_an_sdb_or_shard_do_not_grow_with_its_samples(containers, alphabet, kind):
    calls = {}
    for count in (10000, 100000):
        before = read_calls()
        records = start_up(containers[kind, count], alphabet)
        calls[count] = read_calls() - before
        assert len(records) == count
        assert records[count - 1].transcript == transcript(records[count - 1].row)
    assert calls[100000] <= calls[10000] + 2 and calls[100000] < 40, calls


@pytest.mark.parametrize('kind', ['sdb', 'tar'])
def test_over_http_start_up_takes_a_few_requests_whatever_the_samples(containers, alphabet, kind):
    folder = os.path.dirname(containers[kind, 10000])
    requests = {}
    for count in (10000, 100000):
        served = []
        with serving(folder, requests=served) as url:
            records = start_up('{}/{}'.format(url, os.path.basename(containers[kind, count])), alphabet)
        assert len(records) == count
        requests[count] = len(served)
    assert requests[100000] == requests[10000] < 30, requests


def test_the_sample_index_of_100k_csv_rows_stays_under_100_bytes_a_sample(tmp_path, alphabet):
    """Columns, not objects: 18 bytes of numbers a sample (a CSV's: no offsets) plus its path and labels (one byte
    a character)."""
    records = read_records([write_csv(tmp_path / 'train.csv', 100000, lambda n: 'w/{:07d}.wav'.format(n))],
                           alphabet)
    columns = records.columns
    assert columns.nbytes / len(records) <= MAX_BYTES_PER_SAMPLE, columns.nbytes / len(records)
    fixed = (columns.nbytes - len(columns.path_data) - columns.labels.nbytes) / len(records)
    assert fixed <= 18, fixed
    sample = records[54321]
    assert (sample.audio_path, sample.transcript, sample.row) == (
        str(tmp_path / 'w' / '0054321.wav'), transcript(54321), 54321 + 2)


def copy_corpus(folder, count):
    """`count` WAV files (copies of the smoke test's, each its own inode) and their CSV."""
    (folder / 'w').mkdir(parents=True)
    rows = [CSV_HEADER]
    for n in range(count):
        name = 'w/{:04d}.wav'.format(n)
        shutil.copy(os.path.join(SMOKE_DIR, 'hello_world.wav'), str(folder / name))
        rows.append('{},{},hello world'.format(name, (folder / name).stat().st_size))
    (folder / 'train.csv').write_text('\n'.join(rows) + '\n')
    return str(folder / 'train.csv')


def headers_read(output):
    return int(re.search(r'(\d+) file header\(s\) read', output).group(1))


def test_the_header_cache_trusts_unchanged_folders_and_names_files_replaced_or_removed_there(
        tmp_path, alphabet, capsys):
    source, cache = copy_corpus(tmp_path / 'corpus', 300), str(tmp_path / 'cache')
    start_up(source, alphabet, cache)
    assert headers_read(capsys.readouterr().out) == 300
    start_up(source, alphabet, cache)
    assert "0 file header(s) read, 300 known unchanged from the cache in {} (300 in unchanged folders, not stat'ed)" \
        .format(cache) in capsys.readouterr().out
    # the same size, other content, written beside and renamed over the file (as cp --remove-destination,
    # rsync or a download tool replace a file): a stereo file of half the frames; and a file removed
    stereo = tmp_path / 'corpus' / 'w' / '0007.wav'
    audio, rate = soundfile.read(str(stereo), dtype='int16')
    soundfile.write(str(stereo) + '.part', np.stack([audio[:len(audio) // 2]] * 2, axis=1), rate, subtype='PCM_16',
                    format='WAV')
    assert os.path.getsize(str(stereo) + '.part') == stereo.stat().st_size
    os.replace(str(stereo) + '.part', str(stereo))
    missing = tmp_path / 'corpus' / 'w' / '0011.wav'
    missing.unlink()
    with pytest.raises(DataError) as error:
        start_up(source, alphabet, cache)
    assert "2 file header(s) read, 298 known unchanged from the cache in {} (0 in unchanged folders" \
        .format(cache) in capsys.readouterr().out
    assert 'line 9: {}: 2 channels, expected mono'.format(stereo) in str(error.value)
    assert 'line 13: {}: audio file not found'.format(missing) in str(error.value)


def test_a_file_rewritten_in_place_is_named_when_a_batch_reads_it_and_the_next_start_stats_every_file(
        tmp_path, alphabet, capsys):
    """A file's folder does not change when the file is rewritten in place: the start trusts the cache, the reader
    checks what it reads (feeding.read_checked_audio), names the file and marks the cache stale."""
    source, cache = copy_corpus(tmp_path / 'corpus', 20), str(tmp_path / 'cache')
    start_up(source, alphabet, cache)
    short = tmp_path / 'corpus' / 'w' / '0011.wav'
    short.write_bytes(short.read_bytes()[:2000])
    records = start_up(source, alphabet, cache)
    assert "(20 in unchanged folders, not stat'ed)" in capsys.readouterr().out
    record = next(r for r in records if r.audio_path == str(short))
    reader = RecordAudio(1 << 20)
    assert len(read_checked_audio(reader, records[0], config(alphabet, cache))) > 0
    with pytest.raises(AudioError) as error:
        read_checked_audio(reader, record, config(alphabet, cache))
    assert str(error.value).startswith(
        'audio changed during training: {} row 13: {}: the file is cut short: its header announces 1.46 s of audio, '
        'its 2000 bytes hold 0.06 s'.format(source, short))
    with pytest.raises(DataError) as error:
        start_up(source, alphabet, cache)
    assert "1 file header(s) read, 19 known unchanged from the cache in {} (0 in unchanged folders".format(cache) \
        in capsys.readouterr().out
    assert 'line 13: {}: the file is cut short'.format(short) in str(error.value)
    start_up_again = pytest.raises(DataError)
    with start_up_again:
        start_up(source, alphabet, cache)
    assert "(19 in unchanged folders, not stat'ed)" in capsys.readouterr().out    # the stale mark is gone


def test_threads_find_the_same_records_and_problems_in_the_same_order_as_one(tmp_path, alphabet):
    source = copy_corpus(tmp_path / 'corpus', 600)
    for number in (5, 300, 599):        # cut short, removed, and not audio
        wav = tmp_path / 'corpus' / 'w' / '{:04d}.wav'.format(number)
        wav.write_bytes(wav.read_bytes()[:3000]) if number == 5 else wav.unlink() if number == 300 else \
            wav.write_bytes(b'not audio' * 1000)
    records = read_sources([source], alphabet)
    checked, problems = {}, {}
    for workers in (1, 8):
        kept, = validate_sets([('train', records)], config(alphabet), Single(), skip_invalid=True, workers=workers)
        checked[workers] = [(r.audio_path, r.row) for r in kept]
        with pytest.raises(DataError) as error:
            validate_sets([('train', records)], config(alphabet), Single(), workers=workers)
        problems[workers] = error.value.problems
    assert checked[1] == checked[8] and len(checked[1]) == 597
    assert problems[1] == problems[8] and len(problems[1]) == 3


def test_a_damaged_header_cache_is_named_and_read_again(tmp_path, alphabet, capsys):
    source, cache = copy_corpus(tmp_path / 'corpus', 20), str(tmp_path / 'cache')
    start_up(source, alphabet, cache)
    cache_file, = os.listdir(cache)
    (tmp_path / 'cache' / cache_file).write_bytes(b'not a cache')
    capsys.readouterr()
    assert len(start_up(source, alphabet, cache)) == 20
    output = capsys.readouterr()
    assert 'Ignoring the audio header cache {}'.format(os.path.join(cache, cache_file)) in output.err + output.out
    assert headers_read(output.out) == 20
    start_up(source, alphabet, cache)
    assert headers_read(capsys.readouterr().out) == 0


def test_two_ranks_each_cache_the_headers_they_read_and_one_rank_then_reads_none(tmp_path, alphabet, capsys):
    """Under Horovod each rank reads and caches its share (nothing gathered but the problems); the next run,
    on any number of ranks, finds every header in the ranks' files together."""
    source, cache = copy_corpus(tmp_path / 'corpus', 300), str(tmp_path / 'cache')
    records = read_sources([source], alphabet)

    def check(dist):
        return validate_sets([('train', records)], config(alphabet, cache), dist, workers=1, cache_dir=cache)

    run_ranks(threaded_ranks(2), check)
    assert headers_read(capsys.readouterr().out) == 300
    assert sorted(name.rsplit('.', 2)[1] for name in os.listdir(cache)) == ['0', '1']
    start_up(source, alphabet, cache)
    assert '0 file header(s) read, 300 known unchanged' in capsys.readouterr().out


def test_a_rank_with_no_file_of_its_own_writes_its_cache_and_the_check_goes_on(tmp_path, alphabet, capsys):
    """One file on two ranks: one rank's share is empty, and its cache file (folder stamps, no entries) is
    still written (an empty share once crashed the write, one run in a few on three files)."""
    source, cache = copy_corpus(tmp_path / 'corpus', 1), str(tmp_path / 'cache')
    records = read_sources([source], alphabet)
    run_ranks(threaded_ranks(2), lambda dist: validate_sets([('train', records)], config(alphabet, cache), dist,
                                                            workers=1, cache_dir=cache))
    assert headers_read(capsys.readouterr().out) == 1
    assert sorted(name.rsplit('.', 2)[1] for name in os.listdir(cache)) == ['0', '1']
    start_up(source, alphabet, cache)
    assert '0 file header(s) read, 1 known unchanged' in capsys.readouterr().out


def test_two_ranks_agree_on_files_smaller_or_larger_than_their_wav_filesize_also_from_the_cache(
        tmp_path, alphabet, capsys):
    """The sizes come from the stats the pass takes anyway (or the header cache's stamps): each rank compares
    its share, the problems and the count of larger files are gathered, every rank stops the same way."""
    source, cache = copy_corpus(tmp_path / 'corpus', 40), str(tmp_path / 'cache')
    rows = open(source).read().splitlines()
    name, size, text = rows[5].split(',')
    rows[5] = '{},{},{}'.format(name, int(size) + 1, text)         # line 6: one byte more than the file holds
    rows[10:20] = [row.replace(',{},'.format(size), ',0,') for row in rows[10:20]]     # lines 11-20: size 0
    open(source, 'w').write('\n'.join(rows) + '\n')
    records = read_sources([source], alphabet)

    def check(dist):
        return validate_sets([('train', records)], config(alphabet, cache), dist, workers=1, cache_dir=cache)

    for _ in ('headers read', 'headers from the cache'):
        errors = run_ranks(threaded_ranks(2), check)
        assert all(isinstance(error, DataError) for error in errors), errors
        assert errors[0].problems == errors[1].problems == [
            '{}: line 6: {}: the file has {} bytes, its wav_filesize says {}: a copy or download cut short (copy it '
            'again from its source; if the file is whole, the CSV is wrong: run the importer that wrote it again, '
            'or write {} as its wav_filesize)'.format(source, tmp_path / 'corpus' / name, size, int(size) + 1, size)]
        output = capsys.readouterr()
        assert output.err.count("have an audio file larger than their CSV's wav_filesize") == 1     # the chief's
        assert "W 10 sample(s) have an audio file larger than their CSV's wav_filesize, e.g. {}: line 11: ".format(
            source) in output.err
    assert '0 file header(s) read, 40 known unchanged from the cache' in output.out


@pytest.mark.parametrize('subtype,channels,rate', [('PCM_16', 1, 16000), ('PCM_U8', 1, 8000), ('PCM_24', 2, 44100),
                                                   ('PCM_32', 1, 22050), ('FLOAT', 1, 16000)])
def test_the_header_walk_finds_what_soundfile_finds(tmp_path, subtype, channels, rate):
    """data/headers.py reads a WAV file's header itself (3x faster than soundfile.info at a million files):
    it must agree with libsndfile on every file it accepts, also after a LIST chunk and at odd lengths,
    and hand anything else (here float samples) to soundfile."""
    path = str(tmp_path / 'a.wav')
    noise = np.random.default_rng(1).uniform(-0.5, 0.5, (rate // 3 + 1, channels))
    soundfile.write(path, noise, rate, subtype=subtype)
    with soundfile.SoundFile(path, 'r+') as edited:      # libsndfile writes a LIST chunk for these
        edited.title = 'a title of odd length'
    info = soundfile.info(path)
    _, header = headers.read_header(path)
    assert header == headers.Header(info.samplerate, info.channels, info.frames)
    with open(path, 'rb') as wav:
        walked = headers.wav_header(wav.read(headers.HEAD_BYTES), os.path.getsize(path))
    assert (walked is None) == (subtype == 'FLOAT')
