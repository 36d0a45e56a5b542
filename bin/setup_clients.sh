#!/usr/bin/env bash
# Install the released inference clients that exported models must run in, one virtual environment
# each, into <env>/clients/ of the project's cached environment, and print that folder as the LAST
# line on stdout (logs go to stderr), so that
#     CLIENTS=$(bin/setup_clients.sh | tail -n 1)
# works anywhere; tests/test_export.py looks there (or in $DS_CLIENTS_DIR).
#
# Usage: bin/setup_clients.sh [PATH/TO/ENV/bin/python]   (without it, bin/setup.sh is asked for one)
#
#   <env>/clients/deepspeech/bin/deepspeech          deepspeech 0.9.3: .pb and .pbmm (TensorFlow 2.3)
#   <env>/clients/deepspeech-tflite/bin/deepspeech   deepspeech-tflite 0.9.3: .tflite (TF Lite 2.3)
#   <env>/clients/stt/bin/stt                        Coqui stt 1.4.0: .tflite
# deepspeech and deepspeech-tflite both install the module `deepspeech`, hence one environment each;
# their wheels need numpy < 2. The `.complete` marker, holding the hash of the pins below, is written
# last: an interrupted install, or one of other pins, is redone; a finished one makes a rerun return
# at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { echo "[setup_clients] $*" >&2; }
# pip names every configured but absent local index on stderr; keep the rest of what it says.
pip_quietly() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

CLIENTS="deepspeech==0.9.3 deepspeech-tflite==0.9.3 stt==1.4.0"
NUMPY="numpy==1.26.4"

PY="${1:-$("$ROOT/bin/setup.sh" | tail -n 1)}"
ENV_DIR="$(dirname "$(dirname "$PY")")"
CLIENTS_DIR="$ENV_DIR/clients"
KEY="$(echo "$CLIENTS $NUMPY $("$PY" -V 2>&1)" | sha256sum | cut -c1-12)"

install_clients() {
    local start pin
    start=$(date +%s)
    rm -rf "$CLIENTS_DIR"
    mkdir -p "$CLIENTS_DIR"
    for pin in $CLIENTS; do
        log "installing $pin"
        # A venv made by the environment's python is based on the same Python 3.9.
        "$PY" -m venv "$CLIENTS_DIR/${pin%%==*}"
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
