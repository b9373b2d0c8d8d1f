#!/usr/bin/env bash
# the command that made this folder: bash bench.sh on the lent H200, OUT=this folder
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
export PYTHONUNBUFFERED=1
rec=$OUT/records.jsonl
n=0
t() {  # label, then train.py args
  local label=$1; shift; n=$((n+1))
  local s=$SECONDS
  "${PRE[@]}" python3 train.py "$@" --json /tmp/r$n.json > /tmp/log$n 2>&1
  local rc=$?
  echo "[$label] rc=$rc $((SECONDS-s))s: $(grep -E 'steps/s|batches/s|verify|error|pool:' /tmp/log$n | tr '\n' ' ')" | tee -a $OUT/log.txt
  [ -s /tmp/r$n.json ] && python3 -c "import json,sys; r=json.load(open('/tmp/r$n.json')); r['label']=sys.argv[1]; print(json.dumps(r))" "$label" >> $rec
}
PRE=()
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $OUT/log.txt
t ceiling-fp32 --variant prefetch --data-on-gpu
t verify-pool-fp32-d1 --variant pool --workers 16 --verify --steps 300
t verify-pool-uint8-d2 --variant pool --uint8 --prefetch-depth 2 --workers 16 --verify --steps 300
t loader-prefetch-16 --variant prefetch --workers 16 --loader-only
t loader-pool-16 --variant pool --workers 16 --loader-only
t pool-16 --variant pool --workers 16
t pool-16-600 --variant pool --workers 16 --steps 600
t prefetch-16 --variant prefetch --workers 16
t prefetch-16-600 --variant prefetch --workers 16 --steps 600
t pool-8 --variant pool --workers 8
t pool-8-600 --variant pool --workers 8 --steps 600
t pool-6 --variant pool --workers 6
t pool-6-600 --variant pool --workers 6 --steps 600
t pool-4 --variant pool --workers 4
PRE=(taskset -c 0-7)
t cores8-prefetch-8 --variant prefetch --workers 8 --steps 300
t cores8-pool-7 --variant pool --workers 7 --steps 300
t cores8-ceiling --variant prefetch --data-on-gpu
PRE=()
t ceiling-uint8 --variant fast --data-on-gpu
t fast-pool-16 --variant fast-pool --workers 16
t fast-16 --variant fast --workers 16
t streams-16 --variant streams --workers 16
t streams-16-600 --variant streams --workers 16 --steps 600
echo done | tee -a $OUT/log.txt
