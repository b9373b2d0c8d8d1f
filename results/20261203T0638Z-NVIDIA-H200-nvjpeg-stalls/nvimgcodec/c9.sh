#!/usr/bin/env bash
# Where nvImageCodec's hardware decoder puts its GPU work (it is given the decoding thread's stream, of high
# priority), and whether it stalls behind the step as nvjpeg's kernels under torchvision do: a CUDA-only
# trace of the 8-core copy run read by tp3.py, then one default run of each decoder, in one command.
# usage: c9.sh   (carry .device11 .device9/whl)
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device9/whl/*.whl || exit
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD:/tmp/site
log=$OUT/log.txt rec=/tmp/rec; mkdir -p $rec
trap 'cd /tmp && tar -czf $OUT/rec.tgz rec/*.log rec/*.json rec/*.txt 2>/dev/null' EXIT
[ -d /tmp/p1024 ] || python3 .device11/mk1024.py .device11/samples /tmp/p1024 >> $log 2>&1
copy8="--variant jpeg-gpu --data-dir /tmp/p1024 --workers 8 --resized-cache --worker-nice 10"
one() {  # name prof|plain args...
  local name=$1 how=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt ${LIMIT:-200} ]; then echo "$name skipped (time)" >> $log; return; fi
  if [ $how = prof ]; then export PROF=200:60; else unset PROF; fi
  timeout 80 taskset -c 0-7 python3 .device11/tl.py $rec/$name.tl.json $copy8 "$@" --json $rec/$name.json > $rec/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(python3 .device11/line.py $rec/$name)" >> $log
  python3 .device11/tlread.py $rec/$name.tl.json > $rec/$name.windows.txt 2>&1
  [ $how = prof ] && python3 .device11/tp3.py $rec/$name.trace.json > $OUT/$name.tp3.txt 2>&1 && rm -f $rec/$name.trace.json
  return 0
}
one nvimg-prof prof --gpu-decoder nvimgcodec --steps 300
one nvimg plain --gpu-decoder nvimgcodec
one tv plain
