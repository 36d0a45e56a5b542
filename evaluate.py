#!/usr/bin/env python
"""Test a checkpoint, as DeepSpeech 0.9's evaluate.py: python evaluate.py --test_files ... --load_checkpoint_dir ...
(DeepSpeech.py's flags, the test path alone; installed: deepspeech-evaluate)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'training'))

if __name__ == '__main__':
    from deepspeech_training import entry
    entry.evaluate()
