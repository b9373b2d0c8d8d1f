#!/usr/bin/env bash
# Before and after the data-source seam, in one lease: each setting run by the tree before it (f3e0042,
# carried as .before/before.tar.gz) and by this one, back to back, in the order given (ROUND=ab: before
# first; ROUND=ba: after first), each a default run (no --steps) under taskset.
# usage: [TAG=name] ROUND=ab|ba results/20261204T0500Z-NVIDIA-H200-before-after-seam/run.sh   (from the repository root)
set -uo pipefail
here=results/20261204T0500Z-NVIDIA-H200-before-after-seam
after=$PWD before=/tmp/before
export XDG_CACHE_HOME=/tmp/xdg PYTHONUNBUFFERED=1
log=$OUT/log-$ROUND${TAG:+-$TAG}.txt rec=$OUT/rec-$ROUND${TAG:+-$TAG}; mkdir -p $rec /tmp/before
tar -xzf .before/before.tar.gz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log; git log --oneline -1 >> $log 2>&1
one() {  # tree name cores script args...
  local tree=$1 name=$2 cores=$3 script=$4 t0=$SECONDS; shift 4
  if [ $SECONDS -gt ${LIMIT:-560} ]; then echo "$tree $name skipped (time)" >> $log; return; fi
  (cd ${!tree} && timeout ${T:-100} taskset -c $cores python3 $script "$@" --json $rec/$tree-$name.json \
     > $rec/$tree-$name.log 2>&1)
  echo "$tree $name rc=$? $((SECONDS - t0))s: $(python3 $here/line.py $rec/$tree-$name.json)" >> $log
}
both() {  # name cores script args...
  if [ "$ROUND" = ab ]; then one before "$@"; one after "$@"; else one after "$@"; one before "$@"; fi
}
both pool16 0-15 train.py --variant pool --workers 16
both ceiling 0-15 train.py --variant prefetch --data-on-gpu
both jpeg-compiled16 0-15 train.py --variant jpeg-compiled --workers 16
both jpeg-gpu16 0-15 train.py --variant jpeg-gpu --workers 16
both jpeg-gpu8 0-7 train.py --variant jpeg-gpu --workers 8 --worker-nice 10
both infer-streams 0-15 infer.py --variant streams --workers 4
both infer-ceiling 0-15 infer.py --variant baseline --outputs-on-gpu
