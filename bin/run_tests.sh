#!/usr/bin/env bash
# Set up everything the tests use if needed (bin/setup.sh --test: the environment with Horovod, KenLM's tools,
# the released clients and the test infrastructure's Debian packages), then run the whole test suite (what CI runs).
# Extra arguments go to pytest, e.g. bin/run_tests.sh -k overfit -x
#   --fast     the fast tier only (doc/TESTING.rst): the tests not marked slow, and those marked fast
#   --modules  also list the package's modules the tests ran code of (tests/helpers/modules_exercised.py);
#              runs in one process (the tracer lives there)
# The tests run on one pytest-xdist worker per core (at most 4; DS_TEST_WORKERS sets the number, 0 runs them
# in this process), each test file on one worker, the slowest files first (tests/conftest.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$("$ROOT/bin/setup.sh" --test | tail -n 1)"
cd "$ROOT"
CORES="$(nproc)"
WORKERS="${DS_TEST_WORKERS:-$(( CORES < 4 ? CORES : 4 ))}"
ARGS=()
for arg in "$@"; do
    case "$arg" in
        --fast) ARGS+=(-m "fast or not slow") ;;
        --modules) ARGS+=(-p tests.helpers.modules_exercised); WORKERS=0 ;;
        *) ARGS+=("$arg") ;;
    esac
done
XDIST=(-n "$WORKERS")
[ "$WORKERS" = 0 ] || XDIST+=(--dist loadgroup --no-loadscope-reorder)
exec "$PY" -m pytest tests "${XDIST[@]}" ${ARGS[@]+"${ARGS[@]}"}
