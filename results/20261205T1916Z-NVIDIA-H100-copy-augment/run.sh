#!/usr/bin/env bash
# Folders like a user's on the GPU: the camera-like folder and the wallpapers, --cpu-decoded 0 against auto, the CPU path, the
# survey, a 600-step check and --verify 300; the compiled ceiling in the same command. Records under $OUT/rec.
# (parts 16-19 of the script as it stood; parts 1-15 are in the earlier H100 folders' run.sh)
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
if [ ! -d /tmp/wallmix ] && [ -d .device49/wall ]; then  # each copy in a folder of its own (part 12's)
  for k in $(seq 1 $copies); do mkdir -p /tmp/wallmix/c$k
    for f in .device49/wall/*/*; do cp "$f" "/tmp/wallmix/c$k/$(basename "$(dirname "$f")")-$(basename "$f")"; done
  done
fi
if [ -d .device49/photos-512px-128 ] && [ ! -d /tmp/xdg/gpu-starvation/photos-512px-128 ]; then  # the default set
  mkdir -p /tmp/xdg/gpu-starvation && cp -r .device49/photos-512px-128 /tmp/xdg/gpu-starvation/
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
16)  # the copy's size with --augment (the crop kernel): 1024 (its default), 768 and 640, and the copy without
  # --augment, 600 steps each; then each copy's decode alone, no step (probe_copy.py); the 768 copy on 8 cores
  one ceiling16 0-15 --variant compiled --data-on-gpu
  for s in 1024 768 640; do
    T=100 one camcopy16-aug$s-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment \
      --cache-size $s --steps 600
  done
  T=100 one camcopy16-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --steps 600
  [ -z "${DRY:-}" ] && timeout 100 taskset -c 0-15 python3 .device49/probe_copy.py 4 >> "$log" 2>&1
  T=100 one camcopy8-aug768-600 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --resized-cache \
    --augment --cache-size 768 --steps 600
  ;;
17)  # the wallpapers (each copy in a folder of its own) with windows of about a minute, and --verify on their
  # routed path
  timeout 90 taskset -c 0-15 python3 .device49/probe_aug.py >> "$log" 2>&1
  one ceiling17 0-15 --variant compiled --data-on-gpu
  T=170 one wallmix16-330 0-15 --variant jpeg-gpu --data-dir /tmp/wallmix --workers 16 --worker-nice 10 --steps 330
  T=200 one wallmixcpu16-170 0-15 --variant jpeg-compiled --data-dir /tmp/wallmix --workers 16 --worker-nice 10 \
    --steps 170
  T=150 one wallmix16-verify 0-15 --variant jpeg-gpu --data-dir /tmp/wallmix --workers 16 --worker-nice 10 --verify \
    --steps 300 --settle 0
  ;;
18)  # the crops drawn for the batch at once and the crop kernel's loops swapped: the GPU test, the crops alone
  # against the old (probe_aug.py), then --augment with the copy, new and old (aug_old.py) in pairs; the
  # default set (512x512, PIL-made) and the camera-like folder without the copy, 16 and 8 cores
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
  PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_resize.py >> "$log" 2>&1
  echo "pytest rc=$?" >> "$log"
  timeout 90 taskset -c 0-15 python3 .device49/probe_aug.py >> "$log" 2>&1
  one ceiling18 0-15 --variant compiled --data-on-gpu
  for s in 1024 768; do
    T=100 one camcopy16-aug$s-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment \
      --cache-size $s --steps 600
    T=100 MAIN=.device49/aug_old.py one camcopy16-aug$s-old-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 \
      --resized-cache --augment --cache-size $s --steps 600
  done
  T=100 one camcopy16-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --steps 600
  one def16 0-15 --variant jpeg-gpu --workers 16
  one def8 0-7 --variant jpeg-gpu --workers 8 --worker-nice 10
  one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --worker-nice 10
  one cam8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10
  ;;
19)  # the pair again, the old first (part 18's new runs came first after their copy was made)
  for r in a b; do
    T=70 MAIN=.device49/aug_old.py one camcopy16-aug1024-old-600$r 0-15 --variant jpeg-gpu --data-dir /tmp/cam \
      --workers 16 --resized-cache --augment --steps 600
    T=70 one camcopy16-aug1024-600$r 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache --augment \
      --steps 600
  done
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
