#!/usr/bin/env bash
# Set up the environment if needed (bin/setup.sh), then run the whole test suite (what CI runs).
# Extra arguments go to pytest, e.g. bin/run_tests.sh -k overfit -x
#   --fast     the fast tier only (doc/TESTING.rst): the tests not marked slow, and those marked fast
#   --modules  also list the package's modules the tests ran code of (tests/helpers/modules_exercised.py)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$("$ROOT/bin/setup.sh" | tail -n 1)"
cd "$ROOT"
ARGS=()
for arg in "$@"; do
    case "$arg" in
        --fast) ARGS+=(-m "fast or not slow") ;;
        --modules) export PYTHONPATH="$ROOT/tests/helpers${PYTHONPATH:+:$PYTHONPATH}"; ARGS+=(-p modules_exercised) ;;
        *) ARGS+=("$arg") ;;
    esac
done
exec "$PY" -m pytest tests ${ARGS[@]+"${ARGS[@]}"}
