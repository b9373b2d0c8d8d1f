#!/usr/bin/env bash
# main with 32 work queues: the default set (512x512) under --gpu-decode on 8 and 16 cores, each default run
# beside a 600-step run, a pair against 8 queues on 8 cores, and jpeg-compiled on 16 cores, beside the ceiling.
# usage: c12.sh   (carry .device12)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'python3 .device12/summary.py $rec > $OUT/summary.txt; cd /tmp && tar -czf $OUT/rec.tgz rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log; git log --oneline -1 >> $log
set512=$(python3 .device12/mk512.py .device12/samples 2>>$log); echo "default set: $set512" >> $log
[ -d "$set512" ] || { echo "no default set" >> $log; exit 1; }
one() {  # name queues(32: main's own, 8: given) cores args...
  local name=$1 queues=$2 cores=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-480} ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ $queues = 32 ]; then
    timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  else
    CUDA_DEVICE_MAX_CONNECTIONS=$queues timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  fi
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device12/line.py $rec/$name) queues=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('cuda_work_queues'))" $rec/$name.json 2>/dev/null)" >> $log
}
small="--variant jpeg-gpu --data-dir $set512"
one ceiling 32 0-15 --variant compiled --data-on-gpu
one s8 32 0-7 $small --workers 8 --worker-nice 10
one s8-600 32 0-7 $small --workers 8 --worker-nice 10 --steps 600
one s16 32 0-15 $small --workers 16
one s16-600 32 0-15 $small --workers 16 --steps 600
one s8-600-q8 8 0-7 $small --workers 8 --worker-nice 10 --steps 600
one c16 32 0-15 --variant jpeg-compiled --data-dir $set512 --workers 16
