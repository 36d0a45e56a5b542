#!/usr/bin/env python
"""Train, validate and test a DeepSpeech model: python DeepSpeech.py --help (installed: deepspeech-train)"""
import os
import sys

# Run this checkout's code, never a copy installed from another checkout into the shared environment.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'training'))

if __name__ == '__main__':
    from deepspeech_training import entry
    entry.train()
