"""Dockerfile.train really builds (CPU variant) and the image trains, with the setup path of bare metal.

No Docker daemon nor Docker Hub here: bin/build_docker_cpu_local.sh builds the Dockerfile with buildah
(vfs storage, chroot isolation) FROM a local debootstrap bookworm base, then bin/setup.sh --horovod --kenlm
inside the build, with the image's Debian python3. That setup reuses what the machine's own bin/setup.sh left,
mounted into the build: the compiled Horovod wheel and KenLM tools (its wheel cache, same environment key)
and apt's downloaded packages; it still installs the pip packages. Cold (no image, no base, the
machine's environment warm as in CI): 353 s on 2 shared cores (before: 705 s on CI's idle machine). An
unchanged checkout reuses the image (its context-hash label). See doc/DOCKER.rst.
"""
import os
import subprocess

import pytest

from tests.helpers.docker_image import built_image, image_build_unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDAH = ['buildah', '--storage-driver', 'vfs']


@pytest.fixture(scope='module')
def image():
    """The image tests/conftest.py started building in the background when the run's tests were collected."""
    reason = image_build_unavailable()
    if reason:
        pytest.skip(reason)
    return built_image(timeout=1500)


@pytest.fixture(scope='module')
def container(image):
    """One container of the image for the tests below: vfs storage copies the whole image (~4.3 GB, about
    a minute here) into each new container."""
    ctr = subprocess.run(BUILDAH + ['from', image], stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    yield ctr
    subprocess.run(BUILDAH + ['rm', ctr], stdout=subprocess.DEVNULL, check=False)


def run_in(container, *command, timeout=600):
    """Run a command in the container. Through sh, because buildah 1.28 looks a bare command name up outside
    the image's PATH."""
    return subprocess.run(BUILDAH + ['run', '--isolation', 'chroot', container, '--', '/bin/sh', '-c', 'exec "$@"',
                                     'sh'] + list(command),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_image_has_horovod_with_gloo_and_mpi(container):
    out = run_in(container, 'horovodrun', '--check-build')
    assert out.returncode == 0, out.stdout
    assert '[X] Gloo' in out.stdout and '[X] MPI' in out.stdout and '[X] TensorFlow' in out.stdout, out.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_image_trains_and_tests_on_the_smoke_data(container):
    out = run_in(container, 'python', 'DeepSpeech.py',
                 '--train_files', 'data/smoke_test/smoke_test.csv',
                 '--test_files', 'data/smoke_test/smoke_test.csv',
                 '--alphabet_config_path', 'data/alphabet.txt',
                 '--n_hidden', '32', '--epochs', '1', '--train_batch_size', '1', '--test_batch_size', '3',
                 '--checkpoint_dir', '/tmp/ckpt', '--noshow_progressbar')
    assert out.returncode == 0, out.stdout[-4000:]
    assert 'Test on data/smoke_test/smoke_test.csv - WER:' in out.stdout, out.stdout[-4000:]


def test_the_image_is_set_up_by_the_same_script_and_pins_as_bare_metal():
    """No second list of versions to drift: the Dockerfile installs nothing by pip itself, runs
    bin/setup.sh, and copies in the requirements and constraints files setup.sh reads."""
    with open(os.path.join(ROOT, 'Dockerfile.train')) as dockerfile:
        text = dockerfile.read()
    assert 'pip install' not in text and '==' not in text
    assert 'bin/setup.sh' in text.split('RUN', 2)[2]
    assert 'COPY constraints.txt ./' in text and 'COPY requirements/ requirements/' in text
    with open(os.path.join(ROOT, 'bin', 'setup.sh')) as setup:
        script = setup.read()
    assert '$ROOT/constraints.txt' in script and '$ROOT/requirements/' in script
