"""Exported models with DeepSpeech 0.9's inference interface, for the released clients.

The graph streams: each call takes `n_steps` context windows (`input_node` [1, n_steps, 19, 26])
with their count (`input_lengths`) and the LSTM state of the previous call (`previous_state_c/h`), and
returns per-frame character probabilities (`logits`, time-major) and the new state. `input_samples`
-> `mfccs` computes one feature frame from one audio window, as DeepSpeech's native client feeds
it. The `metadata_*` constants tell a client the sample rate, window, beam width and alphabet.

Files: <name>.pb, a frozen GraphDef in the ops and dtypes the deepspeech 0.9.3 client's TensorFlow 2.3
runtime carries (BlockLSTM for the LSTM); <name>.pbmm, the same graph with its weights memory-mapped
(export/memmapped.py); <name>.tflite for deepspeech-tflite 0.9.3 and Coqui stt 1.4.0 (export/tflite_compat.py).
"""
import contextlib
import json
import os
import sys
import tempfile
import zipfile

import tensorflow as tf
import tensorflow.compat.v1 as tfv1

from ..checkpoints import open_checkpoint
from ..data.feeding import audio_to_features
from ..distributed import Single
from ..model import create_model, fused_lstm, unrolled_lstm
from ..train_graph import checkpoint_variables
from ..util.atomic import atomic_write
from absl import logging as absl_logging

from ..util.logging import log_info
from .memmapped import memmapped
from .tflite_compat import for_released_clients

# DeepSpeech 0.9's native client accepts graphs of this version.
GRAPH_VERSION = 6
INPUT_NAMES = ['input_node', 'input_lengths', 'previous_state_c', 'previous_state_h', 'input_samples']
OUTPUT_NAMES = ['logits', 'new_state_c', 'new_state_h', 'mfccs']
METADATA_NAMES = ['metadata_version', 'metadata_sample_rate', 'metadata_feature_win_len',
                  'metadata_feature_win_step', 'metadata_beam_width', 'metadata_alphabet']


def create_inference_graph(config, n_steps=16, tflite=False):
    """Placeholders and outputs named as DeepSpeech 0.9's, in the default graph, batch size 1.

    The TF Lite graph is DeepSpeech's too: the TF Lite clients feed no `input_lengths`, so the LSTM
    runs all n_steps (unrolled: TF Lite has no BlockLSTM; a partial last chunk's extra steps only
    change the state after it, which is never used) and `logits` are [n_steps, classes]."""
    samples = tfv1.placeholder(tf.float32, [config.audio_window_samples], 'input_samples')
    tf.identity(audio_to_features(samples, config), name='mfccs')
    windows = tfv1.placeholder(tf.float32, [1, n_steps, config.window_width, config.n_input], 'input_node')
    lengths = None if tflite else tfv1.placeholder(tf.int32, [1], 'input_lengths')
    state = (tfv1.placeholder(tf.float32, [1, config.n_hidden], 'previous_state_c'),
             tfv1.placeholder(tf.float32, [1, config.n_hidden], 'previous_state_h'))
    logits, (new_c, new_h) = create_model(windows, lengths, config, [0.0] * 6, initial_state=state,
                                          lstm=unrolled_lstm if tflite else fused_lstm)
    tf.nn.softmax(tf.squeeze(logits, [1]) if tflite else logits, name='logits')
    tf.identity(new_c, name='new_state_c')
    tf.identity(new_h, name='new_state_h')
    checkpoint_variables(position=False)


def add_metadata(config, beam_width):
    tf.constant([GRAPH_VERSION], name='metadata_version')
    tf.constant([config.sample_rate], name='metadata_sample_rate')
    tf.constant([config.feature_win_len], name='metadata_feature_win_len')
    tf.constant([config.feature_win_step], name='metadata_feature_win_step')
    tf.constant([beam_width], name='metadata_beam_width')
    tf.constant([config.alphabet.Serialize()], name='metadata_alphabet')


def frozen_graph(settings, tflite=False, announce=True):
    """The inference graph with the --load_evaluate checkpoint's values as constants (the checkpoint
    named in the log unless not `announce`)."""
    tfv1.reset_default_graph()
    create_inference_graph(settings.model, n_steps=settings.export.n_steps, tflite=tflite)
    add_metadata(settings.model, settings.export.export_beam_width)
    with open_checkpoint(settings, Single(), announce) as session:
        frozen = tfv1.graph_util.convert_variables_to_constants(
            session, session.graph.as_graph_def(), OUTPUT_NAMES + METADATA_NAMES)
    return tfv1.graph_util.extract_sub_graph(frozen, OUTPUT_NAMES + METADATA_NAMES)


