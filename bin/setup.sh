#!/usr/bin/env bash
# Make (or reuse) the project's Python environment and print its interpreter's path as the LAST line
# on stdout; everything else goes to stderr, so `PY=$(bin/setup.sh | tail -n 1)` works anywhere.
#
# The environment lives outside the checkout, keyed by a hash of constraints.txt (the exact versions),
# the requirements/ files it installs, the Python version, whether Horovod is built with MPI and
# whether it is a GPU environment, so every clone on this machine (CI's fresh clone included) reuses
# it. A build that is interrupted is never reused: the `.complete` marker (which says what was built) is
# written last. Horovod must be compiled against the installed TensorFlow, hence the second step
# with --no-build-isolation. That compiled wheel is kept in a wheel cache under the same key (and the
# OS release), so a later setup with the same key, such as the one inside the Docker image build
# (bin/build_docker_cpu_local.sh mounts the cache, doc/DOCKER.rst), installs it instead of compiling.
#
# Usage: bin/setup.sh [--gpu] [--dry-run | --python | --horovod-wheel]
#   --gpu (or DS_GPU=1)  a GPU environment: tensorflow[and-cuda] (CUDA and cuDNN as pip packages) and,
#                  when a CUDA toolkit is found (nvcc), Horovod with NCCL allreduce (doc/GPU.rst)
#   --dry-run      print what would be installed (pip requirement lines, Horovod's build settings) and
#                  the interpreter's path, building and installing nothing
#   --python       print the Python 3.9 it builds from (for an environment of your own) and stop
#   --horovod-wheel  also make sure the environment's compiled Horovod wheel is in the wheel cache: an
#                  environment built before the cache existed gets its wheel compiled once (~2.5 min),
#                  without rebuilding the environment (bin/build_docker_cpu_local.sh asks for it)
#
# Environment knobs:
#   DS_ENV_CACHE   folder holding the environments (default ${XDG_CACHE_HOME:-~/.cache}/deepspeech-training)
#   DS_WHEEL_CACHE folder of the compiled Horovod wheels, one subfolder per environment key and OS
#                  release (default $DS_ENV_CACHE/wheels, i.e. ~/.cache/deepspeech-training/wheels);
#                  a wheel found there for this key is installed instead of compiling Horovod
#   DS_PYTHON      a python3.9 interpreter to use instead of searching for one
#   DS_NO_APT=1    never call apt-get, even as root
#   HOROVOD_GPU_OPERATIONS=NCCL   build Horovod's GPU allreduce with NCCL (needs CUDA and libnccl-dev;
#                  Dockerfile.train's GPU variant sets it; --gpu sets it when nvcc is found); part of the key
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPU="${DS_GPU:-0}"
DRY_RUN=0
ONLY_PYTHON=0
HOROVOD_WHEEL=0
for arg in "$@"; do
    case "$arg" in
        --gpu) GPU=1 ;;
        --dry-run) DRY_RUN=1 ;;
        --python) ONLY_PYTHON=1 ;;
        --horovod-wheel) HOROVOD_WHEEL=1 ;;
        *) echo "[setup] ERROR: unknown argument $arg (usage: bin/setup.sh [--gpu] [--dry-run | --python | --horovod-wheel])" >&2; exit 2 ;;
    esac
