#!/usr/bin/env bash
# A/B in one command: jpeg-gpu with main's streams (old: the step on the default stream, the decoding stream
# at high priority; HEAD's code, carried) against the step on a high-priority stream and the decoding at
# the default priority (new: the working tree). Plain runs, alternating, against the compiled ceiling.
# usage: ab.sh
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg
here=$PWD log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device10/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log
python3 -c "import torch; print('priority range', torch.cuda.Stream.priority_range())" >> $log 2>&1
[ -d /tmp/p1024 ] || PYTHONPATH=$here python3 .device10/mk1024.py .device10/samples /tmp/p1024 >> $log 2>&1
set512=$(PYTHONPATH=$here python3 .device10/mk512.py .device10/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name cores old|new args...
  local name=$1 cores=$2 how=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-520} ]; then echo "$name skipped (time)" >> $log; return; fi
  case $how in
    old) (cd .device10/old && PYTHONPATH=$PWD timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json) ;;
    new) PYTHONPATH=$here timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json ;;
  esac > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device10/line.py $rec/$name)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $set512"
one ceiling 0-15 new --variant compiled --data-on-gpu
one b8-copy-old 0-7 old $big --workers 8 --resized-cache --worker-nice 10
one b8-copy-new 0-7 new $big --workers 8 --resized-cache --worker-nice 10
one s8-old 0-7 old $small --workers 8 --worker-nice 10
one s8-new 0-7 new $small --workers 8 --worker-nice 10
one b8-copy-new2 0-7 new $big --workers 8 --resized-cache --worker-nice 10
one b8-copy-old2 0-7 old $big --workers 8 --resized-cache --worker-nice 10
one s8-new2 0-7 new $small --workers 8 --worker-nice 10
one s8-old2 0-7 old $small --workers 8 --worker-nice 10
one c4-old 0-3 old $big --workers 4 --worker-nice 10
one c4-new 0-3 new $big --workers 4 --worker-nice 10
one c4-copy-new 0-3 new $big --workers 4 --resized-cache --worker-nice 10
one c4-copy-old 0-3 old $big --workers 4 --resized-cache --worker-nice 10
