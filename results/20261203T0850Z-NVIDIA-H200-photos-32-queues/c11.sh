#!/usr/bin/env bash
# main with the driver's hardware work queues at 32 (starvation/runtime.py sets CUDA_DEVICE_MAX_CONNECTIONS
# unless the environment has it): the acceptance runs of --gpu-decode on 8, 4 and 16 cores, plain train.py
# (no probe), and pairs against 8 queues (the driver's default, given in the environment) in the same command.
# usage: c11.sh   (carry .device12)
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'python3 .device12/summary.py $rec > $OUT/summary.txt; cd /tmp && tar -czf $OUT/rec.tgz rec' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $log; nproc >> $log; git log --oneline -1 >> $log
[ -d /tmp/p1024 ] || python3 .device12/mk1024.py .device12/samples /tmp/p1024 >> $log 2>&1
set512=$(python3 .device12/mk512.py .device12/samples 2>>$log); echo "default set: $set512" >> $log
one() {  # name queues(32: main's own, 8: given) cores args...
  local name=$1 queues=$2 cores=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt ${LIMIT:-500} ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ $queues = 32 ]; then
    timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  else
    CUDA_DEVICE_MAX_CONNECTIONS=$queues timeout 100 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  fi
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device12/line.py $rec/$name) queues=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('cuda_work_queues'))" $rec/$name.json 2>/dev/null)" >> $log
}
copy="--variant jpeg-gpu --data-dir /tmp/p1024 --resized-cache --worker-nice 10"
big="--variant jpeg-gpu --data-dir /tmp/p1024 --worker-nice 10"
small="--variant jpeg-gpu --data-dir $set512 --worker-nice 10"
one ceiling 32 0-15 --variant compiled --data-on-gpu
one b8-copy 32 0-7 $copy --workers 8
one b8-copy-600 32 0-7 $copy --workers 8 --steps 600
one b8-copy-600-q8 8 0-7 $copy --workers 8 --steps 600
one s8 32 0-7 $small --workers 8
one s8-600 32 0-7 $small --workers 8 --steps 600
one b8 32 0-7 $big --workers 8
one b8-600 32 0-7 $big --workers 8 --steps 600
one b4 32 0-3 $big --workers 4
one b4-600 32 0-3 $big --workers 4 --steps 600
one b16 32 0-15 --variant jpeg-gpu --data-dir /tmp/p1024 --workers 16
one s16 32 0-15 --variant jpeg-gpu --data-dir $set512 --workers 16
one s8-600-q8 8 0-7 $small --workers 8 --steps 600
one b8-copy-verify 32 0-7 $copy --workers 8 --steps 300 --verify
one b16-copy 32 0-15 --variant jpeg-gpu --data-dir /tmp/p1024 --resized-cache --workers 16
