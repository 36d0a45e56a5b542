"""Exported models transcribe like the checkpoint they come from: streamed as DeepSpeech's client does
in TensorFlow, and in the released clients (deepspeech 0.9.3 for .pb/.pbmm, deepspeech-tflite 0.9.3 and
Coqui stt 1.4.0 for .tflite; bin/setup_clients.sh installs them with a Python 3.9 of the machine, and
where there is none these tests are skipped saying so), one-shot and streamed, with and
without a scorer."""
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import soundfile
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from tests.helpers.suite import (ALPHABET, OVERFIT_N_HIDDEN, ROOT, SMOKE_SINGLE_CSV, client_python,
                                 deepspeech_command, make_scorer, overfit_single_utterance, run_command,
                                 run_deepspeech, settings_from_args, tiny_model_flags)
from deepspeech_training.decoding import greedy_decode
from tensorflow.core.util.memmapped_file_system_pb2 import MemmappedFileSystemDirectory
from deepspeech_training.data.audio import read_audio
from deepspeech_training.util.text import load_alphabet

pytestmark = pytest.mark.slow
WAV = SMOKE_SINGLE_CSV.replace('smoke_test_single.csv', 'good_morning.wav')
N_HIDDEN, N_STEPS, N_CONTEXT = OVERFIT_N_HIDDEN, 16, 9
# client environment -> its command and Python module; the model file each runs
CLIENTS = {'deepspeech': 'deepspeech', 'deepspeech-tflite': 'deepspeech', 'stt': 'stt'}
CLIENT_MODELS = [('deepspeech', 'pb'), ('deepspeech', 'pbmm'), ('deepspeech-tflite', 'tflite'), ('stt', 'tflite')]
# Decoding as the clients do without (greedy) and with the scorer: beam width, alpha, beta.
GREEDY, SCORED = ('1',), ('32', '0.75', '1.85')
SCORER_TEXT = 'good morning\nhello world\nthe cat sat\ngood morning my friend\nhello good world\n' * 3
MMAP_WARNING = 'reading entire model file into memory'


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """The run's overfit model (suite.overfit_single_utterance) exported as .pb, .pbmm, .tflite and .zip,
    its utterance transcribed with --one_shot_infer in the same run."""
    tmp_path = tmp_path_factory.mktemp('export')
    shutil.copytree(str(overfit_single_utterance()[0]), str(tmp_path / 'checkpoints'))
    run = run_deepspeech('--n_hidden', N_HIDDEN, '--checkpoint_dir', tmp_path / 'checkpoints',
                         '--load_evaluate', 'last', '--export_dir', tmp_path / 'export', '--export_zip',
                         '--export_model_name', 'smoke', '--one_shot_infer', WAV, '--beam_width', GREEDY[0])
    return tmp_path / 'export', run.output.strip().splitlines()[-1]


@pytest.fixture(scope='module')
def scored(exported, tmp_path_factory):
    """A scorer knowing the utterance's words, and the transcript with it, in this process as --one_shot_infer
    makes it (evaluate.transcribe with make_decoder's beam search; the flag's own run is the exported
    fixture's)."""
    from tensorflow.python.eager import context
    from deepspeech_training.decoding import make_decoder
    from deepspeech_training.evaluate import transcribe
    lm = tmp_path_factory.mktemp('lm')
    (lm / 'text.txt').write_text(SCORER_TEXT)
    scorer = make_scorer(lm / 'text.txt', lm)
    beam_width, alpha, beta = SCORED
    settings, _ = settings_from_args('--n_hidden', N_HIDDEN, '--checkpoint_dir', exported[0].parent / 'checkpoints',
                                     '--load_evaluate', 'last', '--scorer_path', scorer, '--beam_width', beam_width,
                                     '--lm_alpha', alpha, '--lm_beta', beta)
    with context.graph_mode():
        [transcript] = transcribe(settings, [WAV], make_decoder(settings))
    return scorer, transcript


def stream(run_chunk, mfcc_of_window):
    """DeepSpeech's client loop: one MFCC frame per audio window, context windows with 9 zero frames
    at both ends, n_steps windows per call (the last one zero-padded), the LSTM state carried from
    call to call. run_chunk -> logits [n_steps, classes] and the new state."""
    audio = read_audio(WAV, 16000)
    frames = np.stack([mfcc_of_window(audio[s:s + 512]) for s in range(0, len(audio) - 512 + 1, 320)])
    padded = np.concatenate([np.zeros((N_CONTEXT, 26)), frames, np.zeros((N_CONTEXT, 26))])
    windows = np.stack([padded[t:t + 2 * N_CONTEXT + 1] for t in range(len(frames))]).astype(np.float32)
    state = (np.zeros((1, N_HIDDEN), np.float32), np.zeros((1, N_HIDDEN), np.float32))
    probs = []
    for start in range(0, len(windows), N_STEPS):
        chunk = windows[start:start + N_STEPS]
        length = len(chunk)
        chunk = np.concatenate([chunk, np.zeros((N_STEPS - length,) + chunk.shape[1:], np.float32)])
        logits, state = run_chunk(chunk[np.newaxis], np.array([length], np.int32), state)
        probs.append(logits[:length])
    return greedy_decode(np.concatenate(probs), load_alphabet(ALPHABET))


