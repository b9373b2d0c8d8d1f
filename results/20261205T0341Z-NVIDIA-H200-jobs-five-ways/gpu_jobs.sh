#!/usr/bin/env bash
# usage: .device/gpu_jobs.sh KEXPR [LIMIT_S]: tests/test_jobs_on_a_gpu.py -k KEXPR on the device, results under $OUT
set -euo pipefail
k=$1; limit=${2:-540}
[ -d /tmp/site/pytest ] || pip install -q --no-index --target /tmp/site .device/whl/*.whl >/dev/null
[ -x /tmp/nsys/target-linux-x64/nsys ] || tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp
export PATH=/tmp/nsys/target-linux-x64:$PATH PYTHONPATH=/tmp/site
name=$(echo "$k" | tr -c 'a-z0-9\n' '_')
{ date -u; git log -1 --format='%h %s'; nvidia-smi -L; nproc; python3 -c 'import torch, torchvision; print(torch.__version__, torchvision.__version__)'; } > "$OUT/env-$name.txt" 2>&1 || true
base=/tmp/pt-$name; rm -rf "$base"
s=$(date +%s)
timeout "$limit" python3 -m pytest -p no:cacheprovider -p no:xdist -s -v --durations=0 tests/test_jobs_on_a_gpu.py \
  -k "$k" --basetemp "$base" --junitxml "$OUT/junit-$name.xml" > "$OUT/log-$name.txt" 2>&1 || echo "pytest rc=$?" >> "$OUT/log-$name.txt"
echo "wall $(( $(date +%s) - s )) s" >> "$OUT/log-$name.txt"
# the results.md of each nsys way, and the size of each report
find "$base" -name results.md 2>/dev/null | while read -r f; do d=${f#$base/}; cp "$f" "$OUT/results-$name-${d%%/*}.md"; done || true
find "$base" \( -name '*.nsys-rep' -o -name '*.sqlite' -o -name '*.json*' \) -exec ls -la {} + > "$OUT/files-$name.txt" 2>&1 || true
tail -40 "$OUT/log-$name.txt"
