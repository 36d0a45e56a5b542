#!/usr/bin/env bash
# Make (or reuse) the project's Python environment and print its interpreter's path as the LAST line
# on stdout; everything else goes to stderr, so `PY=$(bin/setup.sh | tail -n 1)` works anywhere.
#
# The environment lives outside the checkout, keyed by a hash of the pinned requirements, the
# Python version and whether Horovod is built with MPI, so every clone on this machine (CI's fresh
# clone included) reuses it. A build that is interrupted is never reused: the `.complete` marker is
# written last. Horovod must be compiled against the installed TensorFlow, hence the second step
# with --no-build-isolation.
#
# Environment knobs:
#   DS_ENV_CACHE   folder holding the environments (default ${XDG_CACHE_HOME:-~/.cache}/deepspeech-training)
#   DS_PYTHON      a python3.9 interpreter to use instead of searching for one
#   DS_NO_APT=1    never call apt-get, even as root
#   HOROVOD_GPU_OPERATIONS=NCCL   build Horovod's GPU allreduce with NCCL (needs CUDA and libnccl-dev;
#                  Dockerfile.train's GPU variant sets it); it is part of the environment's key
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "[setup] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

# Debian packages: real speech for tests (espeak-ng, sox, ffmpeg), audio I/O (libsndfile1), the
# Horovod build (cmake, g++), an MPI, strace (tests watch which rank touches which file), and what KenLM's lmplz/build_binary build needs.
# iproute2 (ip netns, tc): the two-host tests and bin/benchmark_network.py. libopus0: Opus in .sdb files (opuslib).
# sshfs, openssh-server: a networked filesystem for bin/benchmark_storage.py (tests/helpers/netns_sshfs.py).
APT_PACKAGES="espeak-ng sox ffmpeg libsndfile1 cmake g++ make openmpi-bin libopenmpi-dev strace iproute2 libopus0 sshfs openssh-server
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

install_debian_packages
PYTHON39="$(find_python39)"
WITH_MPI=0
command -v mpicc >/dev/null && WITH_MPI=1

KEY="$( { cat "$ROOT/requirements.txt" "$ROOT/requirements-horovod.txt"; "$PYTHON39" -V 2>&1; echo "mpi=$WITH_MPI";
          if [ -n "${HOROVOD_GPU_OPERATIONS:-}" ]; then echo "gpu=$HOROVOD_GPU_OPERATIONS"; fi; } \
        | sha256sum | cut -c1-12)"
CACHE="${DS_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deepspeech-training}"
ENV_DIR="$CACHE/env-$KEY"
mkdir -p "$CACHE"

build_environment() {
    log "building $ENV_DIR with $PYTHON39 (Horovod with Gloo$([ $WITH_MPI = 1 ] && echo ' and MPI')${HOROVOD_GPU_OPERATIONS:+, GPU ops $HOROVOD_GPU_OPERATIONS})"
    rm -rf "$ENV_DIR"
    "$PYTHON39" -m venv "$ENV_DIR"
    local pip=("$ENV_DIR/bin/python" -m pip --disable-pip-version-check)
    pip_quietly "${pip[@]}" install -q --upgrade pip >&2
    pip_quietly "${pip[@]}" install -q -r "$ROOT/requirements.txt" >&2
    log "compiling Horovod against TensorFlow (about 3 minutes on 2 cores)"
    (
        export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
        if [ $WITH_MPI = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
        export MAKEFLAGS="-j$(nproc)"
        pip_quietly "${pip[@]}" install -q --no-build-isolation --no-cache-dir -r "$ROOT/requirements-horovod.txt" >&2
    )
    "$ENV_DIR/bin/horovodrun" --check-build >&2
    touch "$ENV_DIR/.complete"
}

# One builder at a time per environment; others wait and then reuse it.
exec 9>"$ENV_DIR.lock"
flock 9
if [ ! -f "$ENV_DIR/.complete" ]; then
    start=$(date +%s)
    build_environment
    log "environment ready in $(( $(date +%s) - start )) s"
else
    log "reusing $ENV_DIR"
fi
flock -u 9
"$ROOT/bin/build_kenlm.sh" "$ENV_DIR/bin/python" >/dev/null
# The released DeepSpeech and Coqui STT clients the export tests run exported models in.
"$ROOT/bin/setup_clients.sh" "$ENV_DIR/bin/python" >/dev/null
echo "$ENV_DIR/bin/python"
