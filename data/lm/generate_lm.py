#!/usr/bin/env python3
"""Build a KenLM language model and its vocabulary for a scorer (doc/LM.rst): python data/lm/generate_lm.py
--input_txt text.txt --output_dir lm (installed: deepspeech-generate-lm). The code is the checkout's
training/deepspeech_training/lm/generate_lm.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'training'))

if __name__ == '__main__':
    from deepspeech_training.lm import generate_lm
    sys.exit(generate_lm.main())
