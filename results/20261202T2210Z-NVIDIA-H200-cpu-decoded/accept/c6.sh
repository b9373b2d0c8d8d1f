#!/usr/bin/env bash
# --cpu-decoded N, torchvision's decoder: 16 and 32 on 16 cores, 8 and 16 on 8, none on 4; the default set on
# 8 cores with none and 16; then 600-step runs, a --verify run of 300 steps, and the first runs again.
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
  if [ $SECONDS -gt 545 ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ "$1" = prio0 ]; then shift; set -- -c "$PRIO0" "$@"; else set -- train.py "$@"; fi
  timeout 80 taskset -c $cores python3 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-190)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $small"
one ceiling 0-15 --variant compiled --data-on-gpu
one a16-k16 0-15 $big --workers 16 --cpu-decoded 16
one a16-k32 0-15 $big --workers 16 --cpu-decoded 32
one b8-k8 0-7 $big --workers 8 --cpu-decoded 8
one b8-k16 0-7 $big --workers 8 --cpu-decoded 16
one c4 0-3 $big --workers 4
one s8 0-7 $small --workers 8
one s8-k16 0-7 $small --workers 8 --cpu-decoded 16
one a16-k16-600 0-15 $big --workers 16 --cpu-decoded 16 --steps 600
one b8-k8-600 0-7 $big --workers 8 --cpu-decoded 8 --steps 600
one c4-600 0-3 $big --workers 4 --steps 600
one s8-k16-600 0-7 $small --workers 8 --cpu-decoded 16 --steps 600
one verify-k16 0-15 $big --workers 16 --cpu-decoded 16 --verify --steps 300
one a16-k16-r 0-15 $big --workers 16 --cpu-decoded 16
one a16-k32-r 0-15 $big --workers 16 --cpu-decoded 32
one b8-k8-r 0-7 $big --workers 8 --cpu-decoded 8
one b8-k16-r 0-7 $big --workers 8 --cpu-decoded 16
one c4-r 0-3 $big --workers 4
