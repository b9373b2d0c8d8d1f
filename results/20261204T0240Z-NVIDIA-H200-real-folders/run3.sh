#!/usr/bin/env bash
# --cpu-decoded N on the camera-like folder (the largest files to the workers), 16 and 8 cores; the loader alone; the ceiling.
# usage: run3.sh   (carry .device49: the wallpapers' files)
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
trap 'cd $OUT && tar -czf rec.tgz rec && rm -rf rec' EXIT
one ceiling 0-15 --variant compiled --data-on-gpu
one cam16-n8 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 8
one cam16-n16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 16
one cam8-n4 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --cpu-decoded 4
one cam16-alone 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --loader-only
one cam16-n24 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 24
one cam8-n8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --cpu-decoded 8
one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16