done
log() { echo "[setup] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

# Debian packages: real speech for tests (espeak-ng, sox, ffmpeg), audio I/O (libsndfile1), the
# Horovod build (cmake, g++), an MPI, strace (tests watch which rank touches which file), and what KenLM's lmplz/build_binary build needs.
# iproute2 (ip netns, tc): the two-host tests and bin/benchmark_network.py. libopus0: Opus in .sdb files (opuslib).
# sshfs, openssh-server: a networked filesystem for bin/benchmark_storage.py (tests/helpers/netns_sshfs.py).
# slurm-wlm, munge, libpmix-dev: the two-node Slurm cluster of tests/test_slurm.py (srun --mpi=pmix).
APT_PACKAGES="espeak-ng sox ffmpeg libsndfile1 cmake g++ make openmpi-bin libopenmpi-dev strace iproute2 libopus0 sshfs openssh-server
  slurm-wlm munge libpmix-dev
  libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev
  zlib1g-dev libbz2-dev liblzma-dev"

install_debian_packages() {
    [ "${DS_NO_APT:-0}" = 1 ] && return 0
    command -v dpkg-query >/dev/null || return 0
    local missing=""
    for p in $APT_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        log "WARNING: missing Debian packages:$missing"
        log "         install them with: sudo apt-get install$missing"
        return 0
    fi
    log "installing Debian packages:$missing"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
}

is_python39() { "$1" -c 'import sys, venv; assert sys.version_info[:2] == (3, 9)' 2>/dev/null; }

find_python39() {
    local pyenv_root candidate
    pyenv_root="$( (command -v pyenv >/dev/null && pyenv root) || echo "$HOME/.pyenv")"
    # A pyenv shim is on PATH even when it cannot run, so every candidate is tried for real.
    for candidate in "${DS_PYTHON:-}" "$(command -v python3.9 || true)" \
            $(ls -d "$pyenv_root"/versions/3.9.*/bin/python3.9 2>/dev/null | sort -rV); do
        if [ -n "$candidate" ] && is_python39 "$candidate"; then echo "$candidate"; return 0; fi
    done
    cat >&2 <<'EOF'
[setup] ERROR: no Python 3.9 found (ds_ctcdecoder 0.9.3 ships wheels for Python 3.9 only).
[setup] Get one with any of:
[setup]   pyenv install 3.9.18                    (then rerun bin/setup.sh)
[setup]   apt-get install python3.9 python3.9-venv (where your distribution has it)
[setup]   DS_PYTHON=/path/to/python3.9 bin/setup.sh
EOF
    return 1
}

[ $DRY_RUN = 1 ] || [ $ONLY_PYTHON = 1 ] || install_debian_packages
PYTHON39="$(find_python39)"
if [ $ONLY_PYTHON = 1 ]; then echo "$PYTHON39"; exit 0; fi
WITH_MPI=0
command -v mpicc >/dev/null && WITH_MPI=1
# What pip installs, all under constraints.txt; Horovod comes second, compiled against that TensorFlow.
REQUIREMENTS=(base lm plotting test)
VARIANT="CPU TensorFlow"
if [ "$GPU" = 1 ]; then
    REQUIREMENTS+=(gpu)
    VARIANT="GPU TensorFlow (tensorflow[and-cuda])"
    if [ -z "${HOROVOD_GPU_OPERATIONS:-}" ]; then
        if command -v nvcc >/dev/null; then
            export HOROVOD_GPU_OPERATIONS=NCCL
        else
            log "WARNING: no CUDA toolkit (nvcc) found: Horovod is built without NCCL; its allreduce then goes"
            log "         through host memory (doc/GPU.rst says how to build it with NCCL)"
        fi
    fi
fi
REQUIREMENT_FILES=()
for name in "${REQUIREMENTS[@]}"; do REQUIREMENT_FILES+=("$ROOT/requirements/$name.txt"); done

KEY="$( { cat "$ROOT/constraints.txt" "${REQUIREMENT_FILES[@]}" "$ROOT/requirements/horovod.txt"; "$PYTHON39" -V 2>&1;
          echo "mpi=$WITH_MPI"; if [ "$GPU" = 1 ]; then echo "gpu=1"; fi;
          if [ -n "${HOROVOD_GPU_OPERATIONS:-}" ]; then echo "gpu=$HOROVOD_GPU_OPERATIONS"; fi; } \
        | sha256sum | cut -c1-12)"
CACHE="${DS_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deepspeech-training}"
ENV_DIR="$CACHE/env-$KEY"
# The compiled Horovod wheel: same key as the environment, and the OS release whose libraries it links.
OS_RELEASE="$( (. /etc/os-release && echo "$ID-$VERSION_ID") 2>/dev/null || echo unknown)"
WHEEL_CACHE="${DS_WHEEL_CACHE:-$CACHE/wheels}"
WHEEL_DIR="$WHEEL_CACHE/horovod-$KEY-$OS_RELEASE"
HOROVOD_BUILD="Horovod with Gloo$([ $WITH_MPI = 1 ] && echo ' and MPI')${HOROVOD_GPU_OPERATIONS:+, GPU ops $HOROVOD_GPU_OPERATIONS}"

