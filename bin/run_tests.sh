#!/usr/bin/env bash
# Set up the environment if needed (bin/setup.sh), then run the whole test suite.
# Extra arguments go to pytest, e.g. bin/run_tests.sh -k overfit -x
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$("$ROOT/bin/setup.sh" | tail -n 1)"
cd "$ROOT"
exec "$PY" -m pytest tests "$@"
