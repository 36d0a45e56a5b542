#!/usr/bin/env python
"""Tune --lm_alpha / --lm_beta on a dev set: python lm_optimizer.py --test_files dev.csv --scorer_path ...
(installed: deepspeech-lm-optimizer; training/deepspeech_training/lm_optimizer.py says more)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'training'))

if __name__ == '__main__':
    from deepspeech_training import entry
    entry.lm_optimizer()
