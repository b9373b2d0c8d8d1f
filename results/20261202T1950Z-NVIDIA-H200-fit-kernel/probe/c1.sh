#!/usr/bin/env bash
# The probe (probe2.py) on 1024x768 photos, then today's jpeg-gpu and the ceiling for reference.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device5/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD XDG_CACHE_HOME=/tmp/xdg
log=$OUT/log.txt rec=$OUT/rec; mkdir -p $rec
trap 'python3 .device5/summary.py $rec > $OUT/summary.txt; tar -czf $OUT/rec.tgz -C $OUT rec; rm -rf $rec' EXIT
[ -d /tmp/p1024 ] || python3 .device5/mk1024.py .device5/samples /tmp/p1024 >> $log 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv >> $log
NVIMGCODEC_VERBOSITY=1 timeout 330 python3 .device5/probe2.py /tmp/p1024 > $OUT/probe.txt 2>&1; echo "probe rc=$?" >> $log
one() {  # name cores args...
  local name=$1 cores=$2; shift 2; local t0=$SECONDS
  timeout 120 taskset -c $cores python3 train.py "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(grep -v '^\[' $rec/$name.log | tail -n 1 | cut -c1-150)" >> $log
}
#one ceiling 0-15 --variant compiled --data-on-gpu
#one big16-tv 0-15 --variant jpeg-gpu --workers 16 --data-dir /tmp/p1024
