#!/usr/bin/env bash
# Make (or reuse) the project's Python environment and print its interpreter's path as the LAST line
# on stdout; everything else goes to stderr, so `PY=$(bin/setup.sh | tail -n 1)` works anywhere.
#
# Without flags it sets up what training, testing a model and decoding need (the main job,
# bin/run_smoke_test.sh): the Debian packages for audio and for the virtual environment, and the
# environment with TensorFlow and the rest of requirements/. What only some commands use is added to
# the same environment by its flag, and built when asked for:
#   --horovod      Horovod 0.28.1 compiled against the environment's TensorFlow (about 2.5 min on 2
#                  cores), with the compiler, cmake and an MPI (Debian packages) it needs
#   --kenlm        KenLM's lmplz, build_binary and filter for data/lm/generate_lm.py (bin/build_kenlm.sh,
#                  about 1 min), with the Boost/zlib/bz2/lzma development packages
#   --clients      the released DeepSpeech 0.9.3 and Coqui STT 1.4.0 clients the export tests run
#                  (bin/setup_clients.sh), in environments of a Python 3.9 found on the machine
#   --test         what bin/run_tests.sh needs: all three above, and the Debian packages the tests use
#                  (Slurm, munge, an SSH server, sshfs, strace, iproute2, espeak-ng, ffmpeg, buildah, ...)
# Debian packages are installed with a policy-rc.d that starts no service, and the services they bring are
# disabled: nothing the set-up installs is left running or starts at boot (the tests start their own).
#
# The training Python is the machine's own: $DS_PYTHON if set (it must be usable), else the first usable
# of /usr/bin/python3, python3, python3.11 and python3.10 on PATH, pyenv's 3.11.* and 3.10.*, and a
# Python 3.11 that uv installed. Usable: Python 3.10 or 3.11 (TensorFlow 2.15.1 has no wheels for 3.12,
# Horovod 0.28.1 breaks on TensorFlow 2.16+) whose venv gives a working pip; as root, Debian's
# python3.X-venv is installed for it when missing. When none is usable, it installs Python 3.11 with uv
# (`pip install uv` in a small bootstrap environment, then `uv python install 3.11`) and says so.
#
# The environment lives outside the checkout, keyed by a hash of constraints.txt (the exact versions),
# the requirements/ files it installs, the Python version, and whether it is a GPU environment, so
# every clone on this machine (CI's fresh clone included) reuses it. A build that is interrupted is never
# reused: the `.complete` marker (which says what was built) is written last, and `.horovod` says which
# Horovod build is in it. Horovod must be compiled against the installed TensorFlow, hence
# --no-build-isolation. That compiled wheel is kept in a wheel cache under the same key (and MPI, the OS
# release), so a later setup with the same key, such as the one inside the Docker image build
# (bin/build_docker_cpu_local.sh mounts the cache, doc/DOCKER.rst), installs it instead of compiling.
#
# Usage: bin/setup.sh [--gpu] [--horovod] [--kenlm] [--clients] [--test] [--dry-run | --python]
#   --gpu (or DS_GPU=1)  a GPU environment: tensorflow[and-cuda] (CUDA and cuDNN as pip packages) and,
#                  when a CUDA toolkit is found (nvcc), Horovod with NCCL allreduce (doc/GPU.rst)
#   --dry-run      print the interpreter, the Debian packages, what pip would install and what would be
#                  built, and the environment's path, installing and building nothing
#   --python       print the Python it builds from (for an environment of your own) and stop
#
# Environment knobs:
#   DS_ENV_CACHE   folder holding the environments (default ${XDG_CACHE_HOME:-~/.cache}/deepspeech-training)
#   DS_WHEEL_CACHE folder of the compiled Horovod wheels, one subfolder per environment key, MPI and OS
#                  release (default $DS_ENV_CACHE/wheels); a wheel found there is installed instead of compiled
#   DS_PYTHON      the Python 3.10 or 3.11 to use instead of searching for one
#   DS_NO_APT=1    never call apt-get, even as root (`--dry-run` lists the Debian packages to ask for)
#   DS_CLIENTS_PYTHON  the Python 3.9 for --clients (bin/setup_clients.sh)
#   HOROVOD_GPU_OPERATIONS=NCCL   build Horovod's GPU allreduce with NCCL (needs CUDA and libnccl-dev;
#                  Dockerfile.train's GPU variant sets it; --gpu sets it when nvcc is found); part of the key
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=python_candidates.sh
. "$ROOT/bin/python_candidates.sh"
USAGE="usage: bin/setup.sh [--gpu] [--horovod] [--kenlm] [--clients] [--test] [--dry-run | --python]"
GPU="${DS_GPU:-0}"
DRY_RUN=0
ONLY_PYTHON=0
HOROVOD=0
KENLM=0
CLIENTS=0
TEST=0
for arg in "$@"; do
    case "$arg" in
        --gpu) GPU=1 ;;
        --dry-run) DRY_RUN=1 ;;
        --python) ONLY_PYTHON=1 ;;
        --horovod) HOROVOD=1 ;;
        --kenlm) KENLM=1 ;;
        --clients) CLIENTS=1 ;;
        --test) TEST=1 HOROVOD=1 KENLM=1 CLIENTS=1 ;;
        *) echo "[setup] ERROR: unknown argument $arg ($USAGE)" >&2; exit 2 ;;
    esac
