"""`python -m deepspeech_training.evaluate`: test a checkpoint, as DeepSpeech 0.9's module of that name and
the checkout's evaluate.py. A script of its own, imported by nothing, so the package's evaluation code
(evaluate/__init__.py, which cli.py imports) never imports the command line above it."""
from ..entry import evaluate

if __name__ == '__main__':
    evaluate()
