#!/usr/bin/env bash
# --worker-nice on few cores (the loop's threads take the cores first); --resized-cache on the 1024x768
# photos (683x512 copies); two batches decoded ahead instead of one more; each against its reference run.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device6/*.whl 2>&1 | grep -v "already exists" | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device6/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device6/mk1024.py .device6/samples /tmp/p1024 >> $log 2>&1
small=$(python3 .device6/mk512.py .device6/samples 2>>$log); echo "default set: $small" >> $log
DEPTH3="import runpy, sys; import starvation.photos as p; p.DECODE_AHEAD = 3; p.DecodeAhead.__init__.__defaults__ = ('torchvision', 3); sys.argv[0] = 'train.py'; runpy.run_path('train.py', run_name='__main__')"
one() {  # name cores [depth3] args...
  local name=$1 cores=$2; shift 2; local t0=$SECONDS
  if [ $SECONDS -gt 540 ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ "$1" = depth3 ]; then shift; set -- -c "$DEPTH3" "$@"; else set -- train.py "$@"; fi
  timeout 80 taskset -c $cores python3 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-190)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
small="--variant jpeg-gpu --data-dir $small"
one ceiling 0-15 --variant compiled --data-on-gpu
one b8-k8 0-7 $big --workers 8 --cpu-decoded 8
one b8-k8-n10 0-7 $big --workers 8 --cpu-decoded 8 --worker-nice 10
one c4 0-3 $big --workers 4
one c4-n10 0-3 $big --workers 4 --worker-nice 10
one b8-n10 0-7 $big --workers 8 --worker-nice 10
one b8-k16-n10 0-7 $big --workers 8 --cpu-decoded 16 --worker-nice 10
one s8-n10 0-7 $small --workers 8 --worker-nice 10
one cache-make 0-15 $big --workers 16 --resized-cache
one b8-cache-n10 0-7 $big --workers 8 --resized-cache --worker-nice 10
one c4-cache-n10 0-3 $big --workers 4 --resized-cache --worker-nice 10
one b8-k8-n10-d3 0-7 depth3 $big --workers 8 --cpu-decoded 8 --worker-nice 10
one c4-n10-d3 0-3 depth3 $big --workers 4 --worker-nice 10
one b8-k8-r 0-7 $big --workers 8 --cpu-decoded 8
one b8-k8-n10-r 0-7 $big --workers 8 --cpu-decoded 8 --worker-nice 10
one c4-r 0-3 $big --workers 4
one c4-n10-r 0-3 $big --workers 4 --worker-nice 10
one a16-k16-n10 0-15 $big --workers 16 --cpu-decoded 16 --worker-nice 10
one s8-cpu-n10 0-7 --variant jpeg-compiled --data-dir $small --workers 8 --worker-nice 10
