#!/usr/bin/env bash
# the third command: torch.profiler around whole jobs, the ResNet-50 timing, the workers' decode probe
set -uo pipefail
.device/gpu_jobs.sh torch-plain 300
.device/resnet50.sh
python3 tools/photo_sets.py camera /tmp/camera --files 200 > "$OUT/probe49.txt" 2>&1
timeout 100 python3 .device/probe49.py /tmp/camera >> "$OUT/probe49.txt" 2>&1
cat "$OUT/probe49.txt"
