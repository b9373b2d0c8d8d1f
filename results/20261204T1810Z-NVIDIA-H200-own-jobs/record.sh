#!/usr/bin/env bash
# The jobs of tests/jobs on the H200, recorded as a user would: each unprofiled (its own steps/s), under
# `nsys profile` with and without its own NVTX ranges (a window after the start-up), and under
# torch.profiler with and without them. Everything goes to $OUT/rec.tgz, the log to $OUT/log.txt.
set -euo pipefail
tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp && export PATH=/tmp/nsys/target-linux-x64:$PATH
out=/tmp/rec && rm -rf $out && mkdir -p $out/nsys $out/torch
export JOB_PHOTOS=/tmp/job-photos
log() { echo "$*" | tee -a "$OUT/log.txt"; }
log "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) $(nproc) cores"
log "$(python3 -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)') $(nsys --version)"
declare -A window=([single_process]=1.5 [few_workers]=2 [pageable_copy]=1.5 [item_sync]=1 [decode_jpeg]=4 [gpu_bound]=2)
for job in single_process few_workers pageable_copy item_sync decode_jpeg gpu_bound; do
  log "== $job"
  timeout 120 python3 tests/jobs/$job.py --steps 60 2>&1 | grep -v Warning | tail -2 | tee -a "$OUT/log.txt" || log "FAILED unprofiled"
  for own in "" "--nvtx"; do
    name=$job${own:+.nvtx}
    timeout 120 nsys profile --trace=cuda,nvtx,osrt --delay 10 --duration "${window[$job]}" --force-overwrite=true \
      -o $out/nsys/$name python3 tests/jobs/$job.py --steps 100000 $own >$out/nsys/$name.log 2>&1 \
      || log "nsys $name rc=$?"
    ls -la $out/nsys/$name.nsys-rep 2>&1 | tee -a "$OUT/log.txt" || true
    timeout 120 python3 tests/jobs/$job.py --steps 24 --torch-profile $out/torch/$name $own 2>&1 | grep -v Warning \
      | tail -1 | tee -a "$OUT/log.txt" || log "FAILED torch $name"
  done
  tar -czf "$OUT/rec.tgz" -C $out .
done
du -sh $out/nsys $out/torch | tee -a "$OUT/log.txt"
log "$(date -u +%FT%TZ) done"
