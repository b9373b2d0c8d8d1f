#!/usr/bin/env bash
# The decoding thread with --augment, and what holds the camera-like set without the copy. Part 1 runs train.py
# as main holds it (b) against the same with the interpreter's switch interval at $SWITCH s (s, switch.py;
# Python's default 0.005), and the previous run folder's `draws` piece (the crops drawn in torch ops, on the
# decoding thread) with it (d).
#   part 1: the camera-like set; the ceiling; its copy at 1024 with --augment in pairs b s s b, then d once
#           with the switch; the set without the copy (jpeg-gpu) on 16 and 8 cores, b s each; 600 steps
#   part 2: main's crop kernel (o) against one that takes an image's three channels in one program (c: main's
#           resize with channels.patch, through swap.py): each alone (probe.py); the copy at 1024 with
#           --augment, 16 cores in pairs o c c o, 8 cores o c; 600 steps
#   part 3: sqrt, exp and round of a small CPU tensor on a side thread, the cores idle or busy (probe_math.py)
#   part 4: the camera-like set without the copy, the loader alone (--loader-only: its batches/s and the
#           workers' alone) on 8 cores, then on 16
# Each beside the compiled ceiling; records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T0905Z-NVIDIA-H100-decoding-thread/run.sh PART (from the repository root); DRY=1 for a
#   small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pieces=$here/../20261206T0704Z-NVIDIA-H100-cheaper-crops-slower/pieces.py
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1 SWITCH=${SWITCH:-0.0005}
part=${1:?usage: run.sh PART}
OUT=${OUT:-/tmp/out}; log=$OUT/log$part.txt rec=$OUT/rec; mkdir -p "$rec"
extra=(); files=640; workers=16
if [ -n "${DRY:-}" ]; then
  extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; workers=2
  taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1; echo "SWITCH=$SWITCH"
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >> "$log" 2>&1
[ -d /tmp/cam ] || [ "$part" = 3 ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
line() { python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
print(f"{r.get('steps_per_s', 0):.2f} steps/s, {r.get('steps')} steps, settled={r.get('settled')}, step median "
      f"{r.get('step_ms_median', 0):.1f} ms, waited {r.get('data_wait_share', 0):.0%}, wait p90 "
      f"{r.get('data_wait_ms_p90', 0):.1f} ms")
PY
}
one() {  # name cores script args...: a run under taskset and a timeout; its line in the log
  local name=$1 cores=$2 script=$3 t0=$SECONDS; shift 3
  if [ $SECONDS -gt "${LIMIT:-520}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-90}" taskset -c "$cores" python3 $script "$@" "${extra[@]}" --json "$rec/$name.json" \
    > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
}
pair() {  # name cores order args...: runs of main (b), main with the switch (s), the draws with it (d), in order
  local name=$1 cores=$2 order=$3 k=0; shift 3
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      b) one "$name-$k-main" "$cores" train.py "$@" ;;
      s) one "$name-$k-switch" "$cores" "$here/switch.py train.py" "$@" ;;
      d) PIECES=draws one "$name-$k-draws-switch" "$cores" "$here/switch.py $pieces" "$@" ;;
      o) one "$name-$k-main" "$cores" train.py "$@" ;;
      c) one "$name-$k-channels" "$cores" "$here/swap.py" "$@" ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600)
case $part in
1)
  one ceiling1 0-15 train.py --variant compiled --data-on-gpu
  T=150 one camcopy-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --resized-cache --augment
  pair camcopy16-aug 0-15 bssbd "${cam[@]}" --workers $workers --resized-cache --augment
  pair cam16 0-15 bs "${cam[@]}" --workers $workers
  pair cam8 0-7 bs "${cam[@]}" --workers 8 --worker-nice 10
  ;;
2)
  export RESIZE=/tmp/resize_channels.py
  patch -s -o $RESIZE starvation/resize.py "$here/channels.patch" || { echo "channels.patch does not apply" >> "$log"; exit 1; }
  one ceiling2 0-15 train.py --variant compiled --data-on-gpu
  T=150 one camcopy-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --resized-cache --augment
  [ -z "${DRY:-}" ] && timeout 150 python3 "$here/probe.py" >> "$log" 2>&1
  pair camcopy16-aug 0-15 occo "${cam[@]}" --workers $workers --resized-cache --augment
  pair camcopy8-aug 0-7 oc "${cam[@]}" --workers 8 --worker-nice 10 --resized-cache --augment
  ;;
3)
  timeout 120 python3 "$here/probe_math.py" >> "$log" 2>&1
  ;;
4)
  [ -n "${DRY:-}" ] && extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1)  # (no step to compile)
  T=70 one cam8-loader 0-7 train.py --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --loader-only
  grep -h "batches/s" "$rec/cam8-loader.log" >> "$log"
  T=70 one cam16-loader 0-15 train.py --variant jpeg-gpu --data-dir /tmp/cam --workers $workers --loader-only
  grep -h "batches/s" "$rec/cam16-loader.log" >> "$log"
  ;;
esac
tail -20 "$log"
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