done
log() { echo "[setup] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }
CACHE="${DS_ENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deepspeech-training}"

# ---- Debian packages -------------------------------------------------------------------------------------
# Training and decoding: audio I/O (libsndfile1: soundfile; libopus0: Opus in .sdb files, opuslib) and sox,
# the tool the input checks' messages name for converting audio. (python3.X-venv comes with the interpreter.)
APT_BASE="sox libsndfile1 libopus0"
# --horovod: its compile, and an MPI (horovodrun's MPI path, mpirun, srun --mpi=pmix). (+ python3.X-dev)
APT_HOROVOD="cmake g++ make openmpi-bin libopenmpi-dev"
# --kenlm: what KenLM's lmplz, build_binary and filter build needs.
APT_KENLM="cmake g++ make libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev
  zlib1g-dev libbz2-dev liblzma-dev"
# --test: real speech for the tests (espeak-ng; ffmpeg encodes the importers' formats), strace and time (which
# rank touched which file; the benchmarks), iproute2 (ip netns, tc: the two-host tests and
# benchmarks/network.py), sshfs and openssh-server (a networked filesystem, tests/helpers/netns_sshfs.py),
# slurm-wlm, munge and libpmix-dev (the two-node Slurm cluster of tests/test_slurm.py), buildah and
# debootstrap (the Docker image's test, bin/build_docker_cpu_local.sh).
APT_TEST="espeak-ng ffmpeg strace time iproute2 sshfs openssh-server slurm-wlm munge libpmix-dev buildah debootstrap"

can_apt() { [ "${DS_NO_APT:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }

missing_debian_packages() {
    local p missing=""
    command -v dpkg-query >/dev/null || return 0
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    echo "${missing# }"
}

installed_debian_packages() {
    dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" {print $2}' | sort
}

# While packages install, /usr/sbin/policy-rc.d tells their scripts to start no service (exit 101);
# a policy the machine already had is put back afterwards.
POLICY=/usr/sbin/policy-rc.d
POLICY_HELD=0
hold_services() {
    POLICY_BACKUP=""
    if [ -e "$POLICY" ]; then POLICY_BACKUP="$(mktemp "$POLICY.setup-XXXXXX")"; cp -p "$POLICY" "$POLICY_BACKUP"; fi
    POLICY_HELD=1
    trap release_services EXIT
    printf '#!/bin/sh\n# bin/setup.sh is installing packages: start no service\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
}
release_services() {
    [ $POLICY_HELD = 1 ] || return 0
    if [ -n "$POLICY_BACKUP" ]; then mv -f "$POLICY_BACKUP" "$POLICY"; else rm -f "$POLICY"; fi
    POLICY_HELD=0
    trap - EXIT
}

# The services the given (just installed) packages ship, disabled: none starts at boot.
disable_services() {
    local pkg unit disabled="" units='^/(usr/)?lib/systemd/system/[^/@]+\.(service|socket|timer|path)$'
    for pkg in "$@"; do
        for unit in $(dpkg -L "$pkg" 2>/dev/null | grep -E "$units"); do
            command -v systemctl >/dev/null || continue
            systemctl disable --quiet "$(basename "$unit")" >/dev/null 2>&1 && disabled="$disabled $(basename "$unit")"
        done
        for unit in $(dpkg -L "$pkg" 2>/dev/null | grep -E '^/etc/init\.d/[^/]+$'); do
            command -v update-rc.d >/dev/null || continue
            update-rc.d "$(basename "$unit")" disable >/dev/null 2>&1 && disabled="$disabled $(basename "$unit")"
        done
    done
    [ -z "$disabled" ] || log "services of the new packages left stopped and disabled:$disabled"
}

APT_UPDATED=0
# Install the missing ones of the given Debian packages (as root), or say how (otherwise).
install_debian_packages() {
    local missing before apt_log
    missing="$(missing_debian_packages "$@")"
    [ -n "$missing" ] || return 0
    if ! can_apt; then
        log "WARNING: missing Debian packages: $missing"
        log "         install them with: sudo apt-get install --no-install-recommends $missing"
        return 0
    fi
    log "installing Debian packages: $missing"
    before="$(installed_debian_packages)"
    apt_log="$(mktemp)"
    hold_services
    # apt's and dpkg's chatter goes to a log, shown if they fail
    # shellcheck disable=SC2086
    if ! { { [ $APT_UPDATED = 1 ] || apt-get update -qq; } && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $missing; } >"$apt_log" 2>&1; then
        tail -n 30 "$apt_log" >&2
        rm -f "$apt_log"
        log "ERROR: apt-get could not install: $missing (its last lines above)"
        exit 1
    fi
    APT_UPDATED=1
    rm -f "$apt_log"
    release_services
    # shellcheck disable=SC2046
    disable_services $(comm -13 <(echo "$before") <(installed_debian_packages))
}

# ---- the training Python ---------------------------------------------------------------------------------
SUPPORTED="3.10 3.11"
supported() { case " $SUPPORTED " in *" $1 "*) return 0 ;; esac; return 1; }
UV_PYTHONS="${UV_PYTHON_INSTALL_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/uv/python}"

# FOUND= the interpreter if `candidate` is a usable training Python (installing python3.X-venv for Debian's
# as root, unless --dry-run); otherwise WHY_NOT= why not, and fail.
usable_python() {
    local candidate="$1" version venv_package
    FOUND="" WHY_NOT=""
    version="$(python_version "$candidate")" || { WHY_NOT="$candidate does not run"; return 1; }
    supported "$version" || { WHY_NOT="$candidate is Python $version (supported: ${SUPPORTED// /, })"; return 1; }
    if ! venv_works "$candidate"; then
        venv_package="$(debian_python_package "$candidate" venv)" \
            || { WHY_NOT="$candidate (Python $version) cannot make a virtual environment with pip"; return 1; }
        if [ $DRY_RUN = 1 ] && can_apt; then
            log "$candidate (Python $version): would install $venv_package first"
        elif can_apt; then
            install_debian_packages "$venv_package"
            venv_works "$candidate" || { WHY_NOT="$candidate: no working venv even with $venv_package"; return 1; }
        else
            WHY_NOT="$candidate (Python $version) has no venv/ensurepip: sudo apt-get install $venv_package"
            return 1
        fi
    fi
    FOUND="$(python_executable "$candidate")"
}

# uv, installed with pip into a small environment of any Python that can make one (or with pip --user).
bootstrap_uv() {
    local python
    command -v uv && return 0
    [ -x "$CACHE/uv/bin/uv" ] && { echo "$CACHE/uv/bin/uv"; return 0; }
    for python in /usr/bin/python3 python3 "$(command -v python3.12 || true)" "$(command -v python3.13 || true)"; do
        [ -n "$python" ] && python_version "$python" >/dev/null || continue
        if "$python" -m venv "$CACHE/uv" >/dev/null 2>&1 \
                && pip_quietly "$CACHE/uv/bin/python" -m pip --disable-pip-version-check install -q 'uv>=0.7' >&2; then
            echo "$CACHE/uv/bin/uv"; return 0
        fi
        rm -rf "$CACHE/uv"
        if pip_quietly "$python" -m pip --disable-pip-version-check install -q --user 'uv>=0.7' >&2; then
            "$python" -c 'import os, site; print(os.path.join(site.USER_BASE, "bin", "uv"))'; return 0
        fi
    done
    return 1
}

uv_python() {
    local uv
    log "no usable Python ${SUPPORTED// / or } on this machine: getting Python 3.11 with uv (uv python install 3.11)"
    mkdir -p "$CACHE"
    uv="$(bootstrap_uv)" || { log "could not install uv with pip (no Python with venv or pip here)"; return 1; }
    "$uv" python install 3.11 >&2 || return 1
    "$uv" python find --managed-python 3.11 2>/dev/null || "$uv" python find 3.11
}

# PYTHON= the training Python, or a message and failure.
find_python() {
    local candidate tried="" seen=" "
    if [ -n "${DS_PYTHON:-}" ]; then
        if usable_python "$DS_PYTHON"; then PYTHON="$FOUND"; return 0; fi
        log "ERROR: DS_PYTHON=$DS_PYTHON is not usable: $WHY_NOT"
        log "       the training environment needs Python ${SUPPORTED// / or } with a working venv"
        return 1
    fi
    for candidate in /usr/bin/python3 "$(command -v python3 || true)" "$(command -v python3.11 || true)" \
            "$(command -v python3.10 || true)" $(pyenv_pythons 3.11 3.10) \
            $(ls -d "$UV_PYTHONS"/cpython-3.11.*/bin/python3.11 2>/dev/null | sort -rV); do
        [ -n "$candidate" ] && [ -e "$candidate" ] || continue
        case "$seen" in *" $(readlink -f "$candidate") "*) continue ;; esac
        seen="$seen$(readlink -f "$candidate") "
        if usable_python "$candidate"; then PYTHON="$FOUND"; return 0; fi
        tried="$tried
[setup]   $WHY_NOT"
    done
    [ -z "$tried" ] || log "not usable:$tried"
    if [ $DRY_RUN = 1 ]; then
        log "ERROR: no usable Python ${SUPPORTED// / or }: bin/setup.sh would install Python 3.11 with uv"
        return 1
    fi
    if PYTHON="$(uv_python)" && [ -n "$PYTHON" ]; then
        log "using $PYTHON, installed by uv"
        return 0
    fi
    cat >&2 <<'EOF'
[setup] ERROR: no Python 3.10 or 3.11 found, and uv could not install one (its message is above).
[setup] The training environment needs Python 3.10 or 3.11 (TensorFlow 2.15.1 has no wheels for 3.12;
[setup] Horovod 0.28.1 breaks on TensorFlow 2.16+). Get one with any of:
[setup]   apt-get install python3.11 python3.11-venv   (Debian 12; Ubuntu 22.04: python3.10 python3.10-venv)
[setup]   uv python install 3.11                       (uv from PyPI: pip install uv)
[setup]   pyenv install 3.11                           (then rerun bin/setup.sh)
[setup]   DS_PYTHON=/path/to/python3.11 bin/setup.sh
EOF
    return 1
}

find_python || exit 1
if [ $ONLY_PYTHON = 1 ]; then echo "$PYTHON"; exit 0; fi

# ---- what this run sets up ---------------------------------------------------------------------------------
APT="$APT_BASE"
if [ $HOROVOD = 1 ]; then
    APT="$APT $APT_HOROVOD"
    # Horovod's compile includes Python.h: Debian's interpreters have it in python3.X-dev.
    if ! "$PYTHON" -c 'import os, sysconfig
assert os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
        APT="$APT $(debian_python_package "$PYTHON" dev || true)"
    fi
fi
[ $KENLM = 1 ] && APT="$APT $APT_KENLM"
[ $TEST = 1 ] && APT="$APT $APT_TEST"
APT="$(echo $APT | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' ')"
APT="${APT% }"

[ $DRY_RUN = 1 ] || install_debian_packages $APT
WITH_MPI=0
if command -v mpicc >/dev/null || { [ $DRY_RUN = 1 ] && [ $HOROVOD = 1 ] && can_apt; }; then WITH_MPI=1; fi
# What pip installs, all under constraints.txt; Horovod comes second (--horovod), compiled against that TensorFlow.
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

KEY="$( { cat "$ROOT/constraints.txt" "${REQUIREMENT_FILES[@]}" "$ROOT/requirements/horovod.txt"; "$PYTHON" -V 2>&1;
          if [ "$GPU" = 1 ]; then echo "gpu=1"; fi;
          if [ -n "${HOROVOD_GPU_OPERATIONS:-}" ]; then echo "gpu=$HOROVOD_GPU_OPERATIONS"; fi; } \
        | sha256sum | cut -c1-12)"
