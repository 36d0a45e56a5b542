"""The console scripts (pyproject.toml) and the checkout's entry scripts (DeepSpeech.py, transcribe.py,
lm_optimizer.py) start here, so each tool starts one way whether installed or not. TensorFlow reads its
C++ log level once, at import: each entry sets it before importing anything that imports TensorFlow."""
import os
import sys


def _quiet_tensorflow(default):
    """TF_CPP_MIN_LOG_LEVEL from --log_level=N (the training flag), else `default`; a value already in
    the environment wins."""
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', next(
        (a.split('=', 1)[1] for a in sys.argv if a.startswith('--log_level=')), default))


def train():
    """deepspeech-train: train, test, export (DeepSpeech.py's flags); infos from TensorFlow are hidden."""
    _quiet_tensorflow('1')
    from .cli import run_script
    run_script()


def transcribe():
    _quiet_tensorflow('2')
    from .transcribe import main
    main()


def lm_optimizer():
    _quiet_tensorflow('2')
    from .lm_optimizer import main
    main()
