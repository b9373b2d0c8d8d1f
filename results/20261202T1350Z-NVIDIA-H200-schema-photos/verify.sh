#!/usr/bin/env bash
# --verify over 300 steps on the cached copy of the 4032x3024 folder, both decoders; 8 cores again
set -uo pipefail
export XDG_CACHE_HOME=$PWD/.device/cache PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl 2>/dev/null
[ -d /tmp/p4032 ] || { for k in $(seq 0 15); do python3 .device/mkphotos.py /tmp/p4032 128 4032 3024 1 $k 16 & done; wait; }
R=$OUT/ver; mkdir -p $R
trap 'python3 .device/summary.py $R > $OUT/ver-summary.txt; tar -czf $OUT/ver.tgz -C $OUT ver; rm -rf $R' EXIT
one() { local name=$1; shift; timeout 100 "$@" --json $R/$name.json > $R/$name.log 2>&1; echo "$name rc=$? $(grep -v '^\[' $R/$name.log | tail -2 | cut -c1-150)"; }
one verify-gpu python3 train.py --variant jpeg-gpu --workers 16 --data-dir /tmp/p4032 --resized-cache --verify --steps 300
one verify-cpu python3 train.py --variant jpeg-compiled --workers 16 --data-dir /tmp/p4032 --resized-cache --verify --steps 300
one compiled-8b taskset -c 0-7 python3 train.py --variant jpeg-compiled --workers 8 --data-dir /tmp/p4032 --resized-cache
one gpu-8b taskset -c 0-7 python3 train.py --variant jpeg-gpu --workers 8 --data-dir /tmp/p4032 --resized-cache
