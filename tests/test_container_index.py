"""data/container_index.py: the per-sample metadata of a .sdb or tar shard (offsets, sizes, transcripts,
audio headers) read in a few read calls per container: from the sidecar bin/data_set_tool.py writes, from a
cache, or built in one pass; always what a walk of the container sample by sample finds (walk(): the
entries of sdb.Database, the members of Python's tarfile, each audio header read from its bytes), and what
samples.read_records gives (its records, or its error for a corrupt container). Real files: the smoke
corpus through the tool, and generated ones of thousands of tiny clips (sdb.Writer, tarfile) to count read
calls as the sample count grows."""
import io
import os
import re
import shutil
import struct
import tarfile

import numpy as np
import pytest
import soundfile

from tests.helpers.suite import SMOKE_CSV
from deepspeech_training.data import container_index, opus, sdb, tar_shards
from deepspeech_training.data.samples import DataError, read_records

from tests.helpers.http_ranges import serving
from tests.helpers.sdb_cases import corrupt, layout, tool

RATE = 16000
BLOCK = 1 << 20         # the build pass's reads in these tests: a few per container, many samples each
WORDS = ('yes', 'no', 'up', 'down', 'left', 'right', 'on', 'off', 'stop', 'go')


def clip(number, seconds=0.02, rate=RATE, channels=1):
    """A WAV file of noise (different for each `number`)."""
    noise = np.random.RandomState(number).randint(-3000, 3000, (int(rate * seconds), channels)).astype(np.int16)
    out = io.BytesIO()
    soundfile.write(out, noise, rate, format='WAV', subtype='PCM_16')
    return out.getvalue()


def transcript(number):
    return ' '.join(WORDS[int(digit)] for digit in str(number))


def odd_audio():
    """Unusual samples: not audio (a header error), stereo at 8 kHz (a header)."""
    return [(b'JUNK' * 20, 'bad'), (clip(1, rate=8000, channels=2), 'stereo')]


def write_sdb(path, count, audio_type=sdb.WAV, extra=()):
    """A sample database of `count` generated clips (then `extra` [(audio, transcript)]), by sdb.Writer."""
    with open(str(path), 'wb') as out:
        writer = sdb.Writer(out, audio_type)
        clips = [clip(n) for n in range(16)]
        for number in range(count):
            writer.add(clips[number % 16], transcript(number))
        for audio, text in extra:
            writer.add(audio, text)
        writer.finish()
    return str(path)


def write_tar(path, count, extra=()):
    """A tar shard of `count` generated clips (then `extra`), as WebDataset pairs; the .txt of every other
    sample before its audio (a shard's members come in any order)."""
    clips = [clip(n) for n in range(16)]
    samples = [(clips[n % 16], transcript(n)) for n in range(count)] + list(extra)
    with tarfile.open(str(path), 'w') as tar:
        for number, (audio, text) in enumerate(samples):
            members = [('s{}.wav'.format(number), audio), ('s{}.txt'.format(number), text.encode())]
            for name, data in members[::1 if number % 2 else -1]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


def odd_opus():
    """A good Opus sample, then one whose header says 44.1 kHz (Opus has no such rate)."""
    good = opus.encode(np.frombuffer(clip(0)[44:], np.int16).tobytes(), RATE, 1)
    return [(good, 'good'), (opus.HEADER.pack(640, 44100, 1, 2) + good[opus.HEADER.size:], 'bad header')]


@pytest.fixture(scope='module')
def containers(tmp_path_factory):
    """{kind: path} of containers with their sidecars: the smoke corpus through bin/data_set_tool.py as a
    WAV .sdb, an Opus .sdb and two tar shards; generated ones with samples whose audio is wrong."""
    folder = tmp_path_factory.mktemp('containers')
    found = {'wav': folder / 'wav.sdb', 'opus': folder / 'opus.sdb'}
    assert tool('--audio_type', 'wav', SMOKE_CSV, found['wav']) == 0
    assert tool(SMOKE_CSV, found['opus']) == 0
    assert tool(SMOKE_CSV, folder / 'smoke-{000..001}.tar') == 0
    found.update(tar0=folder / 'smoke-000.tar', tar1=folder / 'smoke-001.tar')
    found.update(odd_wav=write_sdb(folder / 'odd_wav.sdb', 5, extra=odd_audio()),
                 odd_opus=write_sdb(folder / 'odd_opus.sdb', 0, sdb.OPUS, odd_opus()),
                 odd_tar=write_tar(folder / 'odd.tar', 5, extra=odd_audio()))
    found['reordered'] = reordered(found['wav'], folder / 'reordered.sdb')
    for kind in ('odd_wav', 'odd_opus', 'odd_tar', 'reordered'):
        assert tool('--index_only', found[kind]) == 0
    return {kind: str(path) for kind, path in found.items()}


