#!/usr/bin/env bash
# The CPU path (jpeg-compiled) on the resized copies of the 1024x768 photos, with --worker-nice, on 8 and 4 cores;
# 600-step runs.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device6/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device6/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device6/mk1024.py .device6/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device6/mk512.py .device6/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores [timed] args...
  local name=$1 cores=$2; shift 2; local t0=$SECONDS
  if [ $SECONDS -gt 270 ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ "$1" = timed ]; then shift; set -- .device6/timed.py $rec/$name.times "$@"; else set -- train.py "$@"; fi
  timeout 80 taskset -c $cores python3 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-190)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $set512"
one ceiling 0-15 --variant compiled --data-on-gpu
[ -d /tmp/xdg/gpu-starvation ] && ls /tmp/xdg/gpu-starvation | grep -q resized || one cache-make 0-15 $big --workers 16 --resized-cache
one b8-cpu-cache-n10 0-7 --variant jpeg-compiled --data-dir /tmp/p1024 --resized-cache --workers 8 --worker-nice 10
one b8-cpu-cache-n10-600 0-7 --variant jpeg-compiled --data-dir /tmp/p1024 --resized-cache --workers 8 --worker-nice 10 --steps 600
one c4-cpu-cache-n10 0-3 --variant jpeg-compiled --data-dir /tmp/p1024 --resized-cache --workers 4 --worker-nice 10
one c4-cache-n10-600 0-3 $big --workers 4 --resized-cache --worker-nice 10 --steps 600
one a16-cpu-cache-600 0-15 --variant jpeg-compiled --data-dir /tmp/p1024 --resized-cache --workers 16 --steps 600
one b8-cpu-cache 0-7 --variant jpeg-compiled --data-dir /tmp/p1024 --resized-cache --workers 8
