#!/usr/bin/env bash
# --gpu-decoder nvjpeg (nvjpeg's planes, the colours converted after the resize) against torchvision's (t: RGB
# from nvjpeg, its colour kernel over every decoded pixel), in pairs in one command, each beside the compiled
# ceiling; 600 steps each, 16 cores.
#   part 1: the GPU tests of the kernels and the decoder; the camera-like copy at 1024 with --augment (t n), the
#           default set (t n), the camera-like set without the copy (t n), the copy again (n t), --verify of 300
#           steps of the copy (n)
#   part 2 (for a lease of about 200 s): the GPU tests; a camera-like set of 320 files, its copy at 1024 with
#           --augment, 300 steps each (t n); no ceiling
# Records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T1345Z-NVIDIA-H100-yuv-decode/run.sh PART (from the repository root; carry .device/whl,
#   pytest's wheels); DRY=1 for a small CPU run here
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
one() {  # name args...: a run on 16 cores under a timeout; its line in the log
  local name=$1 t0=$SECONDS; shift
  if [ $SECONDS -gt "${LIMIT:-520}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-90}" taskset -c 0-15 python3 train.py "$@" "${extra[@]}" --json "$rec/$name.json" > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
}
pair() {  # name order args...: runs with torchvision's decoder (t) and nvjpeg's planes (n), in order
  local name=$1 order=$2 k=0; shift 2
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      t) one "$name-$k-torchvision" "$@" ;;
      n) one "$name-$k-nvjpeg" "$@" --gpu-decoder nvjpeg ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
case $part in
1)
  if [ -z "${DRY:-}" ]; then
    [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
    PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py \
      tests/test_photos.py -k "nvjpeg or compile" >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
  fi
  # (in the order a short lease needs them: a pair of each first, then the second pair of the copy)
  one ceiling --variant compiled --data-on-gpu
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
  T=150 one camcopy-aug-made "${cam[@]/600/20}" --warmup 5 --resized-cache --augment
  pair camcopy-aug tn "${cam[@]}" --resized-cache --augment
  pair default tn --variant jpeg-gpu --workers $workers --steps 600
  pair cam tn "${cam[@]}"
  pair camcopy-aug-again nt "${cam[@]}" --resized-cache --augment
  pair camcopy-aug-verify n "${cam[@]/600/300}" --resized-cache --augment --verify --settle 0
  ;;
2)
  if [ -z "${DRY:-}" ]; then
    [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
    PYTHONPATH=$PWD:/tmp/site timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py \
      tests/test_photos.py -k "nvjpeg or compile" >> "$log" 2>&1
    echo "pytest rc=$?" >> "$log"
  fi
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $((files / 2)) >> "$log" 2>&1
  T=60 one camcopy-aug-made "${cam[@]/600/20}" --warmup 5 --resized-cache --augment
  pair camcopy-aug tn "${cam[@]/600/300}" --resized-cache --augment
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
