"""Sample databases (.sdb) as DeepSpeech 0.9 and Coqui STT write them, WebDataset-style tar shards, and
bin/data_set_tool.py: real speech (the bundled smoke-test utterances), real Opus (libopus through
opuslib), real training runs."""
import csv
import http.server
import io
import os
import re
import struct
import sys
import tarfile

import numpy as np
import opuslib
import pytest
import soundfile

from tests.helpers.suite import (CSV_HEADER, ROOT, SMOKE_CSV, SMOKE_DIR, TRACE, make_corpus, run_command,
                                 run_deepspeech, run_horovod, tiny_model_flags, traced_calls)
from deepspeech_training.data import byte_ranges, container_index, sdb
from deepspeech_training.data.audio import RecordAudio
from deepspeech_training.data.samples import DataError, read_sources
from deepspeech_training.data.validation import validate_sets
from deepspeech_training.distributed import Single
from deepspeech_training.flags import parse_size

from bin import data_set_tool
from tests.helpers.http_ranges import serving
from tests.helpers.sdb_cases import corrupt, layout, tool

TOOL = os.path.join(ROOT, 'bin', 'data_set_tool.py')
RATE = 16000
# libopus's lookahead at 16 kHz (2.5 ms + 4 ms delay compensation): decoded audio lags the input by it,
# as DeepSpeech's framing keeps no pre-skip. Asked of libopus itself, not assumed.
OPUS_LAG = opuslib.Encoder(RATE, 1, 'audio').lookahead
# Opus is a lossy waveform codec: at libopus's default bitrate the smoke utterances come back with a
# waveform SNR of 13-18 dB once aligned by OPUS_LAG. A framing bug (a packet lost, duplicated or out of
# place) misaligns everything after it by a 60 ms packet, and speech misaligned by one packet has an SNR
# below 0 dB (-2.7 dB measured on these files, and asserted below); 6 dB lies between the two.
OPUS_MIN_SNR_DB = 6.0


def smoke_rows():
    with open(SMOKE_CSV, newline='') as csv_file:
        return list(csv.DictReader(csv_file))


def smoke_pcm(row):
    samples, rate = soundfile.read(os.path.join(SMOKE_DIR, row['wav_filename']), dtype='int16')
    assert rate == RATE
    return samples


def smoke_wav_bytes(row):
    with open(os.path.join(SMOKE_DIR, row['wav_filename']), 'rb') as wav_file:
        return wav_file.read()


def read_csv_set(path):
    """[(transcript, int16 samples)] of a CSV, in its order."""
    base = os.path.dirname(str(path))
    with open(str(path), newline='') as csv_file:
        return [(row['transcript'], soundfile.read(os.path.join(base, row['wav_filename']), dtype='int16')[0])
                for row in csv.DictReader(csv_file)]


def snr_db(reference, decoded, lag):
    """Waveform SNR of `decoded` against `reference`, `decoded` delayed by `lag` samples."""
    reference = reference.astype(np.float64)
    decoded = decoded.astype(np.float64)
    error = reference[:len(reference) - lag] - decoded[lag:]
    return 10 * np.log10(np.sum(reference[:len(reference) - lag] ** 2) / np.sum(error ** 2))


def hand_built_sdb(samples, mime_type):
    """The documented layout (GUIDE §4), by hand with struct.pack: `samples` is [(audio bytes, transcript)]."""
    meta = ('{"schema": [{"content": "speech", "mime-type": "%s"}, '
            '{"content": "transcript", "mime-type": "text/plain"}]}' % mime_type).encode()
    head = b'SAMPLEDB' + struct.pack('>Q', len(meta)) + meta
    entries, offsets = b'', []
    for audio, transcript in samples:
        text = transcript.encode('utf-8')
        body = struct.pack('>I', len(audio)) + audio + struct.pack('>I', len(text)) + text
        offsets.append(len(head) + 16 + len(entries))
        entries += struct.pack('>I', len(body)) + body
    samples_chunk = struct.pack('>QQ', 8 + len(entries), len(samples)) + entries
    index = struct.pack('>QQ', 8 + 8 * len(offsets), len(offsets)) + b''.join(struct.pack('>Q', o) for o in offsets)
    return head + samples_chunk + index