def reordered(path, target):
    """A copy of the database `path` whose index lists its entries last first (a valid .sdb: the index may
    point anywhere in the sample chunk)."""
    data = bytearray(path.read_bytes())
    _, index_start, offsets = layout(data)
    struct.pack_into('>{}Q'.format(len(offsets)), data, index_start + 16, *reversed(offsets))
    target.write_bytes(bytes(data))
    return target


def walk(path):
    """[(offset, length, size, transcript, header)] of a container's samples found sample by sample, without
    container_index: a .sdb's entries by sdb.Database (in the order of its index), a tar shard's audio
    members by Python's tarfile (in the order of the shard); header: ((rate, channels, frames), None) or
    (None, what is wrong). Raises the container's error (sdb.SdbError, or tar_shards.ShardError worded as
    the index build words it) where it is corrupt."""
    return walk_sdb(path) if sdb.is_sdb(path) else walk_tar(path)


def walk_sdb(path):
    with sdb.Database(path) as database:
        rows = []
        for offset in database.offsets:
            entry = database.entry(offset)
            assert len(entry.audio) == entry.audio_length
            size = entry.audio_length
            if database.audio_type == sdb.OPUS:
                size = opus.read_header(entry.audio)[0] + container_index.WAV_HEADER_BYTES
            rows.append((offset, entry.size, size, entry.transcript, audio_header(database.audio_type, entry.audio)))
        return rows


def walk_tar(path):
    """WebDataset pairs: a member's key is its path up to the first dot of its file name; <key>.txt holds the
    transcript (stripped), <key>.wav (or .flac, .ogg, .opus) the audio; other members are ignored."""
    size = os.path.getsize(path)
    audio, texts = {}, {}
    with open(path, 'rb') as shard, tarfile.open(path, 'r:') as tar:
        for member in tar:
            folder, name = member.name.rpartition('/')[::2]
            stem, _, extension = name.partition('.')
            key, extension = folder + '/' * bool(folder) + stem, extension.lower()
            if not member.isfile() or extension not in ('wav', 'flac', 'ogg', 'opus', 'txt'):
                continue
            if member.offset_data + member.size > size:
                raise tar_shards.ShardError(
                    '{}: at byte {}: {} needs {} byte(s), the file ends at byte {} (truncated: copy or write it '
                    'again)'.format(path, member.offset_data, member.name, member.size, size))
            if extension == 'txt':
                texts[key] = tar.extractfile(member).read().decode('utf-8').strip()
            else:
                assert key not in audio, key
                shard.seek(member.offset_data)
                audio[key] = member.offset_data, member.size, shard.read(member.size)
    unpaired = sorted(set(audio) ^ set(texts))
    if unpaired:
        raise tar_shards.ShardError(
            '{}: {}: {} ({} unpaired key(s)); each sample is <key>.wav (or .flac, .ogg, .opus) and <key>.txt'
            .format(path, unpaired[0], 'audio without a .txt' if unpaired[0] in audio else 'a .txt without audio',
                    len(unpaired)))
    return [(offset, length, length, texts[key], audio_header(sdb.WAV, data))
            for key, (offset, length, data) in audio.items()]


