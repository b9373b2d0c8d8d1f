#!/usr/bin/env bash
# A fit shrunk past resize.MAX_SHRINK, on the device: the GPU test of tests/test_resize.py (which fits one such
# image through the crop kernel), then probe_shrink.py, the fit alone before (torchvision's resize, resize.py at
# 9a2f92c) and after. Output in $OUT/shrink.txt.
# usage: results/20261206T0350Z-NVIDIA-H100-big-shrinks/run.sh (from the repository root)
#   carry .device/whl (pytest's wheels), and this folder while it is not committed (git ignores results/)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; log=$OUT/shrink.txt; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >> "$log" 2>&1
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py -k gpu >> "$log" 2>&1
echo "pytest rc=$?" >> "$log"
git show 9a2f92c:starvation/resize.py > /tmp/resize_before.py
timeout 240 python3 "$here/probe_shrink.py" /tmp/resize_before.py >> "$log" 2>&1
echo "probe rc=$?" >> "$log"
cat "$log"
