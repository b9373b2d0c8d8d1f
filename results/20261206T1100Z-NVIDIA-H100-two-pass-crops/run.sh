#!/usr/bin/env bash
# The crops in two passes (main: down the columns, then across) against one pass (b: the code before, main's
# resize with two-pass.patch taken back, through the decoding-thread folder's swap.py).
#   part 1: the crop kernels' GPU tests; each alone (probe.py); the camera-like set, the ceiling, its copy at
#           1024 with --augment in pairs b n n b on 16 cores; 600 steps
#   part 2: the same copy on 8 cores (b n); the copy at 768 with --augment (n), 16 and 8 cores; the copy at 1024
#           without --augment (n); a torch.profiler trace of the last 10 of 200 steps, no Python frames, and
#           analyze.py's verdict on it
#   part 3: the copy at 768 with --augment, 16 cores (b n); at 640 and 512 (n), 16 and 8 cores
#   part 4: KDE's wallpapers (carry .device/wall: tools/photo_sets.py wallpapers .device/wall), their copy at
#           1024 with --augment, 16 cores (b n) and 8 (n); the camera-like copy on 8 cores (n b); --verify of
#           300 batches of the camera-like copy with --augment (n)
#   part 5: analyze.py's verdicts on torch.profiler traces (the last 10 of 200 steps) of the ceiling, the default
#           set (jpeg-gpu) and the camera-like copy at 512 and at 1024 without --augment: whether "GPU work
#           beside the step" fires where the step is at its ceiling, and where it is not
# Each beside the compiled ceiling; records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T1100Z-NVIDIA-H100-two-pass-crops/run.sh PART (from the repository root; carry
#   .device/whl, pytest's wheels); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
swap=$here/../20261206T0905Z-NVIDIA-H100-decoding-thread/swap.py
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1 RESIZE=/tmp/resize_before.py
part=${1:?usage: run.sh PART}
OUT=${OUT:-/tmp/out}; log=$OUT/log$part.txt rec=$OUT/rec; mkdir -p "$rec"
extra=(); files=640; workers=16; psteps=10
if [ -n "${DRY:-}" ]; then
  extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; workers=2; psteps=2
  taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >> "$log" 2>&1
patch -s -R -o $RESIZE starvation/resize.py "$here/two-pass.patch" || { echo "two-pass.patch does not apply" >> "$log"; exit 1; }
cam_set() { [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1; }
[ "$part" = 5 ] || cam_set  # (part 5 makes it only for its last runs)
if [ "$part" = 4 ] && [ ! -d /tmp/wall ]; then  # the 24 JPEGs copied 11 times, each copy in a folder of its own
  for k in $(seq 1 "${COPIES:-11}"); do mkdir -p /tmp/wall/c$k
    for f in .device/wall/*/*.jpg; do cp "$f" "/tmp/wall/c$k/$(basename "$(dirname "$f")")-$(basename "$f")"; done
  done
  python3 -c "import sys; sys.path.insert(0, 'tools'); from photo_sets import describe; from pathlib import Path
print(describe(Path('/tmp/wall')))" >> "$log" 2>&1
fi
line() { python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
print(f"verified {r.get('verified_batches')}, " if r.get("verified_batches") else "", end="")
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
pair() {  # name cores order args...: runs of the code before (b) and main (n), in order
  local name=$1 cores=$2 order=$3 k=0; shift 3
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      b) one "$name-$k-one-pass" "$cores" "$swap" "$@" ;;
      n) one "$name-$k-two-passes" "$cores" train.py "$@" ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --resized-cache)
case $part in
1)
  if [ -z "${DRY:-}" ]; then
    [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
    PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
    timeout 150 python3 "$here/probe.py" >> "$log" 2>&1
  fi
  one ceiling1 0-15 train.py --variant compiled --data-on-gpu
  T=150 one camcopy-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --augment
  pair camcopy16-aug 0-15 bnnb "${cam[@]}" --workers $workers --augment
  ;;
2)
  one ceiling2 0-15 train.py --variant compiled --data-on-gpu
  T=150 one camcopy-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --augment
  pair camcopy8-aug 0-7 bn "${cam[@]}" --workers 8 --worker-nice 10 --augment
  T=150 one camcopy768-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --augment --cache-size 768
  pair camcopy768-16-aug 0-15 n "${cam[@]}" --workers $workers --augment --cache-size 768
  pair camcopy768-8-aug 0-7 n "${cam[@]}" --workers 8 --worker-nice 10 --augment --cache-size 768
  pair camcopy16-fit 0-15 n "${cam[@]}" --workers $workers --cache-size 1024
  traces=$rec/traces
  T=120 one camcopy16-aug-trace 0-15 train.py "${cam[@]/600/200}" --workers $workers --augment \
    --profile torch --profile-steps $psteps --profile-dir "$traces"
  timeout 200 python3 analyze.py "$traces" > "$rec/analyze.txt" 2>&1
  echo "analyze.py rc=$?: $(grep -m1 -i verdict "$rec/analyze.txt")" >> "$log"
  gzip -q "$traces"/*.json
  ;;
3)
  one ceiling3 0-15 train.py --variant compiled --data-on-gpu
  for px in 768 640 512; do
    T=150 one camcopy$px-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --augment --cache-size $px
  done
  pair camcopy768-16-aug 0-15 bn "${cam[@]}" --workers $workers --augment --cache-size 768
  for px in 640 512; do
    pair camcopy$px-16-aug 0-15 n "${cam[@]}" --workers $workers --augment --cache-size $px
    pair camcopy$px-8-aug 0-7 n "${cam[@]}" --workers 8 --worker-nice 10 --augment --cache-size $px
  done
  ;;
4)
  one ceiling4 0-15 train.py --variant compiled --data-on-gpu
  wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --resized-cache --augment --worker-nice 10)
  T=150 one wallcopy-aug-made 0-15 train.py "${wall[@]/600/20}" --warmup 5 --workers $workers
  pair wallcopy16-aug 0-15 bn "${wall[@]}" --workers $workers
  pair wallcopy8-aug 0-7 n "${wall[@]}" --workers 8
  T=150 one camcopy-aug-made 0-15 train.py "${cam[@]/600/20}" --warmup 5 --workers $workers --augment
  pair camcopy8-aug 0-7 nb "${cam[@]}" --workers 8 --worker-nice 10 --augment
  pair camcopy16-aug-verify 0-15 n "${cam[@]/600/300}" --workers $workers --augment --verify --settle 0
  ;;
5)
  for run in ceiling default camcopy16-fit camcopy1024-16-fit; do
    case $run in
      ceiling) args=(--variant compiled --data-on-gpu) ;;
      default) args=(--variant jpeg-gpu --workers $workers) ;;
      camcopy16-fit) args=("${cam[@]}" --workers $workers); [ $SECONDS -gt "${LIMIT:-520}" ] || cam_set ;;
      camcopy1024-16-fit) args=("${cam[@]}" --workers $workers --cache-size 1024) ;;
    esac
    T=150 one $run-trace 0-15 train.py "${args[@]}" --steps 200 --profile torch --profile-steps $psteps \
      --profile-dir "$rec/traces-$run"
    timeout 200 python3 analyze.py "$rec/traces-$run" > "$rec/analyze-$run.txt" 2>&1
    echo "analyze.py $run rc=$?: $(head -c 600 "$rec/analyze-$run.txt")" >> "$log"
    rm -f "$rec/traces-$run"/*.json*
  done
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