def export(settings):
    """Freeze the --load_evaluate checkpoint into <export_dir>/<export_file_name>.pb and .pbmm (and
    .tflite, .zip), as `settings` (Settings: model, export, checkpoints, decoding) say."""
    options = settings.export
    log_info('Exporting the model...')
    os.makedirs(options.export_dir, exist_ok=True)
    base = os.path.join(options.export_dir, options.export_file_name)
    graph = frozen_graph(settings)
    write_atomically(base + '.pb', graph.SerializeToString())
    write_atomically(base + '.pbmm', memmapped(graph))
    log_info('Exported model to {0}.pb and {0}.pbmm'.format(base))
    files = [base + '.pb', base + '.pbmm']
    if options.export_tflite or options.export_zip:
        write_atomically(base + '.tflite', to_tflite(frozen_graph(settings, tflite=True, announce=False),
                                                     options.export_quantize))
        log_info('Exported TensorFlow Lite model to {}.tflite{}'.format(
            base, ' (quantised)' if options.export_quantize else ''))
        files.append(base + '.tflite')
    if options.export_zip:
        package(base, files, settings)
    log_info('Models exported at {}'.format(options.export_dir))


def to_tflite(frozen, quantize):
    """TF Lite flatbuffer in builtin ops, AudioSpectrogram and Mfcc as the custom ops the DeepSpeech and
    Coqui STT TF Lite runtimes carry (their options: the TensorFlow attributes as a FlexBuffer map);
    weights dynamic-range quantised to 8 bits if `quantize`, as DeepSpeech's releases were."""
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(frozen, name='')
    inputs = [n for n in INPUT_NAMES if n != 'input_lengths']
    with tfv1.Session(graph=graph) as session:
        converter = tfv1.lite.TFLiteConverter.from_session(
            session, [graph.get_tensor_by_name(n + ':0') for n in inputs],
            [graph.get_tensor_by_name(n + ':0') for n in OUTPUT_NAMES + METADATA_NAMES])
        converter.allow_custom_ops = True
        if quantize:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        with converter_log_held():
            converted = converter.convert()
    log_info("TF Lite conversion done: AudioSpectrogram and Mfcc kept as the custom ops the released TF Lite "
             "clients carry; the converter's op statistics and 'Unsupported data type' (the metadata_alphabet "
             "string) are expected and not shown")
    return for_released_clients(converted)


@contextlib.contextmanager
def converter_log_held():
    """The TF Lite converter's log (file descriptor 2: its C++ warnings, an "E ... Unsupported data type" for
    the string constant, the op statistics, absl infos) held in a temporary file: on success it reads like
    failures and is dropped; if the conversion fails it is written to stderr before the error."""
    sys.stderr.flush()
    saved, verbosity, failed = os.dup(2), absl_logging.get_verbosity(), False
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        absl_logging.set_verbosity(absl_logging.WARNING)
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            absl_logging.set_verbosity(verbosity)
            if failed:
                held.seek(0)
                os.write(2, held.read())


def package(base, files, settings):
    """<base>.zip: the model files, the scorer (if any) and info.json with the metadata."""
    options, decoding = settings.export, settings.decoding
    info = {'name': options.export_model_name, 'version': options.export_model_version,
            'author': options.export_author_id, 'contact_info': options.export_contact_info,
            'license': options.export_license, 'language': options.export_language,
            'description': options.export_description, 'sample_rate': settings.model.sample_rate,
            'beam_width': options.export_beam_width, 'n_hidden': settings.model.n_hidden,
            'lm_alpha': decoding.lm_alpha, 'lm_beta': decoding.lm_beta}
    if decoding.scorer_path:
        files = files + [decoding.scorer_path]
    with atomic_write(base + '.zip', 'wb') as out, zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, os.path.basename(path))
        archive.writestr('info.json', json.dumps(info, indent=2))
    log_info('Packed {} with {}'.format(base + '.zip', ', '.join(os.path.basename(f) for f in files)))


def write_atomically(path, data):
    with atomic_write(path, 'wb') as out:
        out.write(data)