ENV_DIR="$CACHE/env-$KEY"
# The compiled Horovod wheel: the environment's key, MPI or not, and the OS release whose libraries it links.
OS_RELEASE="$( (. /etc/os-release && echo "$ID-$VERSION_ID") 2>/dev/null || echo unknown)"
WHEEL_CACHE="${DS_WHEEL_CACHE:-$CACHE/wheels}"
if [ $WITH_MPI = 1 ]; then TRANSPORT=mpi; else TRANSPORT=gloo; fi
WHEEL_DIR="$WHEEL_CACHE/horovod-$KEY-$TRANSPORT-$OS_RELEASE"
HOROVOD_BUILD="Horovod with Gloo$(if [ $WITH_MPI = 1 ]; then echo ' and MPI'; fi)"
HOROVOD_BUILD="$HOROVOD_BUILD${HOROVOD_GPU_OPERATIONS:+, GPU ops $HOROVOD_GPU_OPERATIONS}"

if [ $DRY_RUN = 1 ]; then
    echo "# Python: $PYTHON ($("$PYTHON" -V 2>&1))"
    missing="$(missing_debian_packages $APT)"
    echo "# Debian packages: $APT${missing:+ (missing: $missing)}"
    echo "# $VARIANT: pip install -c constraints.txt with"
    grep -hv '^#' "${REQUIREMENT_FILES[@]}"
    if [ $HOROVOD = 1 ]; then
        echo "# $HOROVOD_BUILD, compiled against it (--no-build-isolation):"
        grep -hv '^#' "$ROOT/requirements/horovod.txt"
    fi
    [ $KENLM = 1 ] && echo "# KenLM's tools: bin/build_kenlm.sh"
    [ $CLIENTS = 1 ] && echo "# the released clients, with a Python 3.9: bin/setup_clients.sh"
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
    local tmp start
    mkdir -p "$WHEEL_CACHE"
    exec 6>"$WHEEL_DIR.lock"
    flock 6
    if [ -n "$(horovod_wheel)" ]; then flock -u 6; return 0; fi
    start=$(date +%s)
    log "building Horovod 0.28.1 against TensorFlow (needed for --horovod; about 2.5 min on 2 cores) into $WHEEL_DIR"
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
    log "Horovod compiled in $(( $(date +%s) - start )) s"
}