if [ $DRY_RUN = 1 ]; then
    echo "# $VARIANT, $HOROVOD_BUILD: pip install -c constraints.txt with"
    grep -hv '^#' "${REQUIREMENT_FILES[@]}" "$ROOT/requirements/horovod.txt"
    echo "# constraints:"
    grep -E '^(tensorflow|horovod)==' "$ROOT/constraints.txt"
    echo "$ENV_DIR/bin/python"
    exit 0
fi
mkdir -p "$CACHE"

horovod_wheel() { ls "$WHEEL_DIR"/horovod-*.whl 2>/dev/null | head -n 1; }

# Compile Horovod against the environment's TensorFlow into the wheel cache, unless it is there (renamed
# into place once complete, so a reader never sees half a wheel; one builder at a time per key).
build_horovod_wheel() {
    local tmp
    mkdir -p "$WHEEL_CACHE"
    exec 6>"$WHEEL_DIR.lock"
    flock 6
    if [ -n "$(horovod_wheel)" ]; then flock -u 6; return 0; fi
    log "compiling Horovod against TensorFlow into $WHEEL_DIR (about 2.5 minutes on 2 cores)"
    tmp="$(mktemp -d "$WHEEL_CACHE/.build-XXXXXX")"
    (
        export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
        if [ $WITH_MPI = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
        export MAKEFLAGS="-j$(nproc)"
        pip_quietly "$ENV_DIR/bin/python" -m pip --disable-pip-version-check wheel -q --no-build-isolation \
            --no-deps --no-cache-dir -c "$ROOT/constraints.txt" -r "$ROOT/requirements/horovod.txt" -w "$tmp" >&2
    ) || { rm -rf "$tmp"; return 1; }
    mkdir -p "$WHEEL_DIR"
    mv "$tmp"/horovod-*.whl "$WHEEL_DIR/"
    rm -rf "$tmp"
    flock -u 6
}

build_environment() {
    log "building $ENV_DIR with $PYTHON39: $VARIANT, $HOROVOD_BUILD"
    rm -rf "$ENV_DIR"
    "$PYTHON39" -m venv "$ENV_DIR"
    local pip=("$ENV_DIR/bin/python" -m pip --disable-pip-version-check)
    pip_quietly "${pip[@]}" install -q --upgrade pip >&2
    local requirements=()
    for file in "${REQUIREMENT_FILES[@]}"; do requirements+=(-r "$file"); done
    pip_quietly "${pip[@]}" install -q -c "$ROOT/constraints.txt" "${requirements[@]}" >&2
    build_horovod_wheel
    log "installing Horovod from $(horovod_wheel)"
    pip_quietly "${pip[@]}" install -q -c "$ROOT/constraints.txt" "$(horovod_wheel)" >&2
    "$ENV_DIR/bin/horovodrun" --check-build >&2
    echo "$VARIANT, $HOROVOD_BUILD" >"$ENV_DIR/.complete"
}

# One builder at a time per environment; others wait and then reuse it.
exec 9>"$ENV_DIR.lock"
flock 9
if [ ! -f "$ENV_DIR/.complete" ]; then
    start=$(date +%s)
    build_environment
    log "environment ready in $(( $(date +%s) - start )) s: $VARIANT, $HOROVOD_BUILD"
else
    log "reusing $ENV_DIR: $(cat "$ENV_DIR/.complete")"
fi
flock -u 9
if [ $HOROVOD_WHEEL = 1 ] && [ -z "$(horovod_wheel)" ]; then
    # An environment built before the wheel cache existed: compile its wheel once from its TensorFlow
    # (the installed Horovod stays as it is; other setups of this environment need not wait).
    start=$(date +%s)
    build_horovod_wheel
    log "Horovod wheel kept in $WHEEL_DIR in $(( $(date +%s) - start )) s"
fi
"$ROOT/bin/build_kenlm.sh" "$ENV_DIR/bin/python" >/dev/null
# The released DeepSpeech and Coqui STT clients the export tests run exported models in.
"$ROOT/bin/setup_clients.sh" "$ENV_DIR/bin/python" >/dev/null
echo "$ENV_DIR/bin/python"
