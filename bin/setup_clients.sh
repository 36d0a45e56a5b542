#!/usr/bin/env bash
# Install the released inference clients that exported models must run in, one virtual environment
# each, into <env>/clients/ of the project's cached environment, and print that folder as the LAST
# line on stdout (logs go to stderr), so that
#     CLIENTS=$(bin/setup_clients.sh | tail -n 1)
# works anywhere; tests/test_export.py looks there (or in $DS_CLIENTS_DIR). bin/setup.sh --clients (and
# --test) runs it.
#
# Usage: bin/setup_clients.sh [PATH/TO/ENV/bin/python]   (without it, bin/setup.sh is asked for one)
#
# The clients' wheels are for Python 3.9 and older (deepspeech, deepspeech-tflite, ds_ctcdecoder) or 3.10
# (stt), so their environments are made by a Python 3.9 of this machine, not the training one:
# $DS_CLIENTS_PYTHON if set (it must work), else python3.9 on PATH, else pyenv's 3.9.*. Where there is
# none, nothing is installed: <env>/clients/.missing says why (the tests that need them are skipped with
# that reason, tests/helpers/suite.py's client_python) and the script exits 1.
#
#   <env>/clients/deepspeech/bin/deepspeech          deepspeech 0.9.3: .pb and .pbmm (TensorFlow 2.3)
#   <env>/clients/deepspeech-tflite/bin/deepspeech   deepspeech-tflite 0.9.3: .tflite (TF Lite 2.3)
#   <env>/clients/stt/bin/stt                        Coqui stt 1.4.0: .tflite
#   <env>/clients/ds_ctcdecoder/bin/python           DeepSpeech 0.9.3's decoder, the reference the tests hold
#                                                    ours to (tests/helpers/suite.py, ds_ctcdecoder_output)
# deepspeech and deepspeech-tflite both install the module `deepspeech`, hence one environment each;
# their wheels need numpy < 2. The `.complete` marker, holding the hash of the pins below, is written
# last: an interrupted install, or one of other pins, is redone; a finished one makes a rerun return
# at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=python_candidates.sh
. "$ROOT/bin/python_candidates.sh"
log() { echo "[setup_clients] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

CLIENTS="deepspeech==0.9.3 deepspeech-tflite==0.9.3 stt==1.4.0 ds_ctcdecoder==0.9.3"
NUMPY="numpy==1.26.4"

PY="${1:-$("$ROOT/bin/setup.sh" | tail -n 1)}"
ENV_DIR="$(dirname "$(dirname "$PY")")"
CLIENTS_DIR="$ENV_DIR/clients"

# The Python 3.9 the clients' environments are made by, or a reason in .missing and exit 1.
find_python39() {
    local candidate
    if [ -n "${DS_CLIENTS_PYTHON:-}" ]; then
        [ "$(python_version "$DS_CLIENTS_PYTHON")" = 3.9 ] && venv_works "$DS_CLIENTS_PYTHON" \
            && { echo "$DS_CLIENTS_PYTHON"; return 0; }
        no_python39 "DS_CLIENTS_PYTHON=$DS_CLIENTS_PYTHON is not a Python 3.9 with a working venv"
    fi
    for candidate in "$(command -v python3.9 || true)" $(pyenv_pythons 3.9); do
        if [ -n "$candidate" ] && [ "$(python_version "$candidate")" = 3.9 ] && venv_works "$candidate"; then
            python_executable "$candidate"; return 0
        fi
    done
    no_python39 "no Python 3.9 found (DS_CLIENTS_PYTHON, python3.9 on PATH, or pyenv's versions/3.9.*)"
}

no_python39() {
    local reason="$1: the released clients (deepspeech 0.9.3, deepspeech-tflite 0.9.3, stt 1.4.0) and"
    reason="$reason ds_ctcdecoder 0.9.3 have wheels for Python 3.9 and older only"
    mkdir -p "$CLIENTS_DIR"
    rm -f "$CLIENTS_DIR/.complete"
    echo "$reason" >"$CLIENTS_DIR/.missing"
    log "ERROR: $reason; e.g. pyenv install 3.9, or DS_CLIENTS_PYTHON=/path/to/python3.9"
    exit 1
}

PY39="$(find_python39)"
KEY="$(echo "$CLIENTS $NUMPY $("$PY39" -V 2>&1)" | sha256sum | cut -c1-12)"

install_clients() {
    local start pin
    start=$(date +%s)
    rm -rf "$CLIENTS_DIR"
    mkdir -p "$CLIENTS_DIR"
    log "installing the released clients $CLIENTS with $PY39 (needed for --clients: tests/test_export.py and"
    log "the decoder tests; about 1 min)"
    for pin in $CLIENTS; do
        "$PY39" -m venv "$CLIENTS_DIR/${pin%%==*}"
        pip_quietly "$CLIENTS_DIR/${pin%%==*}/bin/python" -m pip --disable-pip-version-check install -q \
            "$pin" "$NUMPY" >&2
    done
    echo "$KEY" >"$CLIENTS_DIR/.complete"
    log "clients ready in $CLIENTS_DIR ($(( $(date +%s) - start )) s)"
}

# One installer at a time per environment; others wait and then reuse its result.
exec 7>"$ENV_DIR/clients.lock"
flock 7
if [ "$(cat "$CLIENTS_DIR/.complete" 2>/dev/null)" = "$KEY" ]; then
    log "reusing $CLIENTS_DIR"
else
    install_clients
fi
flock -u 7
echo "$CLIENTS_DIR"
