"""Exported models transcribe like the checkpoint they come from, streamed as DeepSpeech's client does."""
import json
import os
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from conftest import ALPHABET, ROOT, SMOKE_SINGLE_CSV, run_command, run_deepspeech, tiny_model_flags
from deepspeech_training.evaluate import greedy_decode
from deepspeech_training.util.audio import read_audio
from deepspeech_training.util.text import load_alphabet

pytestmark = pytest.mark.slow
WAV = SMOKE_SINGLE_CSV.replace('smoke_test_single.csv', 'good_morning.wav')
N_HIDDEN, N_STEPS, N_CONTEXT = 100, 16, 9


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """Overfit one utterance, export .pb, .tflite and .zip, and transcribe it with --one_shot_infer."""
    tmp_path = tmp_path_factory.mktemp('export')
    run = run_deepspeech(*tiny_model_flags(tmp_path, N_HIDDEN), '--train_files', SMOKE_SINGLE_CSV, '--epochs', 200,
                         '--load_evaluate', 'last', '--export_dir', tmp_path / 'export', '--export_zip',
                         '--export_model_name', 'smoke', '--one_shot_infer', WAV, '--beam_width', 1)
    return tmp_path / 'export', run.output.strip().splitlines()[-1]


def stream(run_chunk, mfcc_of_window):
    """DeepSpeech's client loop: one MFCC frame per audio window, context windows with 9 zero frames
    at both ends, n_steps windows per call, the LSTM state carried from call to call."""
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
        probs.append(logits[:length, 0])
    return greedy_decode(np.concatenate(probs), load_alphabet(ALPHABET))


def test_one_shot_infer_prints_the_transcript_after_overfitting(exported):
    assert exported[1] == 'good morning'


def test_frozen_graph_streamed_in_chunks_transcribes_like_the_checkpoint(exported):
    graph_def = tfv1.GraphDef()
    graph_def.ParseFromString((exported[0] / 'output_graph.pb').read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name='')
    with tfv1.Session(graph=graph) as session:
        def mfcc(window):
            return session.run('mfccs:0', {'input_samples:0': window})[0]

        def run_chunk(windows, length, state):
            logits, c, h = session.run(['logits:0', 'new_state_c:0', 'new_state_h:0'], {
                'input_node:0': windows, 'input_lengths:0': length, 'previous_state_c:0': state[0],
                'previous_state_h:0': state[1]})
            return logits, (c, h)

        assert stream(run_chunk, mfcc) == exported[1]
        metadata = session.run(['metadata_version:0', 'metadata_sample_rate:0', 'metadata_feature_win_len:0',
                                'metadata_feature_win_step:0', 'metadata_beam_width:0'])
        assert [m[0] for m in metadata] == [6, 16000, 32, 20, 500]
        assert session.run('metadata_alphabet:0')[0] == load_alphabet(ALPHABET).Serialize()


def test_tflite_model_streamed_in_chunks_transcribes_like_the_checkpoint(exported):
    interpreter = tf.lite.Interpreter(model_path=str(exported[0] / 'output_graph.tflite'))
    interpreter.allocate_tensors()
    inputs = {d['name']: d['index'] for d in interpreter.get_input_details()}
    outputs = {d['name']: d['index'] for d in interpreter.get_output_details()}

    def mfcc(window):
        interpreter.set_tensor(inputs['input_samples'], window)
        interpreter.invoke()
        return interpreter.get_tensor(outputs['mfccs'])[0]

    def run_chunk(windows, length, state):
        for name, value in (('input_node', windows), ('input_lengths', length), ('previous_state_c', state[0]),
                            ('previous_state_h', state[1])):
            interpreter.set_tensor(inputs[name], value)
        interpreter.invoke()
        return (interpreter.get_tensor(outputs['logits']),
                (interpreter.get_tensor(outputs['new_state_c']), interpreter.get_tensor(outputs['new_state_h'])))

    assert stream(run_chunk, mfcc) == exported[1]


def test_zip_packs_the_models_and_their_metadata(exported):
    with zipfile.ZipFile(str(exported[0] / 'output_graph.zip')) as archive:
        assert set(archive.namelist()) == {'output_graph.pb', 'output_graph.tflite', 'info.json'}
        info = json.loads(archive.read('info.json'))
    assert info['name'] == 'smoke' and info['sample_rate'] == 16000 and info['n_hidden'] == N_HIDDEN


def test_transcribe_prints_the_transcript_and_writes_its_log(exported, tmp_path):
    wav = tmp_path / 'utterance.wav'
    wav.write_bytes(open(WAV, 'rb').read())
    run = run_command([sys.executable, os.path.join(ROOT, 'transcribe.py'), '--src', wav, '--n_hidden', N_HIDDEN,
                       '--checkpoint_dir', exported[0].parent / 'checkpoints', '--load_evaluate', 'last',
                       '--alphabet_config_path', ALPHABET])
    assert '{}: good morning'.format(wav) in run.output
    [piece] = json.loads((tmp_path / 'utterance.wav.tlog').read_text())
    assert piece['transcript'] == 'good morning' and piece['start'] == 0.0


def test_long_audio_is_split_at_the_longest_silences_first():
    sys.path.insert(0, ROOT)
    from transcribe import pieces
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
