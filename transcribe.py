#!/usr/bin/env python
"""Transcribe WAV files with a trained checkpoint: python transcribe.py --src a.wav --checkpoint_dir ...
(installed: deepspeech-transcribe; training/deepspeech_training/transcribe.py says more)"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'training'))

if __name__ == '__main__':
    from deepspeech_training import entry
    entry.transcribe()
