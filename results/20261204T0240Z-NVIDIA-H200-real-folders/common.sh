#!/usr/bin/env bash
# What run1.sh to run3.sh share: the machine's line, the camera-like folder and the wallpapers made under
# /tmp, and one(): a train.py run under taskset and a timeout, its record in $rec and its line in the log.
# usage: source common.sh   (from the repository root, with .device49 carried)
set -uo pipefail
here=results/20261204T0240Z-NVIDIA-H200-real-folders
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log; git log --oneline -1 >> $log
python3 tools/photo_sets.py camera /tmp/cam >> $log 2>&1
mkdir -p /tmp/wall; for d in .device49/wall/*/; do t=/tmp/wall/$(basename $d); mkdir -p $t
  for f in $d*; do for k in $(seq 1 11); do cp $f $t/$k-$(basename $f); done; done; done
python3 -c "import sys; sys.path.insert(0,'tools'); from photo_sets import describe; from pathlib import Path; print(describe(Path('/tmp/wall')))" >> $log 2>&1
one() {  # name cores args...
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt ${LIMIT:-540} ]; then echo "$name skipped (time)" >> $log; return; fi
  timeout ${T:-110} taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 $here/line.py $rec/$name.json)" >> $log
}
