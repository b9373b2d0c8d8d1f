#!/usr/bin/env bash
# The resize before (b: main's, f0c5e57's) against the candidate's (c, candidate.py; "main" in the logs, which ran while
# main held it) on the device: its fits by the unrolled kernel and its crops by the tiled one, each image read
# where it lies, the table from page-locked memory, the crops drawn for the batch at once.
#   part 1: the camera-like set; the ceiling; the camera-like copy made (1024, for --augment); each resize
#           alone (probe.py); train.py with --augment on the copy at 1024, 16 cores, in pairs b c c b; 600 steps
#   part 2: the copy rows, pairs b c: --augment on 8 cores, without it on 16 and 8, and the wallpapers' copy
#           with --augment on 16
#   part 3: the wallpapers without the copy, main's code (the code before): each path over about a minute,
#           --verify on the GPU path
#   part 4: which of the candidate's pieces slowed --augment on the copy at 1024 (pieces.py, PIECES): the code
#           before (b), then each piece alone, the crops drawn at once (d), the table from page-locked memory
#           (p), the images read where they lie (o), then the candidate (c) and b again; 16 cores, 600 steps
#   part 5: a torch.profiler trace of the last 10 of 200 steps with Python's frames (--profile-stack, which
#           the lease's main recorded unasked), before and the candidate, each read by analyze.py (its steps'
#           CSV and timeline) on the machine; the traces come back gzipped
# Each beside the compiled ceiling; records under $OUT/rec, log $OUT/logPART.txt.
# usage: results/20261206T0704Z-NVIDIA-H100-cheaper-crops-slower/run.sh PART (from the repository root)
#   for parts 2 and 3 carry .device/wall (tools/photo_sets.py wallpapers .device/wall, its PNGs deleted);
#   DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
part=${1:?usage: run.sh PART}
OUT=${OUT:-/tmp/out}; log=$OUT/log$part.txt rec=$OUT/rec; mkdir -p "$rec"
extra=(); files=640; workers=16; psteps=10
if [ -n "${DRY:-}" ]; then
  extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; workers=2; psteps=3
  taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } >> "$log" 2>&1
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
pair() {  # name order args...: runs of the code before (b), the candidate's (c) or one piece of it (d, p, o), in order
  local name=$1 order=$2 k=0; shift 2
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      b) MAIN=train.py one "$name-$k-before" "${CORES:-0-15}" "$@" ;;
      c) MAIN=$here/candidate.py one "$name-$k-candidate" "${CORES:-0-15}" "$@" ;;
      d) PIECES=draws MAIN=$here/pieces.py one "$name-$k-draws" "${CORES:-0-15}" "$@" ;;
      p) PIECES=pinned MAIN=$here/pieces.py one "$name-$k-pinned" "${CORES:-0-15}" "$@" ;;
      o) PIECES=pointers MAIN=$here/pieces.py one "$name-$k-pointers" "${CORES:-0-15}" "$@" ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --resized-cache --steps 600)
case $part in
1)
  # (the leases ran main's GPU test of the resize here while main held the candidate: its tests are at 3567711)
  one ceiling1 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${cam[@]}" --workers $workers --augment
  [ -z "${DRY:-}" ] && timeout 120 python3 "$here/probe.py" >> "$log" 2>&1
  LIMIT=${LIMIT:-560} T=100 pair camcopy16-aug bccb "${cam[@]}" --workers $workers --augment
  ;;
2)
  one ceiling2 0-15 --variant compiled --data-on-gpu
  made camcopy-made "${cam[@]}" --workers $workers
  CORES=0-7 T=80 pair camcopy8-aug bc "${cam[@]}" --workers 8 --worker-nice 10 --augment
  T=80 pair camcopy16 bc "${cam[@]}" --workers $workers
  CORES=0-7 T=80 pair camcopy8 bc "${cam[@]}" --workers 8 --worker-nice 10
  made wallcopy-aug-made --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --resized-cache --augment
  T=80 pair wallcopy16-aug bc --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10 \
    --resized-cache --augment --steps 600
  ;;
3)
  one ceiling3 0-15 --variant compiled --data-on-gpu
  wall=(--data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=170 one wall16-330 0-15 --variant jpeg-gpu "${wall[@]}" --steps 330
  T=200 one wallcpu16-170 0-15 --variant jpeg-compiled "${wall[@]}" --steps 170
  T=150 one wall16-verify 0-15 --variant jpeg-gpu "${wall[@]}" --verify --steps 300 --settle 0
  ;;
4)
  one ceiling4 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${cam[@]}" --workers $workers --augment
  LIMIT=${LIMIT:-560} T=90 pair camcopy16-aug-pieces bdpocb "${cam[@]}" --workers $workers --augment
  ;;
5)
  made camcopy-aug-made "${cam[@]}" --workers $workers --augment
  for code in before candidate; do
    traces=$OUT/rec/traces-$code
    script=train.py; [ $code = candidate ] && script=$here/candidate.py
    MAIN=$script T=120 one camcopy16-aug-trace-$code 0-15 "${cam[@]/600/200}" --workers $workers --augment \
      --profile torch --profile-stack --profile-steps $psteps --profile-dir "$traces"
    timeout 200 python3 analyze.py "$traces" > "$rec/analyze-$code.txt" 2>&1
    echo "analyze.py $code rc=$?: $(grep -m1 -i verdict "$rec/analyze-$code.txt")" >> "$log"
    gzip -q "$traces"/*.json
  done
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
