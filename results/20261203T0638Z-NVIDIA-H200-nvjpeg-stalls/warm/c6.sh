#!/usr/bin/env bash
# Does nvjpeg grow its buffers during the run (each free waits for the whole device, and so for the step
# queued behind it)? torch.profiler's runtime calls per thread on main's 8-core copy run, with and without a
# warm-up decode of 64 copies of the largest file (tl.py, WARM=1); then 600-step timelines of both, read per
# 50 steps: slow decode calls that fade as the run goes on are buffers growing.
# usage: c6.sh   (carry .device11)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device11/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
[ -d /tmp/p1024 ] || python3 .device11/mk1024.py .device11/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device11/mk512.py .device11/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores plain|tl|warm args...
  local name=$1 cores=$2 how=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-500} ]; then echo "$name skipped (time)" >> $log; return; fi
  case $how in
    plain) timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json ;;
    tl) timeout 100 taskset -c $cores python3 .device11/tl.py $rec/$name.tl.json "$@" --json $rec/$name.json ;;
    warm) WARM=1 timeout 100 taskset -c $cores python3 .device11/tl.py $rec/$name.tl.json "$@" --json $rec/$name.json ;;
  esac > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device11/line.py $rec/$name)" >> $log
  [ $how != plain ] && python3 .device11/tlread.py $rec/$name.tl.json > $OUT/$name.windows.txt 2>&1
  return 0
}
prof() {  # name tl|warm args...
  local name=$1 how=$2; shift 2
  one $name 0-7 $how "$@" --steps 60 --profile torch --profile-steps 30 --profile-dir /tmp/tp/$name
  python3 .device11/tp2.py /tmp/tp/$name/*.json > $OUT/$name.calls.txt 2>&1
}
copy8="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --resized-cache --worker-nice 10"
small8="--variant jpeg-gpu --data-dir $set512 --workers 8 --worker-nice 10"
one ceiling 0-15 plain --variant compiled --data-on-gpu
prof prof-copy tl $copy8
prof prof-copy-warm warm $copy8
for i in 1 2; do
  one b8-copy-tl-$i 0-7 tl $copy8 --steps 600
  one b8-copy-warm-$i 0-7 warm $copy8 --steps 600
done
one s8-tl 0-7 tl $small8 --steps 600
one s8-warm 0-7 warm $small8 --steps 600
one b8-copy-tl-3 0-7 tl $copy8 --steps 600
one b8-copy-warm-3 0-7 warm $copy8 --steps 600