def audio_header(audio_type, audio):
    """((rate, channels, frames), None) of a sample's audio bytes, read here (soundfile, or the Opus
    framing's header); where they cannot be read, (None, why) in container_index.read_audio_header's words."""
    try:
        if audio_type == sdb.OPUS:
            pcm_length, rate, channels, width = opus.check_header(audio)
            return (rate, channels, pcm_length // (channels * width)), None
        info = soundfile.info(io.BytesIO(audio))
        return (int(info.samplerate), int(info.channels), int(info.frames)), None
    except Exception:  # noqa: BLE001 -- whatever libsndfile raises for bytes that are not a WAV
        values, error = container_index.read_audio_header(audio_type, io.BytesIO(audio))
        assert values is None and error
        return None, error


def records_rows(path, alphabet):
    """[(offset, length, size, transcript)] of the records samples.read_records reads of a container."""
    records = read_records([path], alphabet)
    for number, record in enumerate(records):
        assert (record.audio_path, record.source, record.row) == (path, path, number)
    return [(record.offset, record.length, record.filesize, record.transcript) for record in records]


def rows(index):
    """walk()'s rows of an index."""
    def header(n):
        if n in index.header_errors:
            assert index.frames[n] == -1
            return None, index.header_errors[n]
        return (int(index.sample_rates[n]), int(index.channels[n]), int(index.frames[n])), None
    return [(int(index.offsets[n]), int(index.lengths[n]), int(index.sizes[n]), index.transcript(n), header(n))
            for n in range(len(index))]


@pytest.mark.parametrize('kind', ['wav', 'opus', 'tar0', 'tar1', 'odd_wav', 'odd_opus', 'odd_tar', 'reordered'])
def test_the_index_built_from_the_sidecar_and_from_the_cache_is_what_a_walk_of_the_samples_finds(
        containers, kind, tmp_path, alphabet, capsys):
    path = containers[kind]
    expected = walk(path)
    assert records_rows(path, alphabet) == [row[:4] for row in expected]
    copy = str(tmp_path / os.path.basename(path))           # without its sidecar
    shutil.copy(path, copy)
    cache = str(tmp_path / 'cache')
    built = container_index.read_index(copy, cache, BLOCK)
    assert 'I Indexed {}: {} samples in '.format(copy, len(expected)) in capsys.readouterr().out
    cached = container_index.read_index(copy, cache, BLOCK)
    sidecar = container_index.read_index(path)
    assert capsys.readouterr() == ('', '')                  # nothing built, nothing wrong
    assert os.listdir(cache) == [os.path.basename(container_index.cache_path(copy, cache))]
    for index in (built, cached, sidecar):
        assert rows(index) == expected
        assert index.audio_type == (sdb.OPUS if 'opus' in kind else sdb.WAV)
    if kind.startswith('odd'):
        assert len(built.header_errors) == 1


def test_an_unlabeled_or_empty_sdb_loads_from_its_sidecar(tmp_path, capsys):
    path = str(tmp_path / 'noise.sdb')
    with open(path, 'wb') as out:
        writer = sdb.Writer(out, sdb.WAV, labeled=False)
        writer.add(clip(0))
        writer.finish()
    empty = write_sdb(tmp_path / 'empty.sdb', 0)
    for container in (path, empty):
        container_index.write_sidecar(container)
    capsys.readouterr()
    index = container_index.read_index(path)
    assert (index.labeled, index.transcripts, index.transcript_ends, index.transcript(0)) == (False, b'', None, None)
    assert (index.sample_rates[0], index.frames[0]) == (RATE, RATE // 50)
    assert len(container_index.read_index(empty)) == 0
    assert capsys.readouterr().out == ''                   # from the sidecars, nothing indexed again


def test_index_only_writes_sidecars_names_a_bad_container_and_an_unwritable_cache_only_warns(
        containers, tmp_path, capsys):
    for name in ('wav.sdb', 'smoke-000.tar'):
        shutil.copy(os.path.join(os.path.dirname(containers['wav']), name), str(tmp_path / name))
    with open(str(tmp_path / 'cut.sdb'), 'wb') as out:
        out.write(b'SAMPLEDB')
    assert tool('--index_only', tmp_path / 'wav.sdb', tmp_path / '*.tar') == 0
    assert sorted(os.listdir(str(tmp_path))) == ['cut.sdb', 'smoke-000.tar', 'smoke-000.tar.index', 'wav.sdb',
                                                 'wav.sdb.index']
    assert tool('--index_only', tmp_path / 'cut.sdb') == 1
    assert 'E {}: at byte 8: the meta length needs 8 byte(s)'.format(tmp_path / 'cut.sdb') in capsys.readouterr().err
    os.remove(str(tmp_path / 'smoke-000.tar.index'))
    not_a_folder = tmp_path / 'wav.sdb'
    assert len(container_index.read_index(str(tmp_path / 'smoke-000.tar'), str(not_a_folder / 'cache'))) == 2
    assert 'cannot write the container index cache' in capsys.readouterr().err


def read_calls():
    """Read system calls this process made so far (/proc/self/io syscr: every read, pread, ...)."""
    with open('/proc/self/io') as io_file:
        return int(re.search(r'syscr: (\d+)', io_file.read()).group(1))


def calls_of(function, *args):
    """(read calls `function(*args)` made, what it returned)."""
    before = read_calls() + 1           # the read of /proc/self/io itself
    result = function(*args)
    return read_calls() - before, result


@pytest.fixture(scope='module')
def large(tmp_path_factory):
    """{(kind, count): path} of a .sdb and a tar shard of 1,000 and of 20,000 clips, with sidecars."""
    folder = tmp_path_factory.mktemp('large')
    found = {}
    for count in (1000, 20000):
        found['sdb', count] = write_sdb(folder / 'clips-{}.sdb'.format(count), count)
        found['tar', count] = write_tar(folder / 'clips-{}.tar'.format(count), count)
    for path in found.values():
        container_index.write_sidecar(path, BLOCK)
    return found


@pytest.mark.parametrize('kind', ['sdb', 'tar'])
def test_loading_an_index_takes_the_same_few_reads_for_1000_and_20000_samples(large, kind, tmp_path):
    cache = str(tmp_path / 'cache')
    container_index.read_index(large[kind, 1000], cache, BLOCK)             # warm up (imports, first use)
    loads = {}
    for count in (1000, 20000):
        reads, index = calls_of(container_index.read_index, large[kind, count])
        assert len(index) == count
        built, _ = calls_of(container_index.build_index, large[kind, count],
                            container_index.identify(large[kind, count]), BLOCK)
        size = os.path.getsize(large[kind, count])
        # one pass of BLOCK-byte reads, the .sdb's index and the fingerprint: not a read per sample
        assert built <= size / BLOCK + 2 * container_index.PROBES + 12, (built, size)
        os.rename(large[kind, count] + container_index.SIDECAR, large[kind, count] + '.away')
        container_index.read_index(large[kind, count], cache, BLOCK)
        cached, _ = calls_of(container_index.read_index, large[kind, count], cache, BLOCK)
        os.rename(large[kind, count] + '.away', large[kind, count] + container_index.SIDECAR)
        loads[count] = reads, cached
        print('{} of {} samples ({:.1f} MB): {} read calls with its sidecar, {} from the cache, {} to build'
              .format(kind, count, size / 1e6, reads, cached, built))
    assert loads[20000] == loads[1000]
    assert max(loads[1000]) <= container_index.PROBES + 6


def test_over_http_an_index_with_its_sidecar_takes_a_few_requests_whatever_the_sample_count(large):
    folder = os.path.dirname(large['sdb', 1000])
    requests = []
    with serving(folder, requests=requests) as url:
        counts = {}
        for kind, count in large:
            del requests[:]
            index = container_index.read_index('{}/{}'.format(url, os.path.basename(large[kind, count])))
            assert rows(index) == rows(container_index.read_index(large[kind, count]))
            counts[kind, count] = len(requests)
        del requests[:]
        shard = '{}/{}'.format(url, os.path.basename(large['tar', 1000]))
        container_index.build_index(shard, container_index.identify(shard), BLOCK)
        built = len(requests)
    print('HTTP requests to load an index with its sidecar: {}; to build that of 1,000 samples: {}'
          .format(counts, built))
    assert counts['sdb', 1000] == counts['sdb', 20000] and counts['tar', 1000] == counts['tar', 20000]
    assert max(counts.values()) <= container_index.PROBES + 6
    assert built <= 2 * (os.path.getsize(large['tar', 1000]) / BLOCK + container_index.PROBES + 3)


def unsupported_zip_version(index_bytes):
    """An index file with one flipped byte that makes zipfile raise NotImplementedError (a version it does not
    know in the central directory), not one of its usual errors."""
    damaged = bytearray(index_bytes)
    struct.pack_into('<H', damaged, damaged.index(b'PK\x01\x02') + 6, 190)
    return bytes(damaged)


def test_a_stale_or_garbage_sidecar_or_cache_file_is_named_and_the_index_built_again(tmp_path, capsys):
    path = write_sdb(tmp_path / 'clips.sdb', 48, extra=[(clip(0), 'yes no'), (clip(1), 'no yes')])
    container_index.write_sidecar(path)
    sidecar = path + container_index.SIDECAR
    with open(sidecar, 'rb') as old:
        stale = old.read()
    size = os.path.getsize(path)
    write_sdb(path, 48, extra=[(clip(0), 'no yes'), (clip(1), 'yes no')])      # the same size, rewritten
    assert os.path.getsize(path) == size
    expected = walk(path)
    assert [row[3] for row in expected[48:]] == ['no yes', 'yes no']
    capsys.readouterr()
    cache = str(tmp_path / 'cache')
    assert rows(container_index.read_index(path, cache)) == expected
    warning = capsys.readouterr().err
    assert '{}: not used, it belongs to another version of the container'.format(sidecar) in warning
    assert 'bin/data_set_tool.py --index_only' in warning
    cached = container_index.cache_path(path, cache)
    for garbage in (b'garbage', stale[:len(stale) // 2], container_index.MAGIC + b'PK junk', b'',
                    unsupported_zip_version(stale)):
        for damaged in (sidecar, cached):
            with open(damaged, 'wb') as out:
                out.write(garbage)
        assert rows(container_index.read_index(path, cache)) == expected
        output = capsys.readouterr()
        assert output.err.count('W ') == 2 and 'Traceback' not in output.err
        assert '{}: not used, '.format(sidecar) in output.err and '{}: not used, '.format(cached) in output.err
        assert 'I Indexed {}: 50 samples'.format(path) in output.out


def sdb_error(path, alphabet):
    """The error of a corrupt container: the one problem samples.read_records names, which is the error a walk
    of the container sample by sample meets (sdb.Database's, or that of the walk of the tar shard)."""
    with pytest.raises(DataError) as error:
        read_records([path], alphabet)
    with pytest.raises((sdb.SdbError, tar_shards.ShardError)) as walked:
        walk(path)
    assert error.value.problems == [str(walked.value)]
    return error.value.problems[0]


@pytest.mark.parametrize('case', ['cut in the samples', 'cut in the index', 'offset outside the samples',
                                  'entry length short', 'entry length long'])
def test_a_corrupt_sdb_with_its_old_sidecar_gives_the_error_of_a_walk_of_its_entries(containers, case, tmp_path, alphabet, capsys):
    with open(containers['wav'], 'rb') as original:
        data, offset = corrupt(original.read(), case)
    path = str(tmp_path / 'bad.sdb')
    with open(path, 'wb') as out:
        out.write(bytes(data))
    shutil.copy(containers['wav'] + container_index.SIDECAR, path + container_index.SIDECAR)
    with pytest.raises(sdb.SdbError) as error:
        container_index.read_index(path)
    assert str(error.value) == sdb_error(path, alphabet)
    assert str(error.value).startswith('{}: at byte {}: '.format(path, offset))
    assert 'not used, it belongs to another version' in capsys.readouterr().err


def test_a_truncated_or_unpaired_shard_gives_the_error_of_a_walk_of_its_members(containers, tmp_path, alphabet):
    with open(containers['tar0'], 'rb') as original:
        data = original.read()
    cut = str(tmp_path / 'cut.tar')
    with open(cut, 'wb') as out:
        out.write(data[:len(data) // 2])
    unpaired = write_tar(tmp_path / 'unpaired.tar', 0, extra=[(clip(0), 'yes')])
    with tarfile.open(unpaired, 'a') as tar:
        info = tarfile.TarInfo('lonely.wav')
        info.size = 4
        tar.addfile(info, io.BytesIO(b'RIFF'))
    for path, expected in ((cut, 'needs 46760 byte(s), the file ends at byte {} (truncated'.format(len(data) // 2)),
                           (unpaired, 'lonely: audio without a .txt')):
        with pytest.raises(tar_shards.ShardError) as error:
            container_index.read_index(path)
        assert str(error.value) == sdb_error(path, alphabet)
        assert expected in str(error.value)
