"""DeepSpeech 0.9's module name for the training command line (`python -m deepspeech_training.train`,
`from deepspeech_training import train; train.run_script()`): the CLI itself is cli.py."""
from .cli import main, run_script  # noqa: F401

if __name__ == '__main__':
    run_script()
