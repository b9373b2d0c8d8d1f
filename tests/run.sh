#!/usr/bin/env bash
# Run the test suite on a fresh machine: sets up .venv (tools/setup_env.sh), fetches nsys for the
# profiling tests (tools/get_nsys.sh), then runs pytest. Extra arguments go to pytest.
#
# usage: tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

py=$(tools/setup_env.sh pytest)
if nsys_bin=$(tools/get_nsys.sh); then
  export PATH="$nsys_bin:$PATH"
  export LD_LIBRARY_PATH="$PWD/tools/nsys/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "tests/run.sh: no nsys: the profiling tests will be skipped (and fail under CI=true)" >&2
fi
exec "$py" -m pytest -q tests "$@"
