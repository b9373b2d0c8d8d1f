#!/usr/bin/env bash
# 4032x3024 photos: the verdict (run_all, no nsys), then the resized cache: first pass, second run, 8 cores
set -uo pipefail
export XDG_CACHE_HOME=$PWD/.device/cache PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl
R=$OUT/big; mkdir -p $R
trap 'python3 .device/summary.py $R > $OUT/big-summary.txt; tar -czf $OUT/big.tgz -C $OUT big; rm -rf $R' EXIT
t0=$SECONDS
for k in $(seq 0 15); do python3 .device/mkphotos.py /tmp/p4032 128 4032 3024 1 $k 16 & done; wait
echo "made 128 photos in $((SECONDS - t0)) s: $(du -sb /tmp/p4032 | cut -f1) bytes"
one() {  # name args...
  local name=$1; shift
  local t=$SECONDS
  timeout 200 "$@" --json $R/$name.json > $R/$name.log 2>&1; echo "$name rc=$? $((SECONDS - t)) s: $(grep -v '^\[' $R/$name.log | tail -1 | cut -c1-160)"
}
PYTHON=python3 timeout 300 ./run_all.sh --no-install --no-nsys --repeat 1 --variants jpeg-gpu,jpeg-compiled,ceiling-jpeg-compiled \
  --out $R/run -- --data-dir /tmp/p4032 > $R/run_all.log 2>&1; echo "run_all rc=$?"; tail -4 $R/run_all.log
one cache-first python3 train.py --variant jpeg-gpu --workers 16 --data-dir /tmp/p4032 --resized-cache
one cache-second python3 train.py --variant jpeg-gpu --workers 16 --data-dir /tmp/p4032 --resized-cache
one cache-compiled python3 train.py --variant jpeg-compiled --workers 16 --data-dir /tmp/p4032 --resized-cache
one cache-gpu-8 taskset -c 0-7 python3 train.py --variant jpeg-gpu --workers 8 --data-dir /tmp/p4032 --resized-cache
one cache-compiled-8 taskset -c 0-7 python3 train.py --variant jpeg-compiled --workers 8 --data-dir /tmp/p4032 --resized-cache
one cache-gpu-600 python3 train.py --variant jpeg-gpu --workers 16 --data-dir /tmp/p4032 --resized-cache --steps 600
