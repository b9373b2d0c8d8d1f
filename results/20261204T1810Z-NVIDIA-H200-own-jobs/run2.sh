#!/usr/bin/env bash
# Each job of tests/jobs through `analyze.py --run` on the H200, without and with its own NVTX ranges
# (--step-range), its verdict lines into $OUT/log.txt; the new jobs also unprofiled and under torch.profiler.
# Reports, CSVs, timelines and traces go to $OUT/rec2.tgz after each job.
set -euo pipefail
tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp && export PATH=/tmp/nsys/target-linux-x64:$PATH
out=/tmp/rec2 && rm -rf $out && mkdir -p $out/nsys $out/torch
export JOB_PHOTOS=/tmp/job-photos
log() { echo "$*" | tee -a "$OUT/log.txt"; }
log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader) $(nproc) cores, $(git log -1 --format=%h 2>/dev/null || echo '?')"
python3 -c 'import matplotlib' 2>/dev/null || log "no matplotlib here: no timelines"
for job in item_sync gpu_bound decode_jpeg pageable_copy single_process few_workers; do
  log "== $job"
  case $job in item_sync|gpu_bound|decode_jpeg)
    timeout 100 python3 tests/jobs/$job.py --steps 40 2>&1 | grep -v Warning | tail -1 | tee -a "$OUT/log.txt" || log "FAILED unprofiled"
    timeout 100 python3 tests/jobs/$job.py --steps 24 --torch-profile $out/torch/$job >/dev/null 2>&1 || log "FAILED torch"
    python3 analyze.py $out/torch/$job 2>&1 | head -2 | tee -a "$OUT/log.txt" || true ;;
  esac
  s=$(date +%s)
  timeout 90 python3 analyze.py --run --skip 12 --window 2 --out $out/nsys/$job -- python3 tests/jobs/$job.py --steps 100000 \
    > $out/nsys/$job.log 2>&1 || log "run $job rc=$?"
  grep -A1 "^job: " $out/nsys/$job.log | tee -a "$OUT/log.txt" || tail -3 $out/nsys/$job.log | tee -a "$OUT/log.txt"
  timeout 90 python3 analyze.py --run --skip 12 --window 2 --out $out/nsys/$job.nvtx --step-range '^train_step' \
    -- python3 tests/jobs/$job.py --steps 100000 --nvtx > $out/nsys/$job.nvtx.log 2>&1 || log "run $job.nvtx rc=$?"
  grep -A1 "^job: " $out/nsys/$job.nvtx.log | tee -a "$OUT/log.txt" || tail -3 $out/nsys/$job.nvtx.log | tee -a "$OUT/log.txt"
  log "  ($(( $(date +%s) - s )) s for both runs)"
  rm -f $out/nsys/*/job.sqlite
  tar -czf "$OUT/rec2.tgz" -C $out .
done
log "$(date -u +%FT%TZ) done"
