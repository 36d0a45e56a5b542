"""A shim over pyproject.toml, where the package is described (name, version, dependencies, console scripts),
for what DeepSpeech's setup.py did:

    pip install -e .                  # editable install (DeepSpeech's README: pip3 install --upgrade -e .)
    python setup.py --name --version  # and the other setup.py commands setuptools still has

The dependencies come from requirements/*.txt; `pip install -r requirements.txt` gives the training
dependencies at the tested versions (constraints.txt), and `pip install -c constraints.txt -e .` the
package on them. Horovod needs its own build against the installed TensorFlow: requirements.txt says how.
"""
import sys

import setuptools

if __name__ == '__main__':
    major = int(setuptools.__version__.split('.')[0])
    if major < 64:
        # older setuptools do not read pyproject.toml's [project] table and would build a package named UNKNOWN
        sys.exit('setup.py: setuptools {} is too old to read pyproject.toml (needs 64 or later): '
                 'pip install -U "setuptools>=64" wheel, or let pip build it: pip install -e .'
                 .format(setuptools.__version__))
    setuptools.setup()