PIP=("$ENV_DIR/bin/python" -m pip --disable-pip-version-check)

build_environment() {
    log "building $ENV_DIR with $PYTHON ($("$PYTHON" -V 2>&1)): $VARIANT"
    rm -rf "$ENV_DIR"
    "$PYTHON" -m venv "$ENV_DIR"
    pip_quietly "${PIP[@]}" install -q --upgrade pip >&2
    local requirements=()
    for file in "${REQUIREMENT_FILES[@]}"; do requirements+=(-r "$file"); done
    pip_quietly "${PIP[@]}" install -q -c "$ROOT/constraints.txt" "${requirements[@]}" >&2
    echo "$VARIANT" >"$ENV_DIR/.complete"
}

# Horovod in the environment, as this machine builds it now (an MPI installed since is a rebuild).
install_horovod() {
    local installed
    installed="$(cat "$ENV_DIR/.horovod" 2>/dev/null || true)"
    if [ "$installed" = "$HOROVOD_BUILD" ]; then log "reusing $installed"; return 0; fi
    build_horovod_wheel
    log "installing $HOROVOD_BUILD from $(horovod_wheel)"
    rm -f "$ENV_DIR/.horovod"
    if [ -n "$installed" ]; then
        pip_quietly "${PIP[@]}" install -q --force-reinstall --no-deps "$(horovod_wheel)" >&2
    else
        pip_quietly "${PIP[@]}" install -q -c "$ROOT/constraints.txt" "$(horovod_wheel)" >&2
    fi
    TF_CPP_MIN_LOG_LEVEL=3 "$ENV_DIR/bin/horovodrun" --check-build >&2
    echo "$HOROVOD_BUILD" >"$ENV_DIR/.horovod"
}

# One builder at a time per environment; others wait and then reuse it.
exec 9>"$ENV_DIR.lock"
flock 9
if [ ! -f "$ENV_DIR/.complete" ]; then
    start=$(date +%s)
    build_environment
    log "environment ready in $(( $(date +%s) - start )) s: $VARIANT"
else
    log "reusing $ENV_DIR: $(cat "$ENV_DIR/.complete")"
fi
[ $HOROVOD = 0 ] || install_horovod
flock -u 9
[ $KENLM = 0 ] || "$ROOT/bin/build_kenlm.sh" "$ENV_DIR/bin/python" >/dev/null
if [ $CLIENTS = 1 ] && ! "$ROOT/bin/setup_clients.sh" "$ENV_DIR/bin/python" >/dev/null; then
    log "WARNING: the released clients are not installed (above: why); tests/test_export.py skips their tests"
fi
echo "$ENV_DIR/bin/python"
