"""The console scripts (pyproject.toml) and the checkout's entry scripts (DeepSpeech.py, evaluate.py,
transcribe.py, lm_optimizer.py) start here, so each tool starts one way whether installed or not. TensorFlow reads its
C++ log level once, at import: each entry sets it before importing anything that imports TensorFlow."""
import os
import re
import sys
import threading

# What TensorFlow 2.15's C++ prints at import on every machine, GPU or not, though nothing is wrong: the CUDA
# plugins register twice (tensorflow/tensorflow#62075; E level, so only TF_CPP_MIN_LOG_LEVEL=3, which
# would also hide real errors, silences them), and TF-TRT finds no TensorRT (this project never uses TF-TRT).
IMPORT_NOISE = re.compile(r'Unable to register (cuDNN|cuFFT|cuBLAS) factory: Attempting to register factory for '
                          r'plugin \w+ when one has already been registered|TF-TRT Warning: Could not find TensorRT')


def quiet_tensorflow(default):
    """TF_CPP_MIN_LOG_LEVEL from --log_level=N (the training flag), else `default`; a value already in
    the environment wins. Then import TensorFlow without its known import-time noise (IMPORT_NOISE). The
    tools in bin/ that import TensorFlow call this too."""
    os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', next(
        (a.split('=', 1)[1] for a in sys.argv if a.startswith('--log_level=')), default))
    import_tensorflow_quietly()


def import_tensorflow_quietly():
    """`import tensorflow` with the lines IMPORT_NOISE matches left out of stderr; every other line TensorFlow
    writes meanwhile is passed on as it comes (a crash during the import still shows what preceded it).
    With TF_CPP_MIN_LOG_LEVEL=0 (a user asking for everything) nothing is left out."""
    if 'tensorflow' in sys.modules or os.environ.get('TF_CPP_MIN_LOG_LEVEL') == '0':
        import tensorflow  # noqa: F401
        return
    sys.stderr.flush()
    try:
        stderr_copy = os.dup(2)
    except OSError:     # no stderr to filter
        import tensorflow  # noqa: F401
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        with os.fdopen(read_end, 'rb') as lines:
            for line in lines:
                if not IMPORT_NOISE.search(line.decode('utf-8', 'replace')):
                    while line:
                        line = line[os.write(stderr_copy, line):]
    forwarder = threading.Thread(target=forward, daemon=True)
    forwarder.start()
    try:
        import tensorflow  # noqa: F401
    finally:
        sys.stderr.flush()
        os.dup2(stderr_copy, 2)     # closes the pipe's last write end: the forwarder reads to its end
        forwarder.join(timeout=10)  # unless a process started meanwhile holds one: it forwards on then
        if not forwarder.is_alive():
            os.close(stderr_copy)


def train():
    """deepspeech-train: train, test, export (DeepSpeech.py's flags); infos from TensorFlow are hidden."""
    quiet_tensorflow('1')
    from .cli import run_script
    run_script()


def evaluate():
    """deepspeech-evaluate, evaluate.py, python -m deepspeech_training.evaluate: test a checkpoint (DeepSpeech
    0.9's evaluate.py: DeepSpeech.py's flags, the test path alone)."""
    quiet_tensorflow('1')
    from .cli import evaluate_main, run_script
    run_script(evaluate_main)


def transcribe():
    """deepspeech-transcribe, transcribe.py: WAV files to text with a checkpoint (transcribe.py's flags and
    DeepSpeech.py's)."""
    quiet_tensorflow('2')
    from .cli import run_script
    from .transcribe import define_flags, transcribe_files
    run_script(transcribe_files, define_flags)


def lm_optimizer():
    """deepspeech-lm-optimizer, lm_optimizer.py: search the scorer's alpha and beta on a dev set."""
    quiet_tensorflow('2')
    from .cli import run_script
    from .lm_optimizer import define_flags, optimize
    run_script(optimize, define_flags)