def hand_framed_opus(pcm):
    """DeepSpeech's Opus framing by hand: PCM length, rate, channels, width, then 60 ms packets each after
    its 2-byte length, the last frame zero-padded; encoder application 'audio', as DeepSpeech's."""
    encoder = opuslib.Encoder(RATE, 1, 'audio')
    frame = RATE * 60 // 1000
    data = pcm.tobytes()
    out = struct.pack('>IIBB', len(data), RATE, 1, 2)
    for start in range(0, len(data), 2 * frame):
        packet = encoder.encode(data[start:start + 2 * frame].ljust(2 * frame, b'\0'), frame)
        out += struct.pack('>H', len(packet)) + packet
    return out


def write_shards(folder):
    """The smoke-test set as two WebDataset shards (<key>.wav + <key>.txt): shard-000.tar holds the first
    two utterances, shard-001.tar the third."""
    rows = smoke_rows()
    for number, group in enumerate([rows[:2], rows[2:]]):
        with tarfile.open(str(folder / 'shard-{:03d}.tar'.format(number)), 'w') as tar:
            for row in group:
                key = os.path.splitext(row['wav_filename'])[0]
                tar.add(os.path.join(SMOKE_DIR, row['wav_filename']), arcname=key + '.wav')
                text = tarfile.TarInfo(key + '.txt')
                text.size = len(row['transcript'].encode())
                tar.addfile(text, io.BytesIO(row['transcript'].encode()))
    return folder


@pytest.fixture(scope='module')
def shards(tmp_path_factory):
    return write_shards(tmp_path_factory.mktemp('shards'))


@pytest.fixture(scope='module')
def wav_sdb(tmp_path_factory):
    path = tmp_path_factory.mktemp('wav_sdb') / 'smoke.sdb'
    assert tool('--audio_type', 'wav', SMOKE_CSV, path) == 0
    return path


def test_csv_to_wav_sdb_to_csv_keeps_transcripts_and_audio_exactly(wav_sdb, tmp_path):
    assert tool(wav_sdb, tmp_path / 'back.csv') == 0
    original, back = read_csv_set(SMOKE_CSV), read_csv_set(tmp_path / 'back.csv')
    assert [t for t, _ in back] == [t for t, _ in original] == ['good morning', 'hello world', 'the cat sat']
    for (_, before), (_, after) in zip(original, back):
        np.testing.assert_array_equal(after, before)
    assert sorted(os.listdir(str(tmp_path))) == ['back', 'back.csv']      # no temporary left


def test_csv_to_opus_sdb_to_csv_is_within_the_codec_tolerance(tmp_path):
    # The real command line, with a pool of two workers (converted_samples: the same pool for either direction,
    # so its order is checked by the transcripts below), then back in this process.
    run_command([sys.executable, TOOL, '--workers', 2, SMOKE_CSV, tmp_path / 'smoke.sdb'])
    assert tool(tmp_path / 'smoke.sdb', tmp_path / 'back.csv') == 0
    original, back = read_csv_set(SMOKE_CSV), read_csv_set(tmp_path / 'back.csv')
    assert [t for t, _ in back] == [t for t, _ in original]
    assert OPUS_LAG == RATE * 65 // 10000     # 6.5 ms: libopus's lookahead at 16 kHz
    for (_, before), (_, after) in zip(original, back):
        assert len(after) == len(before)      # the framing's PCM length cuts the padded last frame
        assert snr_db(before, after, OPUS_LAG) > OPUS_MIN_SNR_DB
        assert snr_db(before, after, OPUS_LAG + RATE * 60 // 1000) < 0 < OPUS_MIN_SNR_DB   # one packet off


def test_hand_built_sdb_loads_and_our_writer_makes_the_same_bytes(wav_sdb, tmp_path, alphabet):
    rows = smoke_rows()
    wav_files = [smoke_wav_bytes(r) for r in rows]
    by_hand = hand_built_sdb(list(zip(wav_files, [r['transcript'] for r in rows])), sdb.WAV)
    assert wav_sdb.read_bytes() == by_hand
    opus_by_hand = hand_built_sdb([(hand_framed_opus(smoke_pcm(r)), r['transcript']) for r in rows], sdb.OPUS)
    assert tool(SMOKE_CSV, tmp_path / 'ours.sdb') == 0
    assert (tmp_path / 'ours.sdb').read_bytes() == opus_by_hand

    path = tmp_path / 'by_hand.sdb'
    path.write_bytes(by_hand)
    records = read_sources([str(path)], alphabet)
    assert [(r.transcript, r.row, r.filesize) for r in records] == [
        (row['transcript'], i, int(row['wav_filesize'])) for i, row in enumerate(rows)]
    reader = RecordAudio(parse_size('1MB'))
    for record, row in zip(records, rows):
        expected, _ = soundfile.read(os.path.join(SMOKE_DIR, row['wav_filename']), dtype='float32')
        np.testing.assert_array_equal(reader.samples(record, RATE), expected)
    reader.close()


@pytest.mark.parametrize('case', ['magic', 'cut in the samples', 'cut in the index', 'offset outside the samples',
                                  'entry length short', 'entry length long', 'count'])
def test_corrupt_sdb_is_an_error_naming_file_and_offset(wav_sdb, tmp_path, alphabet, case):
    data, offset = corrupt(wav_sdb.read_bytes(), case)
    path = tmp_path / 'bad.sdb'
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=re.escape('{}: at byte {}: '.format(path, offset))):
        read_sources([str(path)], alphabet)


