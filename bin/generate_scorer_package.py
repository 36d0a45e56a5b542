#!/usr/bin/env python3
"""Make a DeepSpeech 0.9 scorer package from a KenLM binary LM and its vocabulary (doc/LM.rst):
python bin/generate_scorer_package.py --alphabet data/alphabet.txt --lm lm.binary --vocab vocab.txt
--package kenlm.scorer (installed: deepspeech-generate-scorer-package). The code is the checkout's
training/deepspeech_training/lm/generate_scorer_package.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'training'))

if __name__ == '__main__':
    from deepspeech_training.lm import generate_scorer_package
    sys.exit(generate_scorer_package.main())
