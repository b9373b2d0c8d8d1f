#!/usr/bin/env bash
# The knobs A/B (old: stream priority 0, 5 ms switch; new: -1, 1 ms), parallel decoders (probe4), the CPU
# decode rows of 1024x768, and 4032x3024 photos with and without the resized cache, with the fit kernel.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device5/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device5/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device5/mk1024.py .device5/samples /tmp/p1024 >> $log 2>&1
one() {  # name cores prio switch args...
  local name=$1 cores=$2 prio=$3 sw=$4; shift 4; local t0=$SECONDS
  if [ $SECONDS -gt 430 ]; then echo "$name skipped (time)" >> $log; return; fi
  timeout 75 taskset -c $cores python3 .device5/tr.py $prio $sw "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-170)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 16"
one knobs-old-a 0-15 0 0.005 $big
one knobs-new-a 0-15 -1 0.001 $big
one knobs-old-b 0-15 0 0.005 $big
one knobs-new-b 0-15 -1 0.001 $big
timeout 100 python3 .device5/probe4.py /tmp/p1024 2>&1 | grep -v "nvjpeg2k\|nvTIFF\|nvtiff" > $OUT/probe4.txt; echo "probe4 rc=$?" >> $log
one cpu-big16 0-15 -1 0.001 --variant jpeg-compiled --data-dir /tmp/p1024 --workers 16
one cpu-big8 0-7 -1 0.001 --variant jpeg-compiled --data-dir /tmp/p1024 --workers 8
t0=$SECONDS; for k in $(seq 0 15); do python3 .device5/mkphotos.py /tmp/p4032 128 4032 3024 1 $k 16 & done; wait
echo "made 128 photos of 4032x3024 in $((SECONDS - t0)) s" >> $log
one gpu-4032-16 0-15 -1 0.001 --variant jpeg-gpu --data-dir /tmp/p4032 --workers 16
one gpu-cache-first-16 0-15 -1 0.001 --variant jpeg-gpu --data-dir /tmp/p4032 --workers 16 --resized-cache
one gpu-cache-16 0-15 -1 0.001 --variant jpeg-gpu --data-dir /tmp/p4032 --workers 16 --resized-cache
one gpu-cache-8 0-7 -1 0.001 --variant jpeg-gpu --data-dir /tmp/p4032 --workers 8 --resized-cache
one gpu-4032-8 0-7 -1 0.001 --variant jpeg-gpu --data-dir /tmp/p4032 --workers 8
