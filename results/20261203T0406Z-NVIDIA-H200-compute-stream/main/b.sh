#!/usr/bin/env bash
# jpeg-gpu as main has it, plain runs (no timing wrapper): the acceptance lines on 8 and 4 cores, each a
# default run and its 600-step check, against the compiled ceiling of this command; then, time allowing,
# the hardware JPEG engines (nvImageCodec) on the 8-core copy.
set -uo pipefail
export PYTHONPATH=$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device9/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; git log -1 --format=%h >> $log 2>&1
[ -d /tmp/p1024 ] || python3 .device9/mk1024.py .device9/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device9/mk512.py .device9/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores args...
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt ${LIMIT:-330} ]; then echo "$name skipped (time)" >> $log; return; fi
  timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device9/line.py $rec/$name)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $set512"
one ceiling 0-15 --variant compiled --data-on-gpu
ls /tmp/xdg/gpu-starvation 2>/dev/null | grep -q resized || one cache-make 0-15 $big --workers 16 --resized-cache
one b8-copy-n10 0-7 $big --workers 8 --resized-cache --worker-nice 10
one b8-copy-n10-600 0-7 $big --workers 8 --resized-cache --worker-nice 10 --steps 600
one s8-n10 0-7 $small --workers 8 --worker-nice 10
one s8-n10-600 0-7 $small --workers 8 --worker-nice 10 --steps 600
one c4-n10 0-3 $big --workers 4 --worker-nice 10
one c4-n10-600 0-3 $big --workers 4 --worker-nice 10 --steps 600
if [ $SECONDS -le ${LIMIT:-330} ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .device9/whl/*.whl >> $log 2>&1
  PYTHONPATH=$PWD:/tmp/site one b8-copy-n10-hw 0-7 $big --workers 8 --resized-cache --worker-nice 10 --gpu-decoder nvimgcodec
fi
