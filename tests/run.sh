#!/usr/bin/env bash
# Run the test suite on a fresh machine: sets up .venv (tools/setup_env.sh), fetches nsys for the
# profiling tests (tools/get_nsys.sh), then runs pytest in as many processes as there are CPUs, up to 4
# (pytest-xdist: most tests wait on a script they started). Extra arguments go to pytest, after those:
# `tests/run.sh -m "not e2e"` leaves out the end-to-end runs of whole scripts and takes a few minutes;
# `tests/run.sh -n 0` runs the tests one at a time.
#
# Everything the tests and their set-up write goes into one temporary folder (TMPDIR: pytest's tmp_path,
# torchrun's and nsys's files, the photo cache the tests make), removed when they end: nothing is left.
#
# usage: tests/run.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpu-starvation-tests.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
py=$(tools/setup_env.sh pytest pytest-xdist)
if nsys_bin=$(tools/get_nsys.sh); then
  export PATH="$nsys_bin:$PATH"
  export LD_LIBRARY_PATH="$PWD/tools/nsys/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "tests/run.sh: no nsys: the profiling tests will be skipped (and fail under CI=true)" >&2
fi
cpus=$(nproc)
# (-p no:benchmark: pytest-benchmark, where the machine has it, warns once a process that xdist disables it)
"$py" -m pytest -q -p no:cacheprovider -p no:benchmark --basetemp "$scratch/pytest" -n $((cpus < 4 ? cpus : 4)) \
  --dist loadgroup tests "$@"
