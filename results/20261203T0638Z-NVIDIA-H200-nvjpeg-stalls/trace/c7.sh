#!/usr/bin/env bash
# What the decoding thread's slow calls wait for: main's 8-core runs (600 steps) under tl.py with a CUDA-only
# torch.profiler trace over 100 of the loop's fetches (PROF=300:100), read on the machine by tp3.py.
# usage: c7.sh   (carry .device11)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'cd /tmp && tar -czf $OUT/rec.tgz rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
[ -d /tmp/p1024 ] || python3 .device11/mk1024.py .device11/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device11/mk512.py .device11/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores args...
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt ${LIMIT:-400} ]; then echo "$name skipped (time)" >> $log; return; fi
  PROF=300:100 timeout 120 taskset -c $cores python3 .device11/tl.py $rec/$name.tl.json "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device11/line.py $rec/$name)" >> $log
  python3 .device11/tlread.py $rec/$name.tl.json > $rec/$name.windows.txt 2>&1
  python3 .device11/tp3.py $rec/$name.trace.json > $OUT/$name.tp3.txt 2>&1
  python3 .device11/tp2.py $rec/$name.trace.json > $rec/$name.calls.txt 2>&1
  gzip $rec/$name.trace.json
}
copy8="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --resized-cache --worker-nice 10"
small8="--variant jpeg-gpu --data-dir $set512 --workers 8 --worker-nice 10"
one b8-copy-1 0-7 $copy8 --steps 600
one b8-copy-2 0-7 $copy8 --steps 600
one s8-1 0-7 $small8 --steps 600
