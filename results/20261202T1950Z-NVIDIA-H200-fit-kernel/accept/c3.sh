#!/usr/bin/env bash
# jpeg-gpu with the fit kernel, the decode stream's priority and the 1 ms switch interval: 8 against 32 work
# queues (CUDA_DEVICE_MAX_CONNECTIONS; train.py sets 32 for --gpu-decode), then the acceptance runs.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device5/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device5/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device5/mk1024.py .device5/samples /tmp/p1024 >> $log 2>&1
small=$(python3 .device5/mk512.py .device5/samples 2>>$log); echo "default set: $small" >> $log
one() {  # name cores args...   (env before it: env VAR=... one ...)
  local name=$1 cores=$2; shift 2; local t0=$SECONDS
  if [ $SECONDS -gt 545 ]; then echo "$name skipped (time)" >> $log; return; fi
  timeout 90 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-170)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
one ceiling 0-15 --variant compiled --data-on-gpu
CUDA_DEVICE_MAX_CONNECTIONS=8 one big16-q8-a 0-15 $big --workers 16
one big16-a 0-15 $big --workers 16
CUDA_DEVICE_MAX_CONNECTIONS=8 one big16-q8-b 0-15 $big --workers 16
one big16-b 0-15 $big --workers 16
one big8 0-7 $big --workers 8
one big4 0-3 $big --workers 4
one small8 0-7 --variant jpeg-gpu --data-dir $small --workers 8
one small16 0-15 --variant jpeg-gpu --data-dir $small --workers 16
one big16-600 0-15 $big --workers 16 --steps 600
one big8-600 0-7 $big --workers 8 --steps 600
one verify-big 0-15 $big --workers 16 --verify --steps 300
one big16-nv 0-15 $big --workers 16 --gpu-decoder nvimgcodec
