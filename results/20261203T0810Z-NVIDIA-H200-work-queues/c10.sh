#!/usr/bin/env bash
# 1. nvjpeg's hardware backend driven directly (nj.py): does YUV output launch a kernel on nvjpeg's streams?
# 2. --gpu-decoder nvjpeg (starvation/nvjpeg.py, not landed) against torchvision's, in pairs, 8 cores.
# 3. Do nvjpeg's conversion kernels stall because their streams share the step's hardware work queue?
#    CUDA_DEVICE_MAX_CONNECTIONS=32 (the driver's default is 8): a CUDA-only trace (tp3.py), then pairs.
# usage: c10.sh   (carry .device12)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'python3 .device12/summary.py $rec > $OUT/summary.txt; cd /tmp && tar -czf $OUT/rec.tgz rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
[ -d /tmp/p1024 ] || python3 .device12/mk1024.py .device12/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device12/mk512.py .device12/samples 2>>$log); echo "default set: $set512" >> $log
timeout 150 python3 .device12/nj.py /tmp/p1024 64 > $OUT/nj.txt 2>&1; echo "nj rc=$?" >> $log
one() {  # name conns cores args...
  local name=$1 conns=$2 cores=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-530} ]; then echo "$name skipped (time)" >> $log; return; fi
  CUDA_DEVICE_MAX_CONNECTIONS=$conns timeout 100 taskset -c $cores python3 .device12/tl.py $rec/$name.tl.json "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device12/line.py $rec/$name)" >> $log
  python3 .device12/tlread.py $rec/$name.tl.json > $rec/$name.windows.txt 2>&1
  python3 - $rec/$name.tl.json >> $log 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1])); d = sorted(x for _, x in ev.get("decode_jpeg", []) + ev.get("hw_decode", [])); w = sorted(x for _, x in ev.get("loop_wait", []))
q = lambda xs, f: round(1e3 * xs[int(f * (len(xs) - 1))], 2) if xs else None
print(f"    decode call ms median {q(d, .5)} p90 {q(d, .9)} p99 {q(d, .99)}; loop_wait p90 {q(w, .9)} p99 {q(w, .99)}")
PY
  if [ -f $rec/$name.trace.json ]; then
    python3 .device12/tp3.py $rec/$name.trace.json > $rec/$name.tp3.txt 2>&1
    grep -E "kernel:|calls over" $rec/$name.tp3.txt >> $log
    gzip $rec/$name.trace.json
  fi
}
copy8="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --resized-cache --worker-nice 10"
small8="--variant jpeg-gpu --data-dir $set512 --workers 8 --worker-nice 10"
one ceiling 8 0-15 --variant compiled --data-on-gpu
for i in 1 2; do
  one b8-copy-600-nvjpeg-$i 8 0-7 $copy8 --steps 600 --gpu-decoder nvjpeg
  one b8-copy-600-tv-$i 8 0-7 $copy8 --steps 600
done
one s8-600-tv 8 0-7 $small8 --steps 600
one s8-600-nvjpeg 8 0-7 $small8 --steps 600 --gpu-decoder nvjpeg
one b8-copy-verify-nvjpeg 8 0-7 $copy8 --steps 300 --verify --gpu-decoder nvjpeg
one b8-nvjpeg 8 0-7 --variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --worker-nice 10 --gpu-decoder nvjpeg
one b8-tv 8 0-7 --variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --worker-nice 10
PROF=300:100 one b8-copy-nvjpeg-prof 8 0-7 $copy8 --steps 600 --gpu-decoder nvjpeg
PROF=300:100 one b8-copy-32-prof 32 0-7 $copy8 --steps 600
one b8-copy-600-c32 32 0-7 $copy8 --steps 600