def test_corrupt_audio_in_an_sdb_fails_validation_naming_the_sample(wav_sdb, tmp_path, alphabet):
    data = bytearray(wav_sdb.read_bytes())
    offset = layout(data)[2][1]
    data[offset + 8:offset + 12] = b'JUNK'          # the second sample's RIFF tag
    path = tmp_path / 'bad_audio.sdb'
    path.write_bytes(bytes(data))
    records = read_sources([str(path)], alphabet)
    with pytest.raises(DataError) as error:
        validate_sets([('train', records)], data_set_tool.check_config(alphabet, parse_size('1MB')), Single())
    assert '1 problem(s)' in str(error.value)
    assert '{}: sample 1 (at byte {}): its audio is not a readable WAV file'.format(path, offset) in str(error.value)


def test_bad_sdb_shard_or_sdb_named_csv_stop_training_before_anything_is_written(wav_sdb, shards, tmp_path):
    truncated = tmp_path / 'truncated.sdb'
    truncated.write_bytes(wav_sdb.read_bytes()[:-4])
    misnamed = tmp_path / 'corpus.csv'
    misnamed.write_bytes(wav_sdb.read_bytes())
    shard = (shards / 'shard-000.tar').read_bytes()
    cut_shard = tmp_path / 'cut.tar'
    cut_shard.write_bytes(shard[:len(shard) // 2])
    run = run_deepspeech(*tiny_model_flags(tmp_path), '--train_files',
                         '{},{},{}'.format(truncated, misnamed, cut_shard), check=False)
    assert run.returncode == 1
    assert '{}: at byte {}: the index of 3 sample(s) needs'.format(truncated, layout(wav_sdb.read_bytes())[1] + 16) \
        in run.output
    assert '{}: not a CSV file: starts with SAMPLEDB: a DeepSpeech sample database; name it .sdb'.format(misnamed) \
        in run.output
    assert re.search(r'{}: at byte \d+: hello_world.wav needs 46760 byte\(s\), the file ends at byte {} \(truncated'
                     .format(re.escape(str(cut_shard)), len(shard) // 2), run.output)
    assert 'UTF-8' not in run.output and 'iconv' not in run.output
    assert not (tmp_path / 'checkpoints').exists() and not (tmp_path / 'summaries').exists()


@pytest.fixture(scope='module')
def trained(wav_sdb, shards, tmp_path_factory):
    """One step of training (all three utterances in one batch) and a test, from the CSV, from the
    lossless .sdb made of it, and from its tar shards on an HTTP server (a brace pattern of URLs), tested on
    the shards on disk (a glob). Training and testing read a set through the same create_dataset
    (data/plans.py), so the shards on disk are read by that test, the shards' training by the HTTP run."""
    outputs = {}
    with serving(shards) as url:
        for name, source, test_source in (('csv', SMOKE_CSV, SMOKE_CSV), ('sdb', str(wav_sdb), str(wav_sdb)),
                                          ('http', url + '/shard-{000..001}.tar', str(shards / 'shard-*.tar'))):
            tmp_path = tmp_path_factory.mktemp(name)
            outputs[name] = run_deepspeech(*tiny_model_flags(tmp_path), '--train_files', source, '--train_batch_size',
                                           3, '--epochs', 1, '--test_files', test_source, '--read_buffer',
                                           '64KB').output
    return outputs


def reported(pattern, output):
    return re.search(pattern, output).group(1)


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['sdb', 'http'])
def test_training_from_sdb_or_shards_gives_the_first_step_loss_of_their_csv(trained, kind):
    step_loss = r'Finished training epoch 0 - loss: ([0-9.]+)'
    assert reported(step_loss, trained[kind]) == reported(step_loss, trained['csv'])


@pytest.mark.slow
def test_test_files_sdb_or_shards_report_each_sample(trained, wav_sdb, shards):
    test_loss = r'Test on \S+ - WER: [0-9.]+, CER: [0-9.]+, loss: ([0-9.]+)'
    assert 'Test on {} - WER'.format(wav_sdb) in trained['sdb']
    assert 'Test on {} - WER'.format(shards / 'shard-*.tar') in trained['http']
    assert reported(test_loss, trained['sdb']) == reported(test_loss, trained['http']) == \
        reported(test_loss, trained['csv'])
    assert ' - wav: file://{}:0'.format(wav_sdb) in trained['sdb']


@pytest.mark.slow
def test_two_ranks_train_on_sdb_and_csv_mixed_and_test_on_sdb(wav_sdb, tmp_path):
    opus_sdb = tmp_path / 'smoke_opus.sdb'
    assert tool(SMOKE_CSV, opus_sdb) == 0
    run = run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', '{},{}'.format(opus_sdb, SMOKE_CSV),
                      '--dev_files', wav_sdb, '--test_files', opus_sdb, '--epochs', 1)
    assert 'Checked the audio of 12 sample(s) (9 distinct)' in run.output
    assert 'Finished training epoch 0' in run.output and 'Test on {} - WER'.format(opus_sdb) in run.output


READ_CALL = re.compile(r'^(\d+)\s+(?:(p?readv?|pread64|preadv2?)\((\d+)<([^>]*)>.*?|<\.\.\. (\w+) resumed>.*?)'
                       r'(?:<unfinished \.\.\.>|\)\s+=\s+(-?\d+).*)$')


def bytes_read(calls, path):
    """Bytes the traced reads (strace -y) returned from `path`, following calls a thread switch split."""
    total, pending = 0, {}
    for line in calls:
        match = READ_CALL.match(line)
        if not match:
            continue
        pid, _, _, file, resumed, result = match.groups()
        if resumed:
            file = pending.pop(pid, None)
        elif result is None:
            pending[pid] = file
            continue
        if file == str(path) and result and int(result) > 0:
            total += int(result)
    return total


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['sdb', 'tar'])
def test_each_of_two_ranks_reads_at_most_its_share_of_an_sdb_or_shard_and_one_batch(tmp_path, kind):
    """The records are cut per rank before any audio is read: over a run of one epoch each rank reads its
    half of the database (or tar shard) plus at most one batch, and at start the same few bytes whatever
    the number of samples: an .sdb's index chunk, and the bytes that identify the container (the
    container index beside it holds the lengths, transcripts and audio headers)."""
    corpus = make_corpus(tmp_path / 'corpus', 16, 5)
    container = tmp_path / 'train.{}'.format(kind)
    assert tool('--audio_type', 'wav', corpus / 'train.csv', container) == 0
    trace_dir = tmp_path / 'traces'
    trace_dir.mkdir()
    batch = 2
    run_horovod(2, *tiny_model_flags(tmp_path), '--train_files', container, '--train_batch_size', batch,
                '--epochs', 1, wrapper=[TRACE], timeout=300,
                env={'TRACE_DIR': str(trace_dir), 'TRACE_CALLS': 'read,pread64,readv,preadv,preadv2',
                     'TRACE_OPTIONS': '-y -s 0'})
    index = container_index.read_index(str(container))
    largest = sorted(index.lengths, reverse=True)
    fingerprint = 2 * container_index.EDGE_BYTES + container_index.PROBES * container_index.PROBE_BYTES
    bound = container.stat().st_size / 2 + sum(largest[:batch]) + fingerprint + 8 * len(largest)
    read = [bytes_read(traced_calls(trace_dir, rank), container) for rank in range(2)]
    # each rank trains on 3 batches of 2 of the 12 samples of train.csv: more than a quarter of the audio
    audio = sum(index.lengths)
    assert all(audio / 4 < r <= bound for r in read), (read, bound)


class RecordingFile(byte_ranges.LocalFile):
    """A LocalFile that lists the reads made of it."""

    def __init__(self, path):
        super().__init__(path)
        self.reads = []

    def pread(self, offset, size):
        self.reads.append((offset, size))
        return super().pread(offset, size)


def test_a_batch_is_read_in_ascending_offsets_neighbours_merged_up_to_the_read_buffer(wav_sdb):
    with sdb.Database(str(wav_sdb)) as database:
        entries = [(offset, database.entry(offset, audio_bytes=0).size) for offset in database.offsets]
    (first, n0), (second, n1), (third, n2) = entries       # side by side in the file
    source = RecordingFile(str(wav_sdb))
    found = byte_ranges.read_ranges(source, [(third, n2), (first, n0), (second, n1)], 1 << 20)
    assert source.reads == [(first, n0 + n1 + n2)]
    assert found == {offset: wav_sdb.read_bytes()[offset:offset + n] for offset, n in entries}
    source.reads = []
    byte_ranges.read_ranges(source, [(third, n2), (first, n0)], 1 << 20)     # not neighbours: two reads
    assert source.reads == [(first, n0), (third, n2)]
    source.reads = []
    byte_ranges.read_ranges(source, entries, n0 + n1)                      # the buffer bounds a read
    assert source.reads == [(first, n0 + n1), (third, n2)]
    source.close()


def test_a_bad_sample_stops_the_tool_naming_source_and_row_and_writes_nothing(tmp_path, capsys):
    rows = smoke_rows()
    samples, _ = soundfile.read(os.path.join(SMOKE_DIR, rows[2]['wav_filename']), dtype='int16')
    soundfile.write(str(tmp_path / 'at_22k.wav'), samples, 22050)   # trains (resampled), but Opus has no 22.05 kHz
    (tmp_path / 'not_audio.wav').write_text('not audio')
    lines = ['{},{},{}'.format(os.path.join(SMOKE_DIR, r['wav_filename']), r['wav_filesize'], r['transcript'])
             for r in rows[:2]]
    for name, bad in (('not_audio', 'not_audio.wav,9,fine'), ('at_22k', 'at_22k.wav,1,fine')):
        (tmp_path / (name + '.csv')).write_text('\n'.join([CSV_HEADER] + lines + [bad]))
    capsys.readouterr()
    assert tool(tmp_path / 'not_audio.csv', tmp_path / 'out.sdb') == 1
    assert '{}: line 4: {}: not a readable audio file'.format(tmp_path / 'not_audio.csv', tmp_path / 'not_audio.wav') \
        in ''.join(capsys.readouterr())
    assert tool(tmp_path / 'at_22k.csv', tmp_path / 'out.sdb') == 1
    assert '{}: line 4: {}: cannot convert: 22050 Hz: Opus encodes only'.format(
        tmp_path / 'at_22k.csv', tmp_path / 'at_22k.wav') in ''.join(capsys.readouterr())
    assert tool('--audio_type', 'wav', tmp_path / 'at_22k.csv', tmp_path / 'out.sdb') == 0    # lossless: kept as is
    assert sorted(os.listdir(str(tmp_path))) == ['at_22k.csv', 'at_22k.wav', 'not_audio.csv', 'not_audio.wav',
                                                 'out.sdb', 'out.sdb.index']


def test_shards_by_pattern_load_with_their_audio_and_convert(shards, tmp_path, alphabet):
    records = read_sources([str(shards / 'shard-{000..001}.tar')], alphabet)
    assert [(r.transcript, r.source) for r in records] == [
        ('good morning', str(shards / 'shard-000.tar')), ('hello world', str(shards / 'shard-000.tar')),
        ('the cat sat', str(shards / 'shard-001.tar'))]
    reader = RecordAudio(parse_size('1MB'))
    for record, row in zip(records, smoke_rows()):
        expected, _ = soundfile.read(os.path.join(SMOKE_DIR, row['wav_filename']), dtype='float32')
        np.testing.assert_array_equal(reader.samples(record, RATE), expected)
    reader.close()
    assert tool('--audio_type', 'wav', shards / 'shard-*.tar', tmp_path / 'from_shards.sdb') == 0
    assert (tmp_path / 'from_shards.sdb').read_bytes() == hand_built_sdb(
        [(smoke_wav_bytes(r), r['transcript']) for r in smoke_rows()], sdb.WAV)


def test_shards_over_http_load_as_on_disk_and_a_server_without_ranges_or_the_file_is_named(shards, alphabet):
    local = read_sources([str(shards / 'shard-{000..001}.tar')], alphabet)
    reader = RecordAudio(parse_size('1MB'))
    with serving(shards) as url:
        remote = read_sources([url + '/shard-{000..001}.tar'], alphabet)
        assert [(r.transcript, r.offset, r.length) for r in remote] == [(r.transcript, r.offset, r.length)
                                                                          for r in local]
        reader.load(remote)
        assert [reader.raw(r) for r in remote] == [reader.raw(r) for r in local]
        with pytest.raises(DataError, match=re.escape('{}/missing.tar: HTTP error 404'.format(url))):
            read_sources([url + '/missing.tar'], alphabet)
        with pytest.raises(DataError, match=re.escape('{}/train.csv: only sample databases (.sdb) and tar shards'
                                                      .format(url))):
            read_sources([url + '/train.csv'], alphabet)
    reader.close()
    with serving(shards, http.server.SimpleHTTPRequestHandler) as url:
        with pytest.raises(DataError, match=re.escape('{}/shard-000.tar: the server answered a Range request with '
                                                      'status 200'.format(url))):
            read_sources([url + '/shard-000.tar'], alphabet)


def test_csv_to_tar_shards_writes_webdataset_pairs_that_load_as_the_csv(tmp_path, alphabet):
    assert tool(SMOKE_CSV, tmp_path / 'smoke-{000..001}.tar') == 0
    assert tool(SMOKE_CSV, tmp_path / 'one.tar') == 0
    assert sorted(os.listdir(str(tmp_path))) == ['one.tar', 'one.tar.index', 'smoke-000.tar', 'smoke-000.tar.index',
                                                 'smoke-001.tar', 'smoke-001.tar.index']
    with tarfile.open(str(tmp_path / 'smoke-000.tar')) as tar:
        assert tar.getnames() == ['sample00000000.wav', 'sample00000000.txt', 'sample00000001.wav',
                                  'sample00000001.txt']
    reader = RecordAudio(parse_size('1MB'))
    expected = sorted((r['transcript'], smoke_wav_bytes(r)) for r in smoke_rows())
    for source in (str(tmp_path / 'smoke-{000..001}.tar'), str(tmp_path / 'one.tar')):
        assert sorted((r.transcript, reader.raw(r)[1]) for r in read_sources([source], alphabet)) == expected
    reader.close()


def test_a_failed_tar_conversion_leaves_no_shard(tmp_path, capsys):
    """The third sample's Opus packets are cut (its header is fine, so it passes the check at start): the
    conversion fails after the first shard got its samples, and no shard, whole or partial, is left."""
    source = tmp_path / 'opus.sdb'
    assert tool(SMOKE_CSV, source) == 0
    data = bytearray(source.read_bytes())
    offset = layout(data)[2][2]
    struct.pack_into('>H', data, offset + 8 + 10, 0xffff)  # entry and audio lengths, Opus header, 1st packet
    source.write_bytes(bytes(data))
    capsys.readouterr()
    assert tool(source, tmp_path / 'out-{000..001}.tar') == 1
    assert '{}: sample 2 (at byte {}): cannot convert'.format(source, offset) in ''.join(capsys.readouterr())
    assert tool(SMOKE_CSV, tmp_path / 'out-*.tar') == 1
    assert 'a target names its shards by a range such as' in ''.join(capsys.readouterr())
    assert sorted(os.listdir(str(tmp_path))) == ['opus.sdb', 'opus.sdb.index']


def test_a_shard_sample_without_transcript_is_named(tmp_path, alphabet):
    with tarfile.open(str(tmp_path / 'odd.tar'), 'w') as tar:
        tar.add(os.path.join(SMOKE_DIR, 'good_morning.wav'), arcname='a/good_morning.wav')
    with pytest.raises(DataError, match=re.escape('odd.tar: a/good_morning: audio without a .txt')):
        read_sources([str(tmp_path / 'odd.tar')], alphabet)


def test_unlabeled_sets_carry_audio_only(tmp_path, alphabet):
    assert tool('--unlabeled', '--audio_type', 'wav', SMOKE_CSV, tmp_path / 'noise.sdb') == 0
    assert b'"transcript"' not in (tmp_path / 'noise.sdb').read_bytes()[:200]
    with pytest.raises(DataError, match='without transcripts'):
        read_sources([str(tmp_path / 'noise.sdb')], alphabet)
    assert tool('--unlabeled', tmp_path / 'noise.sdb', tmp_path / 'noise.csv') == 0
    assert (tmp_path / 'noise.csv').read_text().splitlines()[0] == 'wav_filename,wav_filesize'


def test_read_buffer_sizes_parse_as_deepspeech_does():
    assert parse_size('1MB') == parse_size('1m') == 1 << 20
    assert parse_size('512KB') == 512 << 10 and parse_size('2GB') == 2 << 30 and parse_size('4096') == 4096
    with pytest.raises(ValueError):
        parse_size('1.5MB')
