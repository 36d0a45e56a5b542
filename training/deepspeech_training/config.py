"""Settings, read from the flags once per process by `settings_from_flags` (with the CLI, the only
reader of FLAGS): the model and its features (`Config`), and one small dataclass per concern that the
trainer, checkpoints, decoding and export take as arguments; `from_flags` fills a tool's own (transcribe,
lm_optimizer).

Fields carry the names of the flags they come from, so `--train_batch_size` is
`settings.training.train_batch_size`; what is derived (directories, dropout rates) is computed here.
"""
import os
import sys
from dataclasses import dataclass, fields

from .flags import FLAGS, DEFAULT_DATA_HOME, alphabet_path, parse_size
from .precision import mixed_precision_mode
from .util.text import load_alphabet

N_INPUT = 26      # MFCC coefficients per frame
N_CONTEXT = 9     # frames of context on each side: layer_1 sees 2 * 9 + 1 = 19 frames


@dataclass
class Config:
    """The model and its features: what training, evaluation and export must agree on."""
    alphabet: object
    n_input: int
    n_context: int
    audio_window_samples: int
    audio_step_samples: int
    n_hidden: int
    n_classes: int          # alphabet size + 1: the CTC blank is the last class
    sample_rate: int = 16000
    normalize_sample_rate: bool = True
    relu_clip: float = 20.0
    layer_norm: bool = False    # --layer_norm: after layers 1-3 and 5, as DeepSpeech 0.9
    lstm_impl: str = 'auto'     # model.LSTM_IMPLS
    feature_win_len: int = 32   # ms, as exported in the model's metadata
    feature_win_step: int = 20
    read_buffer: int = 1 << 20  # bytes, --read_buffer: the largest read of a batch of .sdb / shard samples
    data_cache_dir: str = None  # --data_cache_dir: audio headers and container indexes kept between runs
    alphabet_path: str = None   # the file `alphabet` was read from (a scorer is checked against it)
    bytes_output_mode: bool = False

    @property
    def window_width(self):
        return 2 * self.n_context + 1


@dataclass
class CheckpointSettings:
    load_dir: str
    save_dir: str
    max_to_keep: int
    checkpoint_secs: int
    load_train: str
    load_evaluate: str
    drop_source_layers: int
    load_cudnn: bool


@dataclass
class TrainingSettings:
    epochs: int
    total_epochs: int
    train_batch_size: int
    dev_batch_size: int
    learning_rate: float
    force_initialize_learning_rate: bool
    beta1: float
    beta2: float
    epsilon: float
    ema_decay: float            # 0: off
    dropout_rates: tuple        # layers 1-6, -1 resolved to --dropout_rate
    random_seed: int
    shuffle_batches: bool
    augment: list
    feature_cache: str
    cache_for_epochs: int
    warmup_epochs: float
    warmup_steps: int
    early_stop: bool
    es_epochs: int
    es_min_delta: float
    reduce_lr_on_plateau: bool
    plateau_epochs: int
    plateau_reduction: float
    summary_dir: str
    horovod_fp16_compression: bool
    horovod_backward_passes_per_step: int
    horovod_elastic_commit_steps: int


@dataclass
class DecodingSettings:
    beam_width: int
    cutoff_prob: float
    cutoff_top_n: int
    scorer_path: str
    lm_alpha: float
    lm_beta: float
    test_batch_size: int
    report_count: int
    test_output_file: str


@dataclass
class ExportSettings:
    export_dir: str
    export_file_name: str
    export_tflite: bool
    export_quantize: bool
    export_zip: bool
    export_beam_width: int
    n_steps: int
    export_author_id: str
    export_model_name: str
    export_model_version: str
    export_contact_info: str
    export_license: str
    export_language: str
    export_description: str


@dataclass
class SessionSettings:
    intra_op_parallelism_threads: int
    inter_op_parallelism_threads: int
    mixed_precision: str        # None (float32), or the 16-bit type --automatic_mixed_precision gives here


@dataclass
class Settings:
    model: Config
    checkpoints: CheckpointSettings
    training: TrainingSettings
    decoding: DecodingSettings
    export: ExportSettings
    session: SessionSettings
    show_progressbar: bool


def from_flags(cls, **derived):
    """`cls` with each field the flag of its name, but those given in `derived`."""
    return cls(**{f.name: derived[f.name] if f.name in derived else FLAGS[f.name].value for f in fields(cls)})


def dropout_rates_from_flags():
    """The six per-layer rates, with -1 meaning --dropout_rate (as DeepSpeech 0.9)."""
    rates = [FLAGS.dropout_rate, FLAGS.dropout_rate2, FLAGS.dropout_rate3, FLAGS.dropout_rate4,
             FLAGS.dropout_rate5, FLAGS.dropout_rate6]
    return tuple(FLAGS.dropout_rate if r < 0 else r for r in rates)


def config_from_flags():
    """The model Config; creates no files."""
    path = alphabet_path(FLAGS.alphabet_config_path)
    alphabet = load_alphabet(path, FLAGS.bytes_output_mode)
    return Config(
        alphabet=alphabet,
        alphabet_path=path,
        bytes_output_mode=FLAGS.bytes_output_mode,
        n_input=N_INPUT,
        n_context=N_CONTEXT,
        audio_window_samples=FLAGS.audio_sample_rate * FLAGS.feature_win_len // 1000,
        audio_step_samples=FLAGS.audio_sample_rate * FLAGS.feature_win_step // 1000,
        n_hidden=FLAGS.n_hidden,
        n_classes=alphabet.GetSize() + 1,
        sample_rate=FLAGS.audio_sample_rate,
        normalize_sample_rate=FLAGS.normalize_sample_rate,
        relu_clip=FLAGS.relu_clip,
        layer_norm=FLAGS.layer_norm,
        lstm_impl='fused' if FLAGS.train_cudnn else FLAGS.lstm_impl,
        feature_win_len=FLAGS.feature_win_len,
        feature_win_step=FLAGS.feature_win_step,
        read_buffer=parse_size(FLAGS.read_buffer),
        data_cache_dir=FLAGS.data_cache_dir or None,
    )


def settings_from_flags():
    """Every setting of a run; creates no files (directories are made by whoever writes them)."""
    checkpoint_dir = FLAGS.checkpoint_dir or os.path.join(DEFAULT_DATA_HOME, 'checkpoints')
    return Settings(
        model=config_from_flags(),
        checkpoints=from_flags(CheckpointSettings, load_dir=FLAGS.load_checkpoint_dir or checkpoint_dir,
                                save_dir=FLAGS.save_checkpoint_dir or checkpoint_dir),
        training=from_flags(TrainingSettings, dropout_rates=dropout_rates_from_flags(), augment=FLAGS.augment or [],
                             summary_dir=FLAGS.summary_dir or os.path.join(DEFAULT_DATA_HOME, 'summaries')),
        decoding=from_flags(DecodingSettings),
        export=from_flags(ExportSettings),
        session=from_flags(SessionSettings, mixed_precision=mixed_precision_mode(FLAGS.automatic_mixed_precision)),
        show_progressbar=FLAGS.show_progressbar,
    )


def settings_from_args(args):
    """The Settings of the training flags in `args` (the others at their defaults; flags.create_flags() first),
    for the tools that build the trainer's graph in process: the benchmarks and the profiler."""
    FLAGS.unparse_flags()
    FLAGS([sys.argv[0]] + [str(arg) for arg in args])
    return settings_from_flags()
