#!/usr/bin/env bash
# a short window of the ResNet-50 job (about 10 steps) under analyze.py --run, then the analysis alone timed
set -uo pipefail
[ -x /tmp/nsys/target-linux-x64/nsys ] || tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp
export PATH=/tmp/nsys/target-linux-x64:$PATH
o=/tmp/r50; rm -rf $o
python3 .device/timed.py "analyze.py --run, whole" python3 analyze.py --run --skip 15 --window 0.7 --out $o -- \
  python3 tests/jobs/gpu_bound.py --steps 100000 > "$OUT/r50-run.txt" 2>&1
ls -la $o >> "$OUT/r50-run.txt"; cp $o/results.md "$OUT/r50-results.md"
for i in 1 2 3; do
  rm -rf /tmp/r50a; mkdir -p /tmp/r50a; cp $o/job.nsys-rep /tmp/r50a/
  python3 .device/timed.py "export + analysis of job.nsys-rep ($i)" python3 analyze.py /tmp/r50a/job.nsys-rep >> "$OUT/r50-analysis.txt" 2>&1
  python3 .device/timed.py "analysis of its job.sqlite ($i)" python3 analyze.py /tmp/r50a/job.sqlite >> "$OUT/r50-analysis.txt" 2>&1
done
ls -la /tmp/r50a >> "$OUT/r50-analysis.txt"
tail -30 "$OUT/r50-analysis.txt"
