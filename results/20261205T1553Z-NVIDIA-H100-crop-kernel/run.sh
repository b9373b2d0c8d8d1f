#!/usr/bin/env bash
# Folders like a user's on the GPU: the camera-like folder and the wallpapers, --cpu-decoded 0 against auto, the CPU path, the
# survey, a 600-step check and --verify 300; the compiled ceiling in the same command. Records under $OUT/rec.
# (parts 11-15 of the script as it stood; parts 1-10 are in the earlier H100 folders' run.sh)
# usage: .device49/run49.sh [PART] (carry .device49: the wallpapers' JPEGs); DRY=1 for a small CPU run here
set -uo pipefail
export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
part=${1:-1}
log=$OUT/log$part.txt rec=$OUT/rec; mkdir -p "$rec"
extra=(); files=640; copies=11
if [ -n "${DRY:-}" ]; then
  extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; copies=1
  taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1; } >> "$log" 2>&1
[ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
if [ ! -d /tmp/wall ] && [ -d .device49/wall ]; then
  for d in .device49/wall/*/; do t=/tmp/wall/$(basename "$d"); mkdir -p "$t"
    for f in "$d"*; do for k in $(seq 1 $copies); do cp "$f" "$t/$k-$(basename "$f")"; done; done; done
fi
python3 -c "import sys; sys.path.insert(0,'tools'); from photo_sets import describe; from pathlib import Path
print(describe(Path('/tmp/cam'))); Path('/tmp/wall').is_dir() and print(describe(Path('/tmp/wall')))" >> "$log" 2>&1
line() { python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
p, s = r.get("photos") or {}, r.get("settings") or {}
print(f"{r.get('steps_per_s', 0):.2f} steps/s, {r.get('steps')} steps, settled={r.get('settled')}, wait p90 "
      f"{r.get('data_wait_ms_p90')}, cpu_decoded={s.get('cpu_decoded')} to_workers={p.get('to_workers')} "
      f"rows={p.get('decoded_rows')} verify={r.get('verified_batches')}/{r.get('verify_mismatches')}")
PY
}
one() {  # name cores args...: a train.py run under taskset and a timeout; its record and its line in the log
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt "${LIMIT:-500}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-110}" taskset -c "$cores" python3 ${MAIN:-train.py} "$@" "${extra[@]}" --json "$rec/$name.json" \
    > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
  grep -h -e "pinned pool" -e "cpu-decoded auto" "$rec/$name.log" | sed 's/^/    /' >> "$log"
}
survey() {  # name cores dir
  timeout 120 taskset -c "$2" python3 train.py --survey --data-dir "$3" "${extra[@]}" --json "$rec/$1.json" \
    > "$rec/$1.log" 2>&1; echo "$1 rc=$?" >> "$log"; cat "$rec/$1.log" >> "$log"
}
case $part in
11)  # the crop kernel: compiled and checked on the GPU, then against torchvision's crops (crops_old.py) in pairs
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py >> "$log" 2>&1
  one ceiling11 0-15 --variant compiled --data-on-gpu
  for r in a b; do
    one camcopy16-aug-$r 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment
    MAIN=.device49/crops_old.py one camcopy16-aug-old-$r 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
      --resized-cache --augment
  done
  T=80 one camcopy16-aug-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment --steps 600
  T=80 MAIN=.device49/crops_old.py one camcopy16-aug-old-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
    --resized-cache --augment --steps 600
  one cam16-aug 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --worker-nice 10 --augment
  MAIN=.device49/crops_old.py one cam16-aug-old 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
    --worker-nice 10 --augment
  ;;
13)  # the crop kernel without the copy: the camera-like files cropped whole, the kernel against torchvision's
  one cam16-aug 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --worker-nice 10 --augment
  MAIN=.device49/crops_old.py one cam16-aug-old 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
    --worker-nice 10 --augment
  ;;
14)  # the same pair over 600 steps
  one cam16-aug 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --worker-nice 10 --augment --steps 600
  MAIN=.device49/crops_old.py one cam16-aug-old 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
    --worker-nice 10 --augment --steps 600
  ;;
15)  # the copy's pair over 600 steps again (part 11's kernel run did not settle)
  T=70 one camcopy16-aug-600c 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment \
    --steps 600
  T=70 MAIN=.device49/crops_old.py one camcopy16-aug-old-600c 0-15 --variant jpeg-gpu --data-dir /tmp/cam \
    --workers 16 --resized-cache --augment --steps 600
  ;;
12)  # the wallpapers with each copy in a folder of its own, so that a batch read in order holds the 24 files
  # about 2.7 times over, not 11 copies of one or two: their paths side by side, then the loader alone
  if [ ! -d /tmp/wallmix ]; then
    for k in $(seq 1 11); do mkdir -p /tmp/wallmix/c$k
      for f in .device49/wall/*/*; do cp "$f" "/tmp/wallmix/c$k/$(basename "$(dirname "$f")")-$(basename "$f")"; done
    done
  fi
  one ceiling12 0-15 --variant compiled --data-on-gpu
  for r in a b; do
    one wallmix16-$r 0-15 --variant jpeg-gpu --data-dir /tmp/wallmix --workers 16 --worker-nice 10
    one wallmixcpu16-$r 0-15 --variant jpeg-compiled --data-dir /tmp/wallmix --workers 16 --worker-nice 10
  done
  T=150 one wallmix16-loader 0-15 --variant jpeg-gpu --data-dir /tmp/wallmix --workers 16 --loader-only
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
