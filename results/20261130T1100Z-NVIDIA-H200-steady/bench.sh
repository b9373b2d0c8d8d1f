#!/usr/bin/env bash
# device calls: train.py directly, no profiler; PART picks the list. Each run's summary line goes to
# $OUT/log.txt and its JSON record (with a label) to $OUT/records.jsonl as it ends.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
rec=$OUT/records.jsonl n=0 end=$((SECONDS + ${LIMIT:-570}))
t() {  # label, script, args
  local label=$1 script=$2; shift 2; n=$((n+1))
  local s=$SECONDS left=$((end - SECONDS))
  [ $left -gt 20 ] || { echo "[$label] skipped: time" | tee -a $OUT/log.txt; return; }
  timeout $left "${PRE[@]}" "${LAUNCH[@]}" $script "$@" --json /tmp/r$n.json > /tmp/log$n 2>&1
  local rc=$?
  echo "[$label] rc=$rc $((SECONDS-s))s: $(grep -E 'steps/s|batches/s|verify|rror|pool:|Killed' /tmp/log$n | tr '\n' ' ' | cut -c1-600)" | tee -a $OUT/log.txt
  [ $rc = 0 ] || tail -5 /tmp/log$n >> $OUT/log.txt
  [ -s /tmp/r$n.json ] && python3 -c "import json,sys; r=json.load(open('/tmp/r$n.json')); r['label']=sys.argv[1]; print(json.dumps(r))" "$label" >> $rec
}
PRE=() LAUNCH=(python3)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $OUT/log.txt; nproc | tee -a $OUT/log.txt
case $PART in
A)  # 16 workers: each variant's default run beside 600 steps; fast-pool against its ceiling
  t ceiling-fast train.py --variant fast --data-on-gpu
  t fast-pool-16 train.py --variant fast-pool --workers 16
  t fast-pool-16-600 train.py --variant fast-pool --workers 16 --steps 600
  t ceiling train.py --variant prefetch --data-on-gpu
  t ceiling-600 train.py --variant prefetch --data-on-gpu --steps 600
  for v in pool prefetch streams async workers; do
    t $v-16 train.py --variant $v --workers 16
    t $v-16-600 train.py --variant $v --workers 16 --steps 600
  done ;;
B)  # 8 workers, the same pairs and the loader alone; the fast ceiling against main's train.py
  t ceiling train.py --variant prefetch --data-on-gpu
  for v in pool prefetch streams async workers; do
    t $v-8 train.py --variant $v --workers 8
    t $v-8-600 train.py --variant $v --workers 8 --steps 600
    [ $v = workers ] || t $v-8-loader train.py --variant $v --workers 8 --loader-only
  done ;;
C)  # what caps fast-pool; the pairs call A and B ran out of time for
  t fast-pool-16-loader train.py --variant fast-pool --workers 16 --loader-only
  t async-16-600 train.py --variant async --workers 16 --steps 600
  t workers-16 train.py --variant workers --workers 16
  t workers-8 train.py --variant workers --workers 8 ;;
V)  # the sliding window on the GPU: the pairs that disagreed, each default run beside a 600-step one
  t ceiling train.py --variant prefetch --data-on-gpu
  t pool-8 train.py --variant pool --workers 8
  t pool-8-600 train.py --variant pool --workers 8 --steps 600
  t prefetch-8 train.py --variant prefetch --workers 8
  t fast-pool-16 train.py --variant fast-pool --workers 16
  t pool-16 train.py --variant pool --workers 16
  t prefetch-8-600 train.py --variant prefetch --workers 8 --steps 600 ;;
X2)  # two H200s: the pool on one and on two GPUs, and the 2-GPU ceiling
  t pool-1gpu-15 train.py --variant pool --workers 15 --steps 300
  LAUNCH=(torchrun --standalone --nproc-per-node 2)
  t pool-2gpu-15 train.py --variant pool --workers 15 --steps 300
  t ceiling-2gpu train.py --variant prefetch --data-on-gpu --steps 300
  t pool-2gpu-15-default train.py --variant pool --workers 15
  LAUNCH=(python3)
  t ceiling-1gpu train.py --variant prefetch --data-on-gpu --steps 300 ;;
esac
echo done | tee -a $OUT/log.txt
