#!/usr/bin/env bash
# run_all.sh on the H200 after the redesign: part 1's pool and its ceiling, part 2's streams and its ceiling,
# each measured, profiled (the nsys run under the umask wrapper), diagnosed and tabulated.
set -uo pipefail
# no nsys: the tree that travels has room for no 35-MB bundle beside results/; --no-nsys
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
export PYTHON=python3
t0=$SECONDS
./run_all.sh --no-install --no-nsys --variants pool,ceiling --workers 16 --out /tmp/p1 > $OUT/part1.log 2>&1; echo "part1 rc=$? $((SECONDS - t0)) s" >> $OUT/summary.txt
t0=$SECONDS
./run_all.sh --no-install --no-nsys --study infer --variants streams,ceiling --out /tmp/p2 > $OUT/part2.log 2>&1; echo "part2 rc=$? $((SECONDS - t0)) s" >> $OUT/summary.txt
cp /tmp/p1/results.md $OUT/part1-results.md; cp /tmp/p2/results.md $OUT/part2-results.md
ls -la /tmp/p1 /tmp/p1/logs >> $OUT/summary.txt
tar -czf $OUT/runs.tgz --exclude='*.nsys-rep' --exclude='*.sqlite' -C /tmp p1 p2
