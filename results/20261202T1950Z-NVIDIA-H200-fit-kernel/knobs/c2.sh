#!/usr/bin/env bash
# probe3.py (the decode thread's cap), then jpeg-gpu on 1024x768 photos with DecodeAhead's knobs (tr.py).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device5/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device5/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device5/mk1024.py .device5/samples /tmp/p1024 >> $log 2>&1
timeout 240 python3 .device5/probe3.py /tmp/p1024 2>&1 | grep -v "nvjpeg2k\|nvTIFF\|nvtiff" > $OUT/probe.txt; echo "probe rc=$?" >> $log
one() {  # name cores prio switch args...
  local name=$1 cores=$2 prio=$3 sw=$4; shift 4; local t0=$SECONDS
  timeout 120 taskset -c $cores python3 .device5/tr.py $prio $sw "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-170)" >> $log
}
one ceiling 0-15 0 0.005 --variant jpeg-compiled --data-on-gpu --data-dir /tmp/p1024
one big16-p0-5ms 0-15 0 0.005 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024
one big16-p1-1ms 0-15 -1 0.001 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024
one big16-p1-0.2ms 0-15 -1 0.0002 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024
one big16-p0-1ms 0-15 0 0.001 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024
one big8-p1-1ms 0-7 -1 0.001 --variant jpeg-gpu --workers 8 --data-dir /tmp/p1024
one big16-nv-p1-1ms 0-15 -1 0.001 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024 --gpu-decoder nvimgcodec
