#!/usr/bin/env bash
# one device command: the study's reference run_all.sh at its defaults (16 workers), new or RESUME'd,
# for at most RUNALL_S seconds; then PART of bench.sh in the time left (LIMIT in all)
set -uo pipefail
start=$SECONDS
tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp && export PATH=/tmp/nsys/target-linux-x64:$PATH
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
export PYTHON=python3 PYTHONUNBUFFERED=1
lscpu | grep -E "Model name|Thread|Core|Socket" > $OUT/lscpu.txt; nproc >> $OUT/lscpu.txt
if [ "${RUNALL_S:-0}" -gt 0 ]; then
  if [ -n "${RESUME:-}" ]; then out=$RESUME; timeout "$RUNALL_S" ./run_all.sh --resume "$out" > $OUT/run_all.log 2>&1
  else out=results/$(date -u +%Y%m%dT%H%M%SZ)-NVIDIA-H200
    timeout "$RUNALL_S" ./run_all.sh --workers 16 --no-install --out "$out" > $OUT/run_all.log 2>&1; fi
  echo "run_all rc=$? after $((SECONDS-start))s" | tee -a $OUT/run_all.log
  tar czf $OUT/run.tgz --exclude='*.sqlite' "$out"
fi
if [ -n "${PART:-}" ]; then LIMIT=$(( ${LIMIT:-570} - (SECONDS-start) )) PART=$PART bash .device/bench.sh; fi
ls -la $OUT