def test_one_shot_infer_prints_the_transcript_after_overfitting(exported):
    assert exported[1] == 'good morning'


def test_one_shot_infer_stdout_is_the_transcript_alone(exported):
    """`DeepSpeech.py ... --one_shot_infer a.wav > out.txt` keeps the transcript alone: the log lines and the
    progress bar (without a loss: there is no reference) go to stderr."""
    command = deepspeech_command('--n_hidden', N_HIDDEN, '--checkpoint_dir', exported[0].parent / 'checkpoints',
                                 '--load_evaluate', 'last', '--one_shot_infer', WAV, '--beam_width', GREEDY[0],
                                 '--show_progressbar')
    run = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', PYTHONUNBUFFERED='1'), timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout == 'good morning\n'
    assert 'I Loading most recent checkpoint from' in run.stderr and 'Transcribing' in run.stderr
    assert 'Loss' not in run.stderr


def read_graph(path):
    return tfv1.GraphDef.FromString(path.read_bytes())


def test_frozen_graph_streamed_in_chunks_transcribes_like_the_checkpoint(exported):
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(read_graph(exported[0] / 'output_graph.pb'), name='')
    with tfv1.Session(graph=graph) as session:
        def mfcc(window):
            return session.run('mfccs:0', {'input_samples:0': window})[0]

        def run_chunk(windows, length, state):
            logits, c, h = session.run(['logits:0', 'new_state_c:0', 'new_state_h:0'], {
                'input_node:0': windows, 'input_lengths:0': length, 'previous_state_c:0': state[0],
                'previous_state_h:0': state[1]})
            return logits[:, 0], (c, h)

        assert stream(run_chunk, mfcc) == exported[1]
        metadata = session.run(['metadata_version:0', 'metadata_sample_rate:0', 'metadata_feature_win_len:0',
                                'metadata_feature_win_step:0', 'metadata_beam_width:0'])
        assert [m[0] for m in metadata] == [6, 16000, 32, 20, 500]
        assert session.run('metadata_alphabet:0')[0] == load_alphabet(ALPHABET).Serialize()


def test_pbmm_is_the_pb_graph_with_its_weights_in_mapped_regions(exported):
    """TensorFlow's memmapped package: 64-byte aligned regions, the graph last, then the directory and
    its offset; large constants are ImmutableConst nodes whose regions hold the .pb's values."""
    package = (exported[0] / 'output_graph.pbmm').read_bytes()
    directory_offset, = struct.unpack('<Q', package[-8:])
    directory = MemmappedFileSystemDirectory.FromString(package[directory_offset:-8]).element
    regions = {e.name: package[e.offset:e.offset + e.length] for e in directory}
    assert directory[-1].name == 'memmapped_package://.' and all(e.offset % 64 == 0 for e in directory[:-1])
    mapped = tfv1.GraphDef.FromString(regions['memmapped_package://.'])
    constants = {n.name: tf.make_ndarray(n.attr['value'].tensor)
                 for n in read_graph(exported[0] / 'output_graph.pb').node if n.op == 'Const'}
    immutable = [n for n in mapped.node if n.op == 'ImmutableConst']
    assert len(immutable) == len(directory) - 1 >= 5   # at least the dense layers' weights
    for node in immutable:
        value = np.frombuffer(regions[node.attr['memory_region_name'].s.decode()],
                              tf.as_dtype(node.attr['dtype'].type).as_numpy_dtype)
        assert np.array_equal(value.reshape(constants[node.name].shape), constants[node.name])


