#!/usr/bin/env bash
# The loop keeps at most one step queued on the device ahead of the one it launches (STEP_AHEAD=1: it waits,
# on a blocking-sync event, for step i-1 to end once step i is launched), against main (no wait), in pairs:
# nvjpeg's kernels, on its own streams, now and then start only once all the step's work queued before them
# has run (up to 55 ms), so the less is queued, the shorter the decoding call's stall.
# usage: c8.sh   (carry .device11)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'python3 .device11/summary.py $rec > $OUT/summary.txt; cd /tmp && tar -czf $OUT/rec.tgz rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
[ -d /tmp/p1024 ] || python3 .device11/mk1024.py .device11/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device11/mk512.py .device11/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores old|new args...
  local name=$1 cores=$2 how=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-530} ]; then echo "$name skipped (time)" >> $log; return; fi
  local ahead=-1; [ $how = new ] && ahead=1
  STEP_AHEAD=$ahead timeout 100 taskset -c $cores python3 .device11/tl.py $rec/$name.tl.json "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device11/line.py $rec/$name)" >> $log
  python3 .device11/tlread.py $rec/$name.tl.json > $rec/$name.windows.txt 2>&1
  python3 - $rec/$name.tl.json >> $log 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1])); d = sorted(x for _, x in ev.get("decode_jpeg", [])); w = sorted(x for _, x in ev.get("loop_wait", []))
q = lambda xs, f: round(1e3 * xs[int(f * (len(xs) - 1))], 2) if xs else None
print(f"    decode_jpeg ms median {q(d, .5)} p90 {q(d, .9)} p99 {q(d, .99)}; loop_wait p90 {q(w, .9)} p99 {q(w, .99)}")
PY
}
copy8="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --resized-cache --worker-nice 10"
small8="--variant jpeg-gpu --data-dir $set512 --workers 8 --worker-nice 10"
one ceiling-old 0-15 old --variant compiled --data-on-gpu
one ceiling-new 0-15 new --variant compiled --data-on-gpu
for i in 1 2; do
  one b8-copy-600-new-$i 0-7 new $copy8 --steps 600
  one b8-copy-600-old-$i 0-7 old $copy8 --steps 600
  one s8-600-old-$i 0-7 old $small8 --steps 600
  one s8-600-new-$i 0-7 new $small8 --steps 600
done
one b8-copy-new 0-7 new $copy8
one s8-new 0-7 new $small8
one c4-copy-new 0-3 new $copy8
one c4-copy-600-new 0-3 new $copy8 --steps 600
one s16-new 0-15 new --variant jpeg-gpu --data-dir $set512 --workers 16
one b16-copy-new 0-15 new --variant jpeg-gpu --data-dir /tmp/p1024 --workers 16 --resized-cache
