"""The Docker image (tests/test_docker.py) is built in the background from the end of collection, beside the
other tests, by the first process that collects a test needing it (conftest.py); tests/test_docker.py's
`image` fixture waits for it. Its files: run_dir('image', 'out'|'log'|'rc'|'pid')."""
import os
import shutil
import signal
import subprocess
import time

from tests.helpers.suite import ROOT, run_dir

IMAGE_BUILD = os.path.join(ROOT, 'bin', 'build_docker_cpu_local.sh')
# vfs keeps every layer as a full copy: measured here ~10 GB under /var/lib/containers for one build.
IMAGE_DISK_GB = 20


def image_build_unavailable():
    """Why the image cannot be built here (None if it can)."""
    free_gb = shutil.disk_usage('/var/lib' if os.path.isdir('/var/lib') else '/').free / 1e9
    if free_gb < IMAGE_DISK_GB:
        return 'building the image needs about {} GB free under /var/lib, {:.1f} GB here'.format(IMAGE_DISK_GB,
                                                                                                 free_gb)
    return None


def start_image_build():
    if image_build_unavailable():
        return
    os.makedirs(run_dir('image'), exist_ok=True)
    try:
        os.close(os.open(run_dir('image', 'started'), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return                                    # another worker started it
    build = subprocess.Popen(['sh', '-c', '"$0" >"$1/out" 2>"$1/log"; echo $? >"$1/rc"', IMAGE_BUILD,
                              run_dir('image')], cwd=ROOT, start_new_session=True)
    with open(run_dir('image', 'pid'), 'w') as pid:
        pid.write(str(build.pid))


def stop_image_build():
    """End a build still running when the run ends (a run stopped early, or -k without the image's tests)."""
    try:
        with open(run_dir('image', 'pid')) as pid:
            os.killpg(int(pid.read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def built_image(timeout):
    """The name of the image built in the background (waiting up to `timeout` s for it), or an
    AssertionError with the build's log."""
    deadline = time.time() + timeout
    while not os.path.isfile(run_dir('image', 'rc')) and time.time() < deadline:
        time.sleep(1)
    with open(run_dir('image', 'log')) as log:
        build_log = log.read()
    assert os.path.isfile(run_dir('image', 'rc')), 'image not built in {} s:\n{}'.format(timeout, build_log[-4000:])
    with open(run_dir('image', 'rc')) as rc, open(run_dir('image', 'out')) as out:
        assert rc.read().strip() == '0', build_log[-4000:]
        return out.read().strip().splitlines()[-1]
