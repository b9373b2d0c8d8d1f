#!/usr/bin/env bash
# device calls: train.py directly, no profiler; PART picks the list. Each run's summary line goes to
# $OUT/log.txt and its JSON record (with a label) to $OUT/records.jsonl as it ends.
set -uo pipefail
[ -d /tmp/site/nvtx ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
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
P1)  # the pool's acceptance on one H200 (#11), and the fast ceiling against main's train.py (#13)
  t ceiling train.py --variant prefetch --data-on-gpu
  for w in 16 8 6 4; do t pool-$w train.py --variant pool --workers $w; done
  t pool-16-loader train.py --variant pool --workers 16 --loader-only
  t fast-ceiling train.py --variant fast --data-on-gpu
  t fast-pool-16 train.py --variant fast-pool --workers 16
  PRE=(taskset -c 0-7)  # 8 cores, as on the study's g6e.2xlarge
  t ceiling-8c train.py --variant prefetch --data-on-gpu
  t pool-7-8c train.py --variant pool --workers 7
  t prefetch-8-8c train.py --variant prefetch --workers 8
  PRE=()
  t verify-pool-16-300 train.py --variant pool --workers 16 --verify --steps 300 --settle 0
  t verify-fast-pool-16-300-depth2 train.py --variant fast-pool --workers 16 --verify --steps 300 --settle 0 --prefetch-depth 2
  for k in 1 2; do  # this tree; main before the simplify work (fa272f3); before the constants were made once
    t fast-ceiling-now-$k train.py --variant fast --data-on-gpu --steps 300
    t fast-ceiling-main-$k .device/train_main.py --variant fast --data-on-gpu --steps 300
    t fast-ceiling-before-$k .device/train_before.py --variant fast --data-on-gpu --steps 300
  done
  t pool-16-600 train.py --variant pool --workers 16 --steps 600
  t pool-8-600 train.py --variant pool --workers 8 --steps 600 ;;
INFER_VERIFY)  # infer.py --verify over 300 batches (10 warm-up + 290) on every safe variant, then the unsafe one
  t unsafe-pinned infer.py --variant pinned --unsafe-no-wait --verify --steps 290
  for v in baseline workers pool pinned streams uint8; do t verify-$v infer.py --variant $v --verify --steps 290; done
  t unsafe-streams infer.py --variant streams --unsafe-no-wait --verify --steps 290 ;;
X2B)  # two H200s: the pool on one and on two GPUs, the ceilings, and a dead or hung rank on NCCL
  t pool-1gpu-15 train.py --variant pool --workers 15
  t ceiling-1gpu train.py --variant prefetch --data-on-gpu
  LAUNCH=(torchrun --standalone --nproc-per-node 2)
  t ceiling-2gpu train.py --variant prefetch --data-on-gpu
  t pool-2gpu-15 train.py --variant pool --workers 15
  t pool-2gpu-15-600 train.py --variant pool --workers 15 --steps 600
  t hang-nccl train.py --variant prefetch --workers 2 --steps 40 --dist-timeout 10 --inject-fault rank-hang
  grep -E "check in|test_hook|Root Cause|rank  " -A0 /tmp/log$n | head -8 >> $OUT/log.txt
  t exit-nccl train.py --variant prefetch --workers 2 --steps 40 --dist-timeout 10 --inject-fault rank-exit
  grep -E "check in|Root Cause|rank  |exitcode" /tmp/log$n | head -8 >> $OUT/log.txt
  LAUNCH=(python3)
  t pool-1gpu-15-600 train.py --variant pool --workers 15 --steps 600 ;;
R16)  # 16 workers: a 600-step run of every study variant, beside run_all's default runs
  for v in prefetch pool streams async workers baseline; do t $v-16-600 train.py --variant $v --workers 16 --steps 600; done
  t ceiling-600 train.py --variant prefetch --data-on-gpu --steps 600 ;;
R8)  # 8 workers (the study's g6e.2xlarge has 8 vCPUs): default run, 600 steps, loader alone
  t ceiling train.py --variant prefetch --data-on-gpu
  for v in pool prefetch streams async workers; do
    t $v-8 train.py --variant $v --workers 8
    t $v-8-loader train.py --variant $v --workers 8 --loader-only
    t $v-8-600 train.py --variant $v --workers 8 --steps 600
  done ;;
FPW)  # what caps fast-pool and the pool's loader on 16 vCPUs: fewer workers leave the main process a core
  lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node\(s\)" | tee -a $OUT/log.txt
  t fast-ceiling train.py --variant fast --data-on-gpu
  for w in 16 12 8; do t fast-pool-$w train.py --variant fast-pool --workers $w; done
  t fast-pool-16-loader train.py --variant fast-pool --workers 16 --loader-only
  for w in 16 12; do t pool-$w-loader train.py --variant pool --workers $w --loader-only; done ;;
esac
echo done | tee -a $OUT/log.txt
