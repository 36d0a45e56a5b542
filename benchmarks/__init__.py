"""The developer benchmarks and profilers, run from the checkout as `python -m benchmarks.<name> --help`
(doc/PERFORMANCE.rst, doc/QUALITY.rst). deepspeech_training is not installed: importing this package puts
the checkout's training/ on the path, the one place a benchmark does (the entry scripts do it for themselves)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'training'))
