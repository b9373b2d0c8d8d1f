#!/usr/bin/env bash
# --gpu-decode's levers on the 1024x768 photos: TorchCodec's decoder (on the decoding stream, high priority),
# several batches a call (--decode-group), the workers decoding part of each batch (--cpu-decoded), and the
# stream's priority (DECODE_PRIORITY 0 against -1, set before train.py runs); then a probe of the decoders alone.
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
  if [ $SECONDS -gt 540 ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ "$1" = prio0 ]; then shift; set -- -c "$PRIO0" "$@"; else set -- train.py "$@"; fi
  timeout 80 taskset -c $cores python3 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-190)" >> $log
}
big="--variant jpeg-gpu --data-dir /tmp/p1024"
one ceiling 0-15 --variant compiled --data-on-gpu
timeout 60 python3 .device6/probe5.py /tmp/p1024 > $OUT/probe5.txt 2>&1; echo "probe5 rc=$?" >> $log
one tv16 0-15 $big --workers 16
one tc16 0-15 $big --workers 16 --gpu-decoder torchcodec
one tc16-p0 0-15 prio0 $big --workers 16 --gpu-decoder torchcodec
one tv16-g2 0-15 $big --workers 16 --decode-group 2
one tc16-g2 0-15 $big --workers 16 --gpu-decoder torchcodec --decode-group 2
one tv16-k16 0-15 $big --workers 16 --cpu-decoded 16
one tc16-k16 0-15 $big --workers 16 --gpu-decoder torchcodec --cpu-decoded 16
one tc4 0-3 $big --workers 4 --gpu-decoder torchcodec
one tv4 0-3 $big --workers 4
one tc4-g2 0-3 $big --workers 4 --gpu-decoder torchcodec --decode-group 2
one tc4-k4 0-3 $big --workers 4 --gpu-decoder torchcodec --cpu-decoded 4
one tc8 0-7 $big --workers 8 --gpu-decoder torchcodec
one tv8 0-7 $big --workers 8
one tc8-k8 0-7 $big --workers 8 --gpu-decoder torchcodec --cpu-decoded 8
one tc16-g2k16 0-15 $big --workers 16 --gpu-decoder torchcodec --decode-group 2 --cpu-decoded 16
one tv16-p0 0-15 prio0 $big --workers 16
one small8-tc 0-7 --variant jpeg-gpu --data-dir $small --workers 8 --gpu-decoder torchcodec
one tv16-again 0-15 $big --workers 16
