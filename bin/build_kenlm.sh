#!/usr/bin/env bash
# Build KenLM's lmplz, build_binary and filter once into the project's cached environment and print
# their folder as the LAST line on stdout (logs go to stderr), so that
#     KENLM_BIN=$(bin/build_kenlm.sh | tail -n 1)
# works anywhere. data/lm/generate_lm.py uses these tools to build a language model. bin/setup.sh --kenlm
# (and --test) installs the Debian packages the build needs, then runs this.
#
# Usage: bin/build_kenlm.sh [PATH/TO/ENV/bin/python]   (without it, bin/setup.sh is asked for one)
#
# The tools go to <env>/kenlm/bin, <env> being the environment holding that python. The source is
# KenLM's source distribution on PyPI, which carries the whole C++ tree, pinned by version and hash.
# Only the three needed targets are compiled (40 to 70 s on 2 cores, depending on their load). The
# `.complete` marker is written last, so an interrupted build is redone and a finished one makes a
# rerun return at once. The compiled tools are also kept in bin/setup.sh's wheel cache (DS_WHEEL_CACHE,
# default the environments' folder's wheels/), keyed by KenLM's version and hash, the OS release and
# the machine, so another environment, or the Docker image build that mounts that cache, copies them
# instead of compiling.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "[build_kenlm] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }
# Compilers are chatty (KenLM's deprecation warnings); keep their output unless the step fails.
logged() {
    if ! "$@" >>"$work/build.log" 2>&1; then
        tail -n 40 "$work/build.log" >&2
        log "ERROR: '$*' failed (last lines above); bin/setup.sh --kenlm installs the Debian packages it needs"
        exit 1
    fi
}

KENLM_VERSION=0.3.0
KENLM_SHA256=c4628bb9fb63c8a6f9240035b8b037385cfc404cb72e933cf48878291edac1e8
TARGETS="lmplz build_binary filter"

PY="${1:-$("$ROOT/bin/setup.sh" | tail -n 1)}"
ENV_DIR="$(dirname "$(dirname "$PY")")"
if [ ! -x "$PY" ] || [ ! -f "$ENV_DIR/pyvenv.cfg" ]; then
    log "ERROR: $PY is not the python of a virtual environment; pass the one bin/setup.sh prints"
    exit 1
fi
KENLM_DIR="$ENV_DIR/kenlm"
BIN_DIR="$KENLM_DIR/bin"
OS_RELEASE="$( (. /etc/os-release && echo "$ID-$VERSION_ID") 2>/dev/null || echo unknown)"
KEPT="${DS_WHEEL_CACHE:-$(dirname "$ENV_DIR")/wheels}/kenlm-$KENLM_VERSION-${KENLM_SHA256:0:12}-$OS_RELEASE-$(uname -m)"

# The kept tools, when all are there and find their shared libraries (the Debian packages of setup.sh --kenlm).
copy_kept() {
    local target
    for target in $TARGETS; do
        [ -x "$KEPT/$target" ] || return 1
        ! ldd "$KEPT/$target" 2>/dev/null | grep -q 'not found' || return 1
    done
    rm -rf "$KENLM_DIR"
    mkdir -p "$BIN_DIR"
    for target in $TARGETS; do install -m 755 "$KEPT/$target" "$BIN_DIR/$target"; done
    touch "$KENLM_DIR/.complete"
    log "KenLM tools copied from $KEPT to $BIN_DIR"
}

# Keep the tools just built (renamed into place complete); a cache that cannot be written is skipped.
keep() {
    local tmp
    mkdir -p "$(dirname "$KEPT")" 2>/dev/null && tmp="$(mktemp -d "$KEPT.XXXXXX" 2>/dev/null)" || return 0
    cp -a "$BIN_DIR/." "$tmp/"
    mv -T "$tmp" "$KEPT" 2>/dev/null || rm -rf "$tmp"
}

build_kenlm() {
    local start
    start=$(date +%s)
    rm -rf "$KENLM_DIR"
    mkdir -p "$BIN_DIR"
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    log "building KenLM's $TARGETS (needed for --kenlm: data/lm/generate_lm.py; about 1 min on 2 cores)"
    log "fetching the kenlm $KENLM_VERSION source distribution from PyPI"
    echo "kenlm==$KENLM_VERSION --hash=sha256:$KENLM_SHA256" >"$work/requirements.txt"
    # --no-build-isolation: pip reads the sdist's metadata with the environment's setuptools and wheel
    # (pinned in requirements.txt); otherwise it would first compile cmake from source, the sdist's
    # declared build requirement.
    if ! pip_quietly "$PY" -m pip --disable-pip-version-check download -q --no-deps --no-binary :all: \
            --no-build-isolation --require-hashes -r "$work/requirements.txt" -d "$work" >&2; then
        log "ERROR: could not download kenlm==$KENLM_VERSION from PyPI (pip's message is above)"
        exit 1
    fi
    tar -xzf "$work/kenlm-$KENLM_VERSION.tar.gz" -C "$work"
    log "compiling $TARGETS with cmake and make -j$(nproc)"
    logged cmake -S "$work/kenlm-$KENLM_VERSION" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
        -DCOMPILE_TESTS=OFF -DENABLE_PYTHON=OFF -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
    logged make -C "$work/build" -j"$(nproc)" $TARGETS
    for target in $TARGETS; do
        install -m 755 "$work/build/bin/$target" "$BIN_DIR/$target"
    done
    touch "$KENLM_DIR/.complete"
    log "KenLM tools ready in $BIN_DIR ($(( $(date +%s) - start )) s)"
}

# One builder at a time per environment; others wait and then reuse its result.
exec 8>"$ENV_DIR/kenlm.lock"
flock 8
if [ -f "$KENLM_DIR/.complete" ]; then
    log "reusing $BIN_DIR"
    [ -d "$KEPT" ] || keep   # built before the cache existed
elif ! copy_kept; then
    build_kenlm
    keep
fi
flock -u 8
echo "$BIN_DIR"
