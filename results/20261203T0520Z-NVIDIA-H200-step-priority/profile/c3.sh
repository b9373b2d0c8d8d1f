#!/usr/bin/env bash
# torch.profiler on the 8-core copy run, main (old: HEAD's code, carried) and the step on a high-priority
# stream (new: the working tree), each read on the machine by tp.py; then A/B pairs of default runs on the
# 8-core lines, alternating, against the compiled ceiling of this command.
# usage: c3.sh
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
prof() {  # name old|new args...
  local name=$1 how=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt ${LIMIT:-480} ]; then echo "$name skipped (time)" >> $log; return; fi
  one $name 0-7 $how "$@" --steps 60 --profile torch --profile-steps 30 --profile-dir /tmp/tp/$name
  python3 .device10/tp.py /tmp/tp/$name/*.json > $OUT/$name.txt 2>&1
  echo "$name read $((SECONDS - t0))s" >> $log
}
one ceiling 0-15 new --variant compiled --data-on-gpu
copy8="$big --workers 8 --resized-cache --worker-nice 10"
prof prof-b8-copy-new new $copy8
prof prof-b8-copy-old old $copy8
for i in 1 2; do
  one s8-new-$i 0-7 new $small --workers 8 --worker-nice 10
  one s8-old-$i 0-7 old $small --workers 8 --worker-nice 10
  one b8-copy-old-$i 0-7 old $copy8
  one b8-copy-new-$i 0-7 new $copy8
done
