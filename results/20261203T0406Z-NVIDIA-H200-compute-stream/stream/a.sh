#!/usr/bin/env bash
# A/B in one run: jpeg-gpu with the step on the legacy default stream (old: HEAD's code, carried) against
# the step on a stream of its own (new: the working tree), each timed (timed.py), then plain new runs.
# usage: [PART=a|b] a.sh
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg
here=$PWD log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device9/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
[ -d /tmp/p1024 ] || PYTHONPATH=$here python3 .device9/mk1024.py .device9/samples /tmp/p1024 >> $log 2>&1
set512=$(PYTHONPATH=$here python3 .device9/mk512.py .device9/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores old|new|plain args...
  local name=$1 cores=$2 how=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-510} ]; then echo "$name skipped (time)" >> $log; return; fi
  case $how in
    old) (cd .device9/old && PYTHONPATH=$PWD timeout 100 taskset -c $cores python3 $here/.device9/timed.py $rec/$name.times "$@" --json $rec/$name.json) ;;
    new) PYTHONPATH=$here timeout 100 taskset -c $cores python3 .device9/timed.py $rec/$name.times "$@" --json $rec/$name.json ;;
    plain) PYTHONPATH=$here timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json ;;
  esac > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device9/line.py $rec/$name)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $set512"
if [ "${PART:-a}" = a ]; then
  one ceiling 0-15 plain --variant compiled --data-on-gpu
  ls /tmp/xdg/gpu-starvation 2>/dev/null | grep -q resized || one cache-make 0-15 plain $big --workers 16 --resized-cache
  one b8-copy-n10-old 0-7 old $big --workers 8 --resized-cache --worker-nice 10
  one b8-copy-n10-new 0-7 new $big --workers 8 --resized-cache --worker-nice 10
  one s8-n10-old 0-7 old $small --workers 8 --worker-nice 10
  one s8-n10-new 0-7 new $small --workers 8 --worker-nice 10
  one c4-n10-old 0-3 old $big --workers 4 --worker-nice 10
  one c4-n10-new 0-3 new $big --workers 4 --worker-nice 10
  one b8-copy-n10-600 0-7 plain $big --workers 8 --resized-cache --worker-nice 10 --steps 600
  one s8-n10-600 0-7 plain $small --workers 8 --worker-nice 10 --steps 600
  one c4-n10-600 0-3 plain $big --workers 4 --worker-nice 10 --steps 600
  one s16 0-15 plain $small --workers 16
  one b16-copy 0-15 plain $big --workers 16 --resized-cache
else
  one ceiling 0-15 plain --variant compiled --data-on-gpu
  one b8-copy-n10 0-7 plain $big --workers 8 --resized-cache --worker-nice 10
  one s8-n10 0-7 plain $small --workers 8 --worker-nice 10
  one c4-n10 0-3 plain $big --workers 4 --worker-nice 10
  one c4-copy-n10 0-3 plain $big --workers 4 --resized-cache --worker-nice 10
  one b16 0-15 plain $big --workers 16
  one s16 0-15 plain $small --workers 16
  one s16-compiled 0-15 plain --variant jpeg-compiled --data-dir $set512 --workers 16
  one ceiling-again 0-15 plain --variant compiled --data-on-gpu
fi
