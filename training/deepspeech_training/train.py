"""Kept only for DeepSpeech 0.9 users' scripts, which do `from deepspeech_training import train;
train.run_script()` or `python -m deepspeech_training.train`: both still start the command line, cli.py."""
from .cli import main, run_script  # noqa: F401

if __name__ == '__main__':
    run_script()