def test_tflite_model_streamed_in_chunks_transcribes_like_the_checkpoint(exported):
    """As the TF Lite clients run it: no input_lengths, logits [n_steps, classes]."""
    interpreter = tf.lite.Interpreter(model_path=str(exported[0] / 'output_graph.tflite'))
    interpreter.allocate_tensors()
    inputs = {d['name']: d['index'] for d in interpreter.get_input_details()}
    outputs = {d['name']: d['index'] for d in interpreter.get_output_details()}
    assert set(inputs) == {'input_node', 'previous_state_c', 'previous_state_h', 'input_samples'}

    def mfcc(window):
        interpreter.set_tensor(inputs['input_samples'], window)
        interpreter.invoke()
        return interpreter.get_tensor(outputs['mfccs'])[0]

    def run_chunk(windows, _, state):
        for name, value in (('input_node', windows), ('previous_state_c', state[0]), ('previous_state_h', state[1])):
            interpreter.set_tensor(inputs[name], value)
        interpreter.invoke()
        return (interpreter.get_tensor(outputs['logits']),
                (interpreter.get_tensor(outputs['new_state_c']), interpreter.get_tensor(outputs['new_state_h'])))

    assert stream(run_chunk, mfcc) == exported[1]


@pytest.fixture(params=['greedy', 'scorer'])
def decoding(request, exported):
    """Our transcript and the client arguments that decode as we did: beam width[, scorer, alpha, beta]."""
    if request.param == 'greedy':
        return exported[1], list(GREEDY)
    scorer, transcript = request.getfixturevalue('scored')
    return transcript, [SCORED[0], scorer, SCORED[1], SCORED[2]]


def run_client_command(client, model, audio, beam_width, scorer=None, alpha=None, beta=None):
    """The client's command line, as a user runs it; its output."""
    python = client_python(client)
    flags = ['--scorer', scorer, '--lm_alpha', alpha, '--lm_beta', beta] if scorer else []
    return run_command([python, os.path.join(os.path.dirname(python), CLIENTS[client]), '--model', model,
                        '--audio', audio, '--beam_width', beam_width, *flags], timeout=120).output


@pytest.mark.parametrize('client, model', CLIENT_MODELS)
def test_client_command_transcribes_like_one_shot_infer(exported, decoding, client, model):
    """... and a .pbmm is mapped, not read into memory."""
    output = run_client_command(client, exported[0] / ('output_graph.' + model), WAV, *decoding[1])
    assert output.strip().splitlines()[-2] == decoding[0]   # the last line is the inference time
    assert (MMAP_WARNING in output) == (model == 'pb')


@pytest.mark.parametrize('client, model', CLIENT_MODELS)
def test_client_stream_fed_in_chunks_transcribes_like_one_shot_infer(exported, decoding, client, model):
    run = run_command([client_python(client), os.path.join(ROOT, 'tests', 'helpers', 'client_stream.py'),
                       CLIENTS[client], exported[0] / ('output_graph.' + model), WAV, 7, *decoding[1]], timeout=120)
    assert run.output.strip().splitlines()[-1] == decoding[0]


def test_unquantised_tflite_model_runs_in_the_clients(exported, tmp_path):
    """Exported in this process (export.export with DeepSpeech.py's flags read as it reads them; the export
    run's own command line is the exported fixture's)."""
    from tensorflow.python.eager import context
    from deepspeech_training.export import export
    settings, _ = settings_from_args('--n_hidden', N_HIDDEN, '--checkpoint_dir', exported[0].parent / 'checkpoints',
                                     '--load_evaluate', 'last', '--export_dir', tmp_path, '--export_tflite',
                                     '--noexport_quantize')
    with context.graph_mode():
        export(settings)
    unquantised = tmp_path / 'output_graph.tflite'
    # float32 weights instead of int8 ones
    assert unquantised.stat().st_size > 3 * (exported[0] / 'output_graph.tflite').stat().st_size
    for client in ('deepspeech-tflite', 'stt'):
        assert run_client_command(client, unquantised, WAV, *GREEDY).strip().splitlines()[-2] == exported[1]


def test_zip_packs_the_models_and_their_metadata(exported):
    with zipfile.ZipFile(str(exported[0] / 'output_graph.zip')) as archive:
        assert set(archive.namelist()) == {'output_graph.pb', 'output_graph.pbmm', 'output_graph.tflite', 'info.json'}
        info = json.loads(archive.read('info.json'))
    assert info['name'] == 'smoke' and info['sample_rate'] == 16000 and info['n_hidden'] == N_HIDDEN


def test_transcribe_prints_the_transcript_and_writes_its_log(exported, tmp_path):
    wav = tmp_path / 'utterance.wav'
    wav.write_bytes(open(WAV, 'rb').read())
    run = run_command([sys.executable, os.path.join(ROOT, 'transcribe.py'), '--src', wav, '--n_hidden', N_HIDDEN,
                       '--checkpoint_dir', exported[0].parent / 'checkpoints', '--load_evaluate', 'last',
                       '--alphabet_config_path', ALPHABET])
    assert '{}: good morning'.format(wav) in run.output
    # DeepSpeech 0.9's transcribe.py: the extension replaced (talk.wav -> talk.tlog)
    assert not (tmp_path / 'utterance.wav.tlog').exists()
    [piece] = json.loads((tmp_path / 'utterance.tlog').read_text())
    assert piece['transcript'] == 'good morning' and piece['start'] == 0.0


