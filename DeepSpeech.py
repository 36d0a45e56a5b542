#!/usr/bin/env python
"""Train, validate and test a DeepSpeech model: python DeepSpeech.py --help"""
import os
import sys

# Run this checkout's code, never a copy installed from another checkout into the shared environment.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'training'))
# TensorFlow reads its C++ log level once, at import: honour --log_level (default 1, no infos) first.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', next(
    (a.split('=', 1)[1] for a in sys.argv if a.startswith('--log_level=')), '1'))

if __name__ == '__main__':
    from deepspeech_training import cli
    cli.run_script()
