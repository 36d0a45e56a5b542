"""Transcribe a WAV file through a released client's streaming API as an application does: create a
stream, feed the audio in several chunks, finish it; print the transcript. Run with the client's own
python (deepspeech, deepspeech-tflite or stt, see bin/setup_clients.sh):

    python client_stream.py MODULE MODEL WAV CHUNKS BEAM_WIDTH [SCORER ALPHA BETA]
"""
import importlib
import sys
import wave

import numpy as np


def transcribe(module, model_path, wav, chunks, beam_width, scorer=None, alpha=None, beta=None):
    model = importlib.import_module(module).Model(model_path)
    model.setBeamWidth(int(beam_width))
    if scorer:
        model.enableExternalScorer(scorer)
        model.setScorerAlphaBeta(float(alpha), float(beta))
    with wave.open(wav) as audio_file:
        audio = np.frombuffer(audio_file.readframes(audio_file.getnframes()), np.int16)
    stream = model.createStream()
    for chunk in np.array_split(audio, int(chunks)):
        stream.feedAudioContent(chunk)
    return stream.finishStream()


if __name__ == '__main__':
    print(transcribe(*sys.argv[1:]))