@pytest.mark.fast
def test_transcribe_warns_as_deepspeech_when_it_resamples_and_names_the_log_as_it(tmp_path, capsys):
    from deepspeech_training.transcribe import read_resampled, tlog_path
    audio, rate = soundfile.read(WAV, dtype='int16')
    soundfile.write(str(tmp_path / 'talk.wav'), audio[::2], rate // 2, subtype='PCM_16')
    resampled = read_resampled(str(tmp_path / 'talk.wav'), rate, True)
    assert abs(len(resampled) - len(audio)) <= 2
    assert ('W {}: original sample rate (8000) is different than 16000hz. Resampling might produce erratic speech '
            'recognition.'.format(tmp_path / 'talk.wav')) in capsys.readouterr().err
    read_resampled(WAV, rate, True)
    assert 'original sample rate' not in capsys.readouterr().err
    assert tlog_path(str(tmp_path / 'talk.wav')) == str(tmp_path / 'talk.tlog')


def test_long_audio_is_split_at_the_longest_silences_first():
    from deepspeech_training.transcribe import pieces
    rate = 16000
    tone = np.sin(np.arange(rate) * 0.3).astype(np.float32)          # 1 s of sound
    gaps = [np.zeros(int(seconds * rate), np.float32) for seconds in (0.2, 0.6, 0.2)]
    audio = np.concatenate([tone, gaps[0], tone, gaps[1], tone, gaps[2], tone])
    assert pieces(audio, rate, max_seconds=10, top_db=30) == [(0, len(audio))]
    cuts = [end for _, end in pieces(audio, rate, max_seconds=1.5, top_db=30)][:-1]
    # longest gap (mid 2.5 s) first, then the halves' gaps (mid 1.1 s and 3.9 s)
    assert np.allclose(np.array(cuts) / rate, [1.1, 2.5, 3.9], atol=0.05)
    assert len(pieces(audio, rate, max_seconds=3, top_db=30)) == 2
    covered = pieces(audio, rate, max_seconds=0.5, top_db=30)
    assert covered[0][0] == 0 and covered[-1][1] == len(audio)
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))


@pytest.mark.fast
def test_in_process_export_of_a_fresh_checkpoint_has_the_clients_inputs_outputs_and_metadata(tmp_path, capfd,
                                                                                             monkeypatch):
    """The fast tier's export test (the tests above need a model trained to transcribe, and the clients):
    one epoch of a tiny model in this process (the single-process seam), then .pb, .pbmm, .tflite and .zip;
    the export's log names the checkpoint once and holds back the TF Lite converter's alarming lines."""
    from tensorflow.python.eager import context
    from deepspeech_training.checkpoints import check_writable
    from deepspeech_training.distributed import Single
    from deepspeech_training.export import INPUT_NAMES, METADATA_NAMES, OUTPUT_NAMES, export
    from deepspeech_training.trainer import Trainer
    from deepspeech_training.util import logging
    # no bars: progressbar2 hands sys.stdout back as it found it at import, which is not capfd's
    monkeypatch.setitem(logging._state, 'show_progressbar', False)
    settings, (train_records, _, _, _) = settings_from_args(
        *tiny_model_flags(tmp_path, 16), '--train_files', SMOKE_SINGLE_CSV, '--epochs', 1, '--load_evaluate', 'last',
        '--export_dir', tmp_path / 'export', '--export_zip')
    with context.graph_mode():
        check_writable(settings.checkpoints.save_dir, 'checkpoints')
        Trainer(Single(), settings, train_records, {}).run()
        capfd.readouterr()
        export(settings)
    out, err = capfd.readouterr()
    assert (out + err).count('Loading most recent checkpoint from') == 1, out + err
    assert 'Unsupported data type' not in err and 'Non-Converted Ops' not in err, err
    assert 'TF Lite conversion done' in out
    nodes = {node.name for node in read_graph(tmp_path / 'export' / 'output_graph.pb').node}
    assert set(INPUT_NAMES + OUTPUT_NAMES + METADATA_NAMES) <= nodes
    assert (tmp_path / 'export' / 'output_graph.tflite').read_bytes()[4:8] == b'TFL3'
    with zipfile.ZipFile(str(tmp_path / 'export' / 'output_graph.zip')) as archive:
        assert set(archive.namelist()) == {'output_graph.pb', 'output_graph.pbmm', 'output_graph.tflite', 'info.json'}
        assert json.loads(archive.read('info.json'))['n_hidden'] == 16
