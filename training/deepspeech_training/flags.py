"""Command-line flags: DeepSpeech 0.9 names and defaults, validated before any work starts.

absl already rejects unknown flags and malformed values; the validators registered here reject
values and combinations that would only fail (or silently do nothing) hours into a run.
"""
import functools
import os
import re

from absl import flags

from .data.byte_ranges import is_url
from .data.tar_shards import expand_all
from .model import LSTM_IMPLS

FLAGS = flags.FLAGS

DEFAULT_DATA_HOME = os.path.join(os.environ.get('XDG_DATA_HOME', os.path.expanduser('~/.local/share')),
                                 'deepspeech')
LOAD_METHODS = ['auto', 'best', 'last', 'init']
DEFAULT_CACHE_HOME = os.path.join(os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache')),
                                  'deepspeech-training')
DEFAULT_ALPHABET = 'data/alphabet.txt'
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
SIZE_UNITS = {'': 1, 'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40}


def alphabet_path(path):
    """The alphabet file `path` names. The default, data/alphabet.txt, is the checkout's where it exists
    (relative to the working directory, as in DeepSpeech 0.9), else the installed package's own copy, so
    an installed deepspeech-train needs no alphabet flag in any directory."""
    if path == DEFAULT_ALPHABET and not os.path.isfile(path):
        return os.path.join(PACKAGE_DIR, DEFAULT_ALPHABET)
    return path


def list_in_short_help(main_module):
    """Make `--helpshort` and `--help` of the tool started as `main_module` (sys.argv[0], which absl's short
    help lists the key flags of) list this package's flags, as DeepSpeech 0.9's did, instead of none and
    "Try --helpfull" (absl's other modules' flags stay for --helpfull)."""
    for module, module_flags in FLAGS.flags_by_module_dict().items():
        if module.split('.')[0] == __name__.split('.')[0]:
            for flag in module_flags:
                FLAGS.register_key_flag_for_module(main_module, flag)


class _Definitions:
    """absl's DEFINE_* functions, defining into `flag_values` instead of the global FLAGS."""

    def __init__(self, flag_values):
        self.flag_values = flag_values

    def __getattr__(self, name):
        return functools.partial(getattr(flags, name), flag_values=self.flag_values)


def create_flags(flag_values=FLAGS):
    """Define every flag in `flag_values`: the global FLAGS of the command line, or a FlagValues of its own
    (config.settings_from_args). Idempotent, so tests may import several entry points."""
    if 'train_files' in flag_values:
        return
    f = _Definitions(flag_values)

    # Data
    f.DEFINE_string('train_files', '', 'comma-separated list of CSV files, sample databases (.sdb) and tar shards '
                    '(paths, or patterns like shards-{000..009}.tar) to train on (merged)')
    f.DEFINE_string('dev_files', '', 'comma-separated list of CSV, .sdb and .tar files to validate on after each epoch '
                    '(reported separately; their sample-weighted mean decides best_dev / early stop / plateau)')
    f.DEFINE_string('test_files', '', 'comma-separated list of CSV, .sdb and .tar files to test on (reported '
                    'separately)')
    f.DEFINE_string('metrics_files', '', 'comma-separated list of CSV, .sdb and .tar files whose loss is reported '
                    'separately after each validation (with --dev_batch_size, --limit_dev and --reverse_dev), '
                    'without deciding best_dev, early stop or plateaus')
    f.DEFINE_string('read_buffer', '1MB', 'largest single read of sample databases (.sdb) and tar shards (a batch\'s '
                    'samples side by side are read in one), e.g. 512KB, 1MB, 1GB (as DeepSpeech 0.9: binary units, '
                    'plain digits are bytes)')
    f.DEFINE_string('data_cache_dir', os.path.join(DEFAULT_CACHE_HOME, 'data'),
                    'folder for what the input check learns and a next run of the same data reuses: the audio '
                    'headers of each CSV\'s files (known unchanged by size, mtime, ctime and inode) and the indexes '
                    'of .sdb files and tar shards that have no .index file beside them; "" for none')
    f.DEFINE_boolean('normalize_sample_rate', True, 'resample audio whose rate differs from --audio_sample_rate')
    f.DEFINE_integer('limit_train', 0, 'use at most this many train samples (0 = all)', lower_bound=0)
    f.DEFINE_integer('limit_dev', 0, 'use at most this many dev samples per dev set (0 = all)', lower_bound=0)
    f.DEFINE_integer('limit_test', 0, 'use at most this many test samples per test set (0 = all)', lower_bound=0)
    f.DEFINE_boolean('reverse_train', False, 'train longest samples first')
    f.DEFINE_boolean('reverse_dev', False, 'validate longest samples first')
    f.DEFINE_boolean('reverse_test', False, 'test longest samples first')
    f.DEFINE_boolean('shuffle_batches', False, 'shuffle the order of (length-sorted) train batches each epoch, '
                     'seeded by --random_seed and the epoch')

    # Features
    f.DEFINE_string('feature_cache', '', 'keep the training samples\' features in this file (PATH.rankN per '
                    'rank under Horovod, PATH.<host>.local<N> under --horovod_elastic) and read them from there '
                    'in later epochs instead of the audio; recomputed when the feature flags, --augment or the '
                    'samples change')
    f.DEFINE_integer('cache_for_epochs', 0, 'recompute the feature cache every this many epochs (0: never), '
                     'e.g. to draw new augmentations', lower_bound=0)
    f.DEFINE_integer('audio_sample_rate', 16000, 'sample rate the features are computed at', lower_bound=1)
    f.DEFINE_integer('feature_win_len', 32, 'feature window length in milliseconds', lower_bound=1)
    f.DEFINE_integer('feature_win_step', 20, 'feature window step in milliseconds', lower_bound=1)

    # Training
    f.DEFINE_integer('epochs', 75, 'how many epochs (complete runs through the train files) to train for',
                     lower_bound=0)
    f.DEFINE_integer('total_epochs', 0, 'train until the checkpoint has this many epochs in all, instead of '
                     '--epochs more: the same command run again (a requeued Slurm job) ends where one '
                     'uninterrupted run would (0: off)', lower_bound=0)
    f.DEFINE_integer('train_batch_size', 1, 'samples per training step', lower_bound=1)
    f.DEFINE_integer('dev_batch_size', 1, 'samples per validation step', lower_bound=1)
    f.DEFINE_integer('test_batch_size', 1, 'samples per test step', lower_bound=1)
    f.DEFINE_float('learning_rate', 0.001, 'Adam learning rate', lower_bound=0.0)
    f.DEFINE_enum('lr_schedule', 'constant', ['constant', 'cosine'], 'the learning rate over the run: constant (as '
                  'DeepSpeech 0.9), or cosine: from --learning_rate down to 0 at the end of the run\'s last epoch '
                  '(--total_epochs, else --epochs from where the run starts), after any warm-up')
    f.DEFINE_boolean('force_initialize_learning_rate', False, 'start from --learning_rate even when the '
                     'checkpoint holds a (plateau-reduced) rate')
    f.DEFINE_float('beta1', 0.9, 'Adam beta 1')
    f.DEFINE_float('beta2', 0.999, 'Adam beta 2')
    f.DEFINE_float('epsilon', 1e-8, 'Adam epsilon')
    f.DEFINE_float('ema_decay', 0.0, 'keep an exponential moving average of the weights with this decay per update '
                   '(e.g. 0.999), saved at each train checkpoint as <checkpoint dir>/ema/best_dev-<step>, a checkpoint '
                   'folder test and export load (0: off)')
    f.DEFINE_float('dropout_rate', 0.05, 'dropout rate of layer 1 (and the default of the other -1 rates)')
    f.DEFINE_float('dropout_rate2', -1.0, 'dropout rate of layer 2 (-1: --dropout_rate)')
    f.DEFINE_float('dropout_rate3', -1.0, 'dropout rate of layer 3 (-1: --dropout_rate)')
    f.DEFINE_float('dropout_rate4', 0.0, 'dropout rate of layer 4, the LSTM output (-1: --dropout_rate)')
    f.DEFINE_float('dropout_rate5', 0.0, 'dropout rate of layer 5 (-1: --dropout_rate)')
    f.DEFINE_float('dropout_rate6', -1.0, 'dropout rate of layer 5 as DeepSpeech 0.9 applied it, i.e. on the '
                   'input of layer 6; combined with --dropout_rate5 (-1: --dropout_rate)')
    f.DEFINE_float('relu_clip', 20.0, 'ReLU clipping value of the dense layers', lower_bound=0.0)
    f.DEFINE_boolean('layer_norm', False, 'layer-normalise the output of each dense layer but the last (layers 1-3 and '
                     '5, as DeepSpeech 0.9; variables <layer>/LayerNorm/beta and /gamma); give it again to '
                     'evaluate, export or continue such a checkpoint')
    f.DEFINE_integer('random_seed', 4568, 'seed of the graph and of the batch shuffling')

    # Early stopping and plateau
    f.DEFINE_boolean('early_stop', False, 'stop when the dev loss has not improved for --es_epochs epochs')
    f.DEFINE_integer('es_epochs', 25, 'epochs without dev improvement before an early stop', lower_bound=1)
    f.DEFINE_float('es_min_delta', 0.05, 'smallest dev loss decrease that counts as an improvement',
                   lower_bound=0.0)
    f.DEFINE_boolean('reduce_lr_on_plateau', False, 'reload best_dev and reduce the learning rate when the dev '
                     'loss has not improved for --plateau_epochs epochs')
    f.DEFINE_integer('plateau_epochs', 10, 'epochs without dev improvement before a plateau', lower_bound=1)
    f.DEFINE_float('plateau_reduction', 0.1, 'factor the learning rate is multiplied by on a plateau',
                   lower_bound=0.0, upper_bound=1.0)

    # Checkpoints
    f.DEFINE_string('checkpoint_dir', '', 'load and save checkpoints here (default: '
                    + os.path.join(DEFAULT_DATA_HOME, 'checkpoints') + ')')
    f.DEFINE_string('load_checkpoint_dir', '', 'load checkpoints from here (default: --checkpoint_dir)')
    f.DEFINE_string('save_checkpoint_dir', '', 'save checkpoints here (default: --checkpoint_dir)')
    f.DEFINE_integer('checkpoint_secs', 600, 'also save a train checkpoint every this many seconds (0 or less: '
                     'only at the end of each epoch, as DeepSpeech 0.9)')
    f.DEFINE_integer('max_to_keep', 5, 'how many train checkpoints to keep', lower_bound=1)
    f.DEFINE_enum('load_train', 'auto', LOAD_METHODS, 'what to start training from: "last" train checkpoint, '
                  '"best" dev checkpoint, "init" fresh weights, "auto" = last, else best, else init')
    f.DEFINE_enum('load_evaluate', 'auto', LOAD_METHODS[:3] + ['ema'], 'what to test/export/transcribe: "best", '
                  '"last", "ema" (--ema_decay\'s weight average, <checkpoint_dir>/ema), or "auto" = with --ema_decay '
                  'the weight average, else best, else last')
    f.DEFINE_integer('drop_source_layers', 0, 'transfer learning: re-initialise this many of the last layers '
                     '(1 = layer_6, 2 = layers 5 and 6, ...) instead of loading them', lower_bound=0, upper_bound=5)
    f.DEFINE_boolean('load_cudnn', False, 'load a checkpoint trained with cuDNN (as the DeepSpeech 0.9 and Coqui STT '
                     'release checkpoints), which has no Adam moments for the LSTM: start those at zero and load '
                     'everything else')

    # Model
    f.DEFINE_integer('n_hidden', 2048, 'width of the hidden layers and LSTM', lower_bound=1)
    f.DEFINE_string('alphabet_config_path', DEFAULT_ALPHABET, 'alphabet file: one label per line (the default: '
                    'English, the installed package\'s copy when there is no data/alphabet.txt here)')
    f.DEFINE_boolean('bytes_output_mode', False, 'predict UTF-8 bytes instead of alphabet labels')

    # Decoding and reports
    f.DEFINE_integer('report_count', 5, 'how many best, median and worst test samples to print', lower_bound=0)
    f.DEFINE_string('test_output_file', '', 'write per-sample test results (src, res, loss, wer, cer) as JSON')
    f.DEFINE_string('scorer_path', '', 'KenLM scorer package (bin/generate_scorer_package.py) for beam search')
    f.DEFINE_alias('scorer', 'scorer_path')
    f.DEFINE_integer('beam_width', 1024, 'beam width of the CTC beam search (1: greedy best path)', lower_bound=1)
    f.DEFINE_float('lm_alpha', 0.931289039105002, 'language model weight')
    f.DEFINE_float('lm_beta', 1.1834137581510284, 'word insertion bonus')
    f.DEFINE_float('cutoff_prob', 1.0, 'beam search: only consider the most likely characters whose cumulative '
                   'probability reaches this (1.0: no pruning)', lower_bound=0.0, upper_bound=1.0)
    f.DEFINE_integer('cutoff_top_n', 300, 'beam search: only consider this many most likely characters',
                     lower_bound=1)
    f.DEFINE_string('one_shot_infer', '', 'transcribe this WAV file with the --load_evaluate checkpoint and exit; '
                    'stdout is the transcript alone, the log goes to stderr')

    # Export
    f.DEFINE_string('export_dir', '', 'write a frozen inference graph (DeepSpeech 0.9 interface) here')
    f.DEFINE_boolean('export_tflite', False, 'also write a TensorFlow Lite model')
    f.DEFINE_boolean('export_quantize', True, "quantise the TensorFlow Lite model's weights to 8 bits (dynamic range)")
    f.DEFINE_boolean('export_zip', False, 'also pack the exported model, scorer and info.json into a zip')
    f.DEFINE_string('export_file_name', 'output_graph', 'base name of the exported model files')
    f.DEFINE_integer('export_beam_width', 500, 'default beam width stored in the exported model', lower_bound=1)
    f.DEFINE_integer('n_steps', 16, 'time steps per inference call of the exported (streaming) model',
                     lower_bound=1)
    f.DEFINE_string('export_author_id', 'author', 'exported model metadata: author')
    f.DEFINE_string('export_model_name', 'model', 'exported model metadata: name')
    f.DEFINE_string('export_model_version', '0.0.1', 'exported model metadata: version')
    f.DEFINE_string('export_contact_info', '', 'exported model metadata: how to reach the author')
    f.DEFINE_string('export_license', '', 'exported model metadata: license')
    f.DEFINE_string('export_language', '', 'exported model metadata: language')
    f.DEFINE_string('export_description', '', 'exported model metadata: description')

    # Augmentation
    f.DEFINE_multi_string('augment', None, 'augment the training samples: NAME[p=P,KEY=VALUE,...], once per '
                          'operation, applied in the given order (see doc/TRAINING.rst, "Augmentation"); e.g. '
                          '--augment "tempo[p=0.5,factor=1~0.1]" --augment frequency_mask[n=2]')

    # Validation
    f.DEFINE_boolean('skip_invalid_samples', False, 'leave out samples whose transcript has characters outside '
                     'the alphabet (or is empty) or whose audio fails the check before training (missing, '
                     'unreadable, corrupt, wrong rate or channels, too short for the transcript) and log a '
                     'summary, instead of stopping with the list of them (a malformed CSV row still stops)')

    # Logging, summaries, progress
    f.DEFINE_string('summary_dir', '', 'TensorBoard summaries go here (default: '
                    + os.path.join(DEFAULT_DATA_HOME, 'summaries') + ')')
    f.DEFINE_boolean('show_progressbar', True, 'show progress bars with the running loss')
    f.DEFINE_integer('log_level', 1, 'log level of the console log and of TensorFlow\'s C++: 0 all, 1 no TensorFlow '
                     'infos, 2 no infos, 3 errors only (give it as --log_level=N)', lower_bound=0, upper_bound=3)

    # Performance
    f.DEFINE_integer('inter_op_parallelism_threads', 0, 'TensorFlow inter-op threads (0: automatic)',
                     lower_bound=0)
    f.DEFINE_integer('intra_op_parallelism_threads', 0, 'TensorFlow intra-op threads (0: automatic)',
                     lower_bound=0)
    f.DEFINE_boolean('automatic_mixed_precision', False, 'matrix products in 16-bit floats: bfloat16 on CPUs with '
                     'AMX-BF16/AVX512-BF16, float16 with dynamic loss scaling on GPUs; variables, checkpoints and '
                     'exports stay float32 (doc/PERFORMANCE.rst, "Mixed precision")')
    f.DEFINE_enum('lstm_impl', 'auto', LSTM_IMPLS, 'LSTM implementation: "fused" (TensorFlow\'s '
                  'BlockLSTM op), "scan" (a loop of matmuls with a hand-written gradient; on CPU about 10x faster '
                  'training steps at n_hidden 2048), "auto" = fused when a GPU is visible, else scan; the same '
                  'results and checkpoints either way')
    # DeepSpeech 0.9's GPU flags, so its command lines run (doc/TRAINING.rst, "Flags compared with DeepSpeech 0.9")
    f.DEFINE_boolean('train_cudnn', False, 'DeepSpeech 0.9\'s cuDNN LSTM: here --lstm_impl fused (on a GPU it runs '
                     'cuDNN\'s kernels; the checkpoints stay loadable everywhere, unlike DeepSpeech\'s)')
    f.DEFINE_boolean('use_allow_growth', False, 'DeepSpeech 0.9: take GPU memory as needed; always so here')

    # Distribution
    f.DEFINE_boolean('horovod', False, 'train on several processes with Horovod (launch with horovodrun or '
                     'mpirun); the learning rate is scaled by the number of ranks')
    f.DEFINE_boolean('horovod_fp16_compression', False, 'send gradients as float16 in the allreduce (halves '
                     'the traffic; for slow networks)')
    f.DEFINE_integer('horovod_backward_passes_per_step', 1, 'gradient accumulation: average this many batches '
                     'per rank before each allreduce and update (global_step still counts batches)', lower_bound=1)
    f.DEFINE_boolean('horovod_elastic', False, 'elastic training: keep training when ranks are removed or added '
                     '(launch with horovodrun --min-np/--max-np --host-discovery-script; see doc/HOROVOD.rst)')
    f.DEFINE_integer('horovod_elastic_commit_steps', 100, 'elastic training: keep the state in memory every '
                     'this many steps (and at every checkpoint); a rank lost mid-step takes the others back to '
                     'the last such commit (0: only at checkpoints)', lower_bound=0)
    f.DEFINE_float('warmup_epochs', 0.0, 'ramp the learning rate linearly from --learning_rate to '
                   '--learning_rate x ranks over this many epochs (Goyal et al. 2017)', lower_bound=0.0)
    f.DEFINE_integer('warmup_steps', 0, 'the same warm-up counted in optimizer updates', lower_bound=0)

    _register_validators(f)


def _dropout_ok(value):
    return value == -1.0 or 0.0 <= value < 1.0


def _existing_files(csv_list):
    """Every file exists; a pattern of tar shards names at least one. (An http(s) URL is checked when its
    shard is read, with the server's answer in the message.)"""
    return all(is_url(p) or os.path.isfile(p) for p in expand_all(split_files(csv_list)))


def parse_size(text):
    """'1MB', '512k', '4096' -> bytes (DeepSpeech's --read_buffer syntax); ValueError if malformed."""
    match = re.fullmatch(r'\s*(\d+)\s*([kmgt]?)b?\s*', text.lower())
    if not match:
        raise ValueError('{!r} is not a size (e.g. 1MB, 512KB, 4096)'.format(text))
    return int(match.group(1)) * SIZE_UNITS[match.group(2)]


def _size_ok(text):
    try:
        return parse_size(text) > 0
    except ValueError:
        return False


def split_files(csv_list):
    """`a.csv,b.csv` -> ['a.csv', 'b.csv'] (empty items dropped)."""
    return [p.strip() for p in csv_list.split(',') if p.strip()]


def _augmentations_ok(values):
    """The --augment values parse and suit the sample rate; raises with the parser's message."""
    from .data.augmentations import AugmentationError, parse_augmentations   # TensorFlow: only when used
    try:
        for augmentation in parse_augmentations(values['augment']):
            augmentation.check_sample_rate(values['audio_sample_rate'])
    except AugmentationError as error:
        raise flags.ValidationError('--augment {}'.format(error)) from None
    return True


def _register_validators(f):
    f.register_multi_flags_validator(['augment', 'audio_sample_rate'], _augmentations_ok)
    for name in ['dropout_rate', 'dropout_rate2', 'dropout_rate3', 'dropout_rate4', 'dropout_rate5',
                 'dropout_rate6']:
        f.register_validator(name, _dropout_ok, message='must be in [0, 1), or -1 for --dropout_rate')
    for name in ['train_files', 'dev_files', 'test_files', 'metrics_files']:
        f.register_validator(name, _existing_files,
                                 message='names a CSV file that does not exist (check the path; several '
                                         'files are separated by commas)')
    f.register_validator('ema_decay', lambda decay: 0.0 <= decay < 1.0, message='must be in [0, 1)')
    f.register_validator('read_buffer', _size_ok, message='must be a size above 0, e.g. 1MB, 512KB or 4096')
    for name in ['scorer_path', 'one_shot_infer']:
        f.register_validator(name, lambda path: not path or os.path.isfile(path), message='file not found')
    f.register_validator('alphabet_config_path', lambda path: os.path.isfile(alphabet_path(path)),
                             message='alphabet file not found (DeepSpeech\'s English one is data/alphabet.txt)')
    f.register_multi_flags_validator(
        ['train_files', 'dev_files', 'early_stop', 'reduce_lr_on_plateau'],
        lambda v: not v['train_files'] or v['dev_files'] or not (v['early_stop'] or v['reduce_lr_on_plateau']),
        message='--early_stop and --reduce_lr_on_plateau decide from the dev loss: give --dev_files too')
    f.register_multi_flags_validator(
        ['early_stop', 'reduce_lr_on_plateau', 'es_epochs', 'plateau_epochs'],
        lambda v: not (v['early_stop'] and v['reduce_lr_on_plateau']) or v['plateau_epochs'] < v['es_epochs'],
        message='--plateau_epochs must be smaller than --es_epochs, or the early stop fires before any plateau')
    f.register_multi_flags_validator(
        ['horovod', 'horovod_fp16_compression', 'horovod_backward_passes_per_step'],
        lambda v: v['horovod'] or not (v['horovod_fp16_compression'] or v['horovod_backward_passes_per_step'] > 1),
        message='--horovod_fp16_compression and --horovod_backward_passes_per_step need --horovod (on one '
                'machine: horovodrun -np 1 python DeepSpeech.py --horovod ...)')
    f.register_multi_flags_validator(
        ['horovod', 'horovod_elastic', 'horovod_backward_passes_per_step'],
        lambda v: not v['horovod_elastic'] or (v['horovod'] and v['horovod_backward_passes_per_step'] == 1),
        message='--horovod_elastic needs --horovod (horovodrun -np 2 --min-np 1 --host-discovery-script ... python '
                'DeepSpeech.py --horovod --horovod_elastic ...), and no --horovod_backward_passes_per_step (its '
                'partial sums are not kept over a reset)')
    f.register_multi_flags_validator(
        ['ema_decay', 'horovod_backward_passes_per_step'],
        lambda v: not (v['ema_decay'] and v['horovod_backward_passes_per_step'] > 1),
        message='--ema_decay does not work with --horovod_backward_passes_per_step (the weights change only every '
                'k-th batch, but the average would be updated at every batch): leave out one of them')
    f.register_multi_flags_validator(
        ['train_cudnn', 'lstm_impl'], lambda v: not v['train_cudnn'] or v['lstm_impl'] != 'scan',
        message='--train_cudnn is --lstm_impl fused: leave out one of them')
    f.register_multi_flags_validator(
        ['warmup_epochs', 'warmup_steps'], lambda v: not (v['warmup_epochs'] and v['warmup_steps']),
        message='give --warmup_epochs or --warmup_steps, not both')
    f.register_multi_flags_validator(
        ['feature_win_len', 'feature_win_step'], lambda v: v['feature_win_step'] <= v['feature_win_len'],
        message='--feature_win_step must not exceed --feature_win_len (audio between windows would be skipped)')
    f.register_multi_flags_validator(
        ['train_files', 'test_files', 'drop_source_layers', 'load_train'],
        lambda v: not v['drop_source_layers'] or (v['train_files'] and v['load_train'] != 'init'),
        message='--drop_source_layers transfers weights into a training run: give --train_files and a '
                'checkpoint to load from (--load_train best/last/auto)')
