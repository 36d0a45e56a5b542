"""Installs the deepspeech_training package from training/ with the pinned requirements.

DeepSpeech.py and bin/ scripts do not need this: they run the checkout's own training/ directly.
Horovod is an extra (pip install --no-build-isolation '.[horovod]', after TensorFlow), as in DeepSpeech.
"""
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def requirements(name):
    with open(os.path.join(HERE, name)) as requirements_file:
        return [line.strip() for line in requirements_file if line.strip() and not line.startswith('#')]


BUILD_AND_TEST_ONLY = ('setuptools', 'wheel', 'pytest', 'hypothesis')

setup(
    name='deepspeech_training',
    version='0.1.0',
    description='DeepSpeech-style speech recognition training on TensorFlow 2.15 (compat.v1), with Horovod',
    python_requires='>=3.9,<3.10',
    package_dir={'': 'training'},
    packages=find_packages(where='training'),
    install_requires=[r for r in requirements('requirements.txt') if not r.startswith(BUILD_AND_TEST_ONLY)],
    extras_require={'horovod': requirements('requirements-horovod.txt')},
)
