#!/usr/bin/env bash
# main's crop kernel against the candidate's (candidate.patch: output rows in tiles of 8, each input row read
# once for them and summed through its column taps at once) on the device.
#   part 1: the candidate's GPU test; the ceiling; the copies at 1024 and 640 (--augment) and 512 made; each
#           kernel alone and the device's decode of each copy (probe_tiles.py); then train.py in pairs, main (m)
#           and the candidate (c, cand.py): the copy at 1024 with --augment m c c m, at 640 m c; 600 steps each
#   part 2: the issue's copy rows with WHO's code (m or c): the camera-like copy with and without --augment, and
#           the wallpapers' copy with --augment, 16 and 8 cores, 600 steps
#   part 3: the wallpapers without the copy, each path over about a minute, --verify on the GPU path's routing
# Each beside the compiled ceiling; records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T0502Z-NVIDIA-H100-tiled-crop-kernel/run.sh PART (from the repository root)
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
if [ ! -d /tmp/cand ]; then  # the candidate: a copy of the tree with its patch applied
  mkdir -p /tmp/cand && cp -r starvation tests /tmp/cand/ && (cd /tmp/cand && git apply "$here/candidate.patch") \
    || { echo "candidate.patch does not apply" >> "$log"; exit 1; }
fi
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
pair() {  # name order args...: runs of main (m) and the candidate (c), in the order given
  local name=$1 order=$2; shift 2
  for code in $(echo "$order" | grep -o .); do
    case $code in
      m) one "$name-main" "${CORES:-0-15}" "$@" ;;
      c) MAIN=$here/cand.py one "$name-cand" "${CORES:-0-15}" "$@" ;;
    esac
  done
}
aug=(--variant jpeg-gpu --data-dir /tmp/cam --workers $workers --resized-cache --augment --steps 600)
case $part in
1)
  (cd /tmp/cand && PYTHONPATH=/tmp/cand:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_resize.py) >> "$log" 2>&1
  echo "the candidate's pytest rc=$?" >> "$log"
  one ceiling1 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  made camcopy640-aug-made "${aug[@]}" --cache-size 640
  made camcopy-made --variant jpeg-gpu --data-dir /tmp/cam --workers $workers --resized-cache
  [ -z "${DRY:-}" ] && timeout 150 python3 "$here/probe_tiles.py" >> "$log" 2>&1
  T=90 pair camcopy16-aug1024-600a mc "${aug[@]}"
  T=90 pair camcopy16-aug1024-600b cm "${aug[@]}"
  T=90 pair camcopy16-aug640-600 mc "${aug[@]}" --cache-size 640
  ;;
2)
  who=${WHO:?WHO=m or c}; [ "$who" = c ] && export MAIN=$here/cand.py
  one ceiling2 0-15 --variant compiled --data-on-gpu
  for a in --augment ""; do
    T=80 one camcopy16${a:+-aug}-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers $workers --resized-cache $a \
      --steps 600
    T=80 one camcopy8${a:+-aug}-600 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 \
      --resized-cache $a --steps 600
  done
  for c in 16 8; do
    T=80 one wallcopy$c-aug-600 0-$((c - 1)) --variant jpeg-gpu --data-dir /tmp/wall --workers $c --worker-nice 10 \
      --resized-cache --augment --steps 600
  done
  ;;
3)
  one ceiling3 0-15 --variant compiled --data-on-gpu
  wall=(--data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=170 one wall16-330 0-15 --variant jpeg-gpu "${wall[@]}" --steps 330
  T=200 one wallcpu16-170 0-15 --variant jpeg-compiled "${wall[@]}" --steps 170
  T=150 one wall16-verify 0-15 --variant jpeg-gpu "${wall[@]}" --verify --steps 300 --settle 0
  ;;
4)  # the wallpapers' copy with --augment in pairs, 8 cores then 16
  one ceiling4 0-15 --variant compiled --data-on-gpu
  for c in 8 16; do
    CORES=0-$((c - 1)) T=80 pair wallcopy$c-aug-600 mccm --variant jpeg-gpu --data-dir /tmp/wall --workers $c \
      --worker-nice 10 --resized-cache --augment --steps 600
  done
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
