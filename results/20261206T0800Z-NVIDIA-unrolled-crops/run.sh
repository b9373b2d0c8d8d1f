#!/usr/bin/env bash
# The resize before this run's change (b, before.py) against main's (m) on the device: main's crops by the
# unrolled kernel where their runs are short, each image read where it lies, the table from page-locked memory,
# the crops drawn for the batch at once.
#   part 1: main's GPU test of the resize; the camera-like set; the ceiling; the camera-like copy made (1024,
#           for --augment); each resize alone (probe.py); train.py with --augment on the copy at 1024, 16 cores,
#           in pairs b m m b; 600 steps each
#   part 2: the copy rows, pairs b m: --augment on 8 cores, without it on 16 and 8, and the wallpapers' copy
#           with --augment on 16
#   part 3: the wallpapers without the copy, main only: each path over about a minute, --verify on the GPU path
# Each beside the compiled ceiling; records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T0800Z-NVIDIA-unrolled-crops/run.sh PART (from the repository root)
#   carry .device/whl (pytest's wheels: pip download -d .device/whl pytest) and, for parts 2 and 3, .device/wall
#   (tools/photo_sets.py wallpapers .device/wall, its PNGs deleted); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
part=${1:?usage: run.sh PART}
OUT=${OUT:-/tmp/out}; log=$OUT/log$part.txt rec=$OUT/rec; mkdir -p "$rec"
extra=(); files=640; workers=16
if [ -n "${DRY:-}" ]; then
  extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; workers=2
  taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >> "$log" 2>&1
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
[ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
if [ ! -d /tmp/wall ] && [ -d .device/wall ]; then  # the 24 JPEGs copied 11 times, each copy in a folder of its own
  for k in $(seq 1 "${COPIES:-11}"); do mkdir -p /tmp/wall/c$k
    for f in .device/wall/*/*.jpg; do cp "$f" "/tmp/wall/c$k/$(basename "$(dirname "$f")")-$(basename "$f")"; done
  done
fi
python3 -c "import sys; sys.path.insert(0,'tools'); from photo_sets import describe; from pathlib import Path
print(describe(Path('/tmp/cam'))); Path('/tmp/wall').is_dir() and print(describe(Path('/tmp/wall')))" >> "$log" 2>&1
line() { python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
print(f"{r.get('steps_per_s', 0):.2f} steps/s, {r.get('steps')} steps, settled={r.get('settled')}, wait p90 "
      f"{r.get('data_wait_ms_p90')}, verify={r.get('verified_batches')}/{r.get('verify_mismatches')}")
PY
}
one() {  # name cores args...: a train.py run (MAIN: another script) under taskset and a timeout; its line in the log
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt "${LIMIT:-540}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-110}" taskset -c "$cores" python3 ${MAIN:-train.py} "$@" "${extra[@]}" --json "$rec/$name.json" \
    > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
}
made() {  # name args...: a short run that makes the resized copy, so that neither run of a pair is the first to read it
  local name=$1; shift
  T=150 one "$name" 0-15 "$@" --steps 20 --warmup 5
}
pair() {  # name order args...: runs of the code before (b) and main's (m), in the order given, each its own record
  local name=$1 order=$2 k=0; shift 2
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      b) MAIN=$here/before.py one "$name-$k-before" "${CORES:-0-15}" "$@" ;;
      m) one "$name-$k-main" "${CORES:-0-15}" "$@" ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --resized-cache --steps 600)
case $part in
1)
  (PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py -k gpu) \
    >> "$log" 2>&1
  echo "main's pytest of the resize rc=$?" >> "$log"
  one ceiling1 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${cam[@]}" --workers $workers --augment
  [ -z "${DRY:-}" ] && timeout 120 python3 "$here/probe.py" >> "$log" 2>&1
  LIMIT=${LIMIT:-560} T=100 pair camcopy16-aug bmmb "${cam[@]}" --workers $workers --augment
  ;;
2)
  one ceiling2 0-15 --variant compiled --data-on-gpu
  made camcopy-made "${cam[@]}" --workers $workers
  CORES=0-7 T=80 pair camcopy8-aug bm "${cam[@]}" --workers 8 --worker-nice 10 --augment
  T=80 pair camcopy16 bm "${cam[@]}" --workers $workers
  CORES=0-7 T=80 pair camcopy8 bm "${cam[@]}" --workers 8 --worker-nice 10
  made wallcopy-aug-made --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --resized-cache --augment
  T=80 pair wallcopy16-aug bm --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10 \
    --resized-cache --augment --steps 600
  ;;
3)
  one ceiling3 0-15 --variant compiled --data-on-gpu
  wall=(--data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=170 one wall16-330 0-15 --variant jpeg-gpu "${wall[@]}" --steps 330
  T=200 one wallcpu16-170 0-15 --variant jpeg-compiled "${wall[@]}" --steps 170
  T=150 one wall16-verify 0-15 --variant jpeg-gpu "${wall[@]}" --verify --steps 300 --settle 0
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
