#!/usr/bin/env bash
# fewer --cpu-decoded images where the cores are few: 4 on 8 cores, 1 and 2 on 4; then the README grid's empty
# cell, 4032x3024 photos decoded on the CPU with 8 cores (jpeg-compiled), its photos made as grid/c4.sh made them.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device6/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device6/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device6/mk1024.py .device6/samples /tmp/p1024 >> $log 2>&1
small=$(python3 .device6/mk512.py .device6/samples 2>>$log); echo "default set: $small" >> $log
PRIO0="import runpy, sys; import starvation.photos as p; p.DECODE_PRIORITY = 0; sys.argv[0] = 'train.py'; runpy.run_path('train.py', run_name='__main__')"
one() {  # name cores [prio0] args...
  local name=$1 cores=$2; shift 2; local t0=$SECONDS
  if [ $SECONDS -gt 420 ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ "$1" = prio0 ]; then shift; set -- -c "$PRIO0" "$@"; else set -- train.py "$@"; fi
  timeout 100 taskset -c $cores python3 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-190)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
one b8-k4 0-7 $big --workers 8 --cpu-decoded 4
one c4-k2 0-3 $big --workers 4 --cpu-decoded 2
one c4-k1 0-3 $big --workers 4 --cpu-decoded 1
one b8-k4-r 0-7 $big --workers 8 --cpu-decoded 4
one c4-r2 0-3 $big --workers 4
t0=$SECONDS; for k in $(seq 0 15); do python3 .device6/mkphotos.py /tmp/p4032 128 4032 3024 1 $k 16 & done; wait
echo "4032x3024 photos made in $((SECONDS - t0)) s" >> $log
one cpu-4032-8 0-7 --variant jpeg-compiled --data-dir /tmp/p4032 --workers 8
