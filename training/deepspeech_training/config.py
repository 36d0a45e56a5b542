"""Settings: the one reader of the flags. `settings_from_flags` reads a parsed command line once per process
into the model and its features (`Config`) and one small dataclass per concern, which the trainer, input,
checkpoints, decoding and export take as arguments; `from_flags` fills a tool's own (transcribe,
lm_optimizer). `settings_from_args` gives the Settings of a command line without touching the global FLAGS
(tests, benchmarks, the profiler).

Fields carry the names of the flags they come from, so `--train_batch_size` is
`settings.training.train_batch_size`; what is derived (directories, dropout rates, file lists) is computed
here, and what follows from other fields is a property. Defaults live in the flag definitions alone.
"""
import os
from dataclasses import dataclass, fields

from absl import flags

from .flags import FLAGS, DEFAULT_DATA_HOME, alphabet_path, create_flags, parse_size, split_files
from .precision import mixed_precision_mode
from .util.text import load_alphabet

N_INPUT = 26      # MFCC coefficients per frame
N_CONTEXT = 9     # frames of context on each side: layer_1 sees 2 * 9 + 1 = 19 frames


@dataclass
class Config:
    """The model and its features: what training, evaluation and export must agree on; and where the data
    layer reads (read_buffer, data_cache_dir)."""
    alphabet: object
    alphabet_path: str          # the file `alphabet` was read from (a scorer is checked against it)
    bytes_output_mode: bool
    n_hidden: int
    sample_rate: int
    normalize_sample_rate: bool
    relu_clip: float
    layer_norm: bool            # --layer_norm: after layers 1-3 and 5, as DeepSpeech 0.9
    lstm_impl: str              # model.LSTM_IMPLS
    feature_win_len: int        # ms, as exported in the model's metadata
    feature_win_step: int
    read_buffer: int            # bytes, --read_buffer: the largest read of a batch of .sdb / shard samples
    data_cache_dir: str         # --data_cache_dir: audio headers and container indexes kept between runs (None: none)
    n_input: int = N_INPUT
    n_context: int = N_CONTEXT

    @property
    def window_width(self):
        return 2 * self.n_context + 1

    @property
    def audio_window_samples(self):
        return self.sample_rate * self.feature_win_len // 1000

    @property
    def audio_step_samples(self):
        return self.sample_rate * self.feature_win_step // 1000

    @property
    def n_classes(self):
        """The alphabet's labels and the CTC blank, the last class."""
        return self.alphabet.GetSize() + 1


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
    lr_schedule: str            # 'constant' or 'cosine' (train_graph.schedule_factor)
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
class InputSettings:
    """The sets to read, as lists of files, and how much of each."""
    train_files: list
    dev_files: list
    test_files: list
    metrics_files: list
    limit_train: int            # 0: all
    limit_dev: int
    limit_test: int
    reverse_train: bool
    reverse_dev: bool
    reverse_test: bool
    skip_invalid_samples: bool


@dataclass
class RunSettings:
    """How this process runs and reports: its launcher's mode, its log, and the one-shot transcription."""
    horovod: bool
    horovod_elastic: bool
    show_progressbar: bool
    log_level: int
    one_shot_infer: str         # a WAV file to transcribe ('': none)
    flags_text: str             # the command line's flags as flags.txt keeps them beside the checkpoints


@dataclass
class Settings:
    model: Config
    checkpoints: CheckpointSettings
    training: TrainingSettings
    decoding: DecodingSettings
    export: ExportSettings
    session: SessionSettings
    input: InputSettings
    run: RunSettings


def from_flags(cls, flag_values=FLAGS, **derived):
    """`cls` with each field the flag of its name, but those given in `derived`."""
    return cls(**{f.name: derived[f.name] if f.name in derived else flag_values[f.name].value for f in fields(cls)})


def dropout_rates(flag_values):
    """The six per-layer rates, with -1 meaning --dropout_rate (as DeepSpeech 0.9)."""
    rate = flag_values.dropout_rate
    rates = [rate] + [flag_values['dropout_rate{}'.format(layer)].value for layer in range(2, 7)]
    return tuple(rate if r < 0 else r for r in rates)


def config_from_flags(flag_values):
    """The model Config; creates no files."""
    path = alphabet_path(flag_values.alphabet_config_path)
    return from_flags(Config, flag_values, alphabet=load_alphabet(path, flag_values.bytes_output_mode),
                      alphabet_path=path, sample_rate=flag_values.audio_sample_rate,
                      lstm_impl='fused' if flag_values.train_cudnn else flag_values.lstm_impl,
                      read_buffer=parse_size(flag_values.read_buffer),
                      data_cache_dir=flag_values.data_cache_dir or None, n_input=N_INPUT, n_context=N_CONTEXT)


def settings_from_flags(flag_values=FLAGS):
    """Every setting of a run, from parsed flags; creates no files (directories are made by whoever writes
    them)."""
    checkpoint_dir = flag_values.checkpoint_dir or os.path.join(DEFAULT_DATA_HOME, 'checkpoints')
    file_lists = {name: split_files(flag_values[name].value)
                  for name in ('train_files', 'dev_files', 'test_files', 'metrics_files')}
    return Settings(
        model=config_from_flags(flag_values),
        checkpoints=from_flags(CheckpointSettings, flag_values,
                               load_dir=flag_values.load_checkpoint_dir or checkpoint_dir,
                               save_dir=flag_values.save_checkpoint_dir or checkpoint_dir),
        training=from_flags(TrainingSettings, flag_values, dropout_rates=dropout_rates(flag_values),
                            augment=flag_values.augment or [],
                            summary_dir=flag_values.summary_dir or os.path.join(DEFAULT_DATA_HOME, 'summaries')),
        decoding=from_flags(DecodingSettings, flag_values),
        export=from_flags(ExportSettings, flag_values),
        session=from_flags(SessionSettings, flag_values,
                           mixed_precision=mixed_precision_mode(flag_values.automatic_mixed_precision)),
        input=from_flags(InputSettings, flag_values, **file_lists),
        run=from_flags(RunSettings, flag_values, flags_text=flag_values.flags_into_string()),
    )


def settings_from_args(args, program='DeepSpeech.py'):
    """The Settings of the command line `args` (DeepSpeech.py's flags; the others at their defaults), parsed
    into flag values of their own: the global FLAGS stays as it is. For what builds a run in process: tests,
    benchmarks, the profiler. A bad flag raises absl's flags.Error."""
    flag_values = flags.FlagValues()
    create_flags(flag_values)
    flag_values([program] + [str(arg) for arg in args])
    return settings_from_flags(flag_values)
