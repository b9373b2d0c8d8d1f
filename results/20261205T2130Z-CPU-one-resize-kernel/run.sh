#!/usr/bin/env bash
# main's resize kernels against the candidate's (candidate.patch: one kernel for the fit and the crops) on the
# device: the candidate's GPU test, each kernel alone (probe_kernels.py), then train.py in pairs, main and the
# candidate (cand.py), in alternating order (parts 20 and 21); then the issue's acceptance rows, with whatever
# train.py the tree holds (parts 22-24); then candidate 2 (candidate2.patch on top: the crops drawn in Python's
# arithmetic) against the candidate (part 25). Each beside the compiled ceiling; records under $OUT/rec.
# usage: results/20261205T2130Z-CPU-one-resize-kernel/run.sh PART (from the repository root)
#   carry .device/whl (pytest's wheels) and, for parts 21, 23 and 24, .device/wall (tools/photo_sets.py wallpapers);
#   DRY=1 for a small CPU run here. Part 26 is part 20's least, for a short lease; part 27 is candidate 3
#   (candidate3.patch: candidate 2's draws on main's kernels) against main, and 28 its least
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
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1; } >> "$log" 2>&1
# the candidates: copies of the tree with their patches applied (candidates 1 and 2 apply up to 9a2f92c only,
# and only their parts need them)
if [[ $part =~ ^(20|21|25|26)$ ]] && [ ! -d /tmp/cand2 ]; then
  mkdir -p /tmp/cand && cp -r starvation tests /tmp/cand/ && (cd /tmp/cand && git apply "$here/candidate.patch") \
    && cp -r /tmp/cand /tmp/cand2 && (cd /tmp/cand2 && git apply "$here/candidate2.patch") \
    || { echo "the patches do not apply" >> "$log"; exit 1; }
fi
if [ ! -d /tmp/cand3 ]; then  # candidate 3: candidate 2's draws on main's kernels
  mkdir -p /tmp/cand3 && cp -r starvation tests /tmp/cand3/ && (cd /tmp/cand3 && git apply "$here/candidate3.patch") \
    || { echo "candidate3.patch does not apply" >> "$log"; exit 1; }
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
  if [ $SECONDS -gt "${LIMIT:-500}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-110}" taskset -c "$cores" python3 ${MAIN:-train.py} "$@" "${extra[@]}" --json "$rec/$name.json" \
    > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
}
made() {  # name args...: a short run that makes the resized copy, so that neither run of a pair is the first to read it
  local name=$1; shift
  T=150 one "$name" 0-15 "$@" --steps 20 --warmup 5
}
pair() {  # name order args...: runs of main (m), the candidate (c), candidate 2 (2) and 3 (3), in the order given
  local name=$1 order=$2; shift 2
  for code in $(echo "$order" | grep -o .); do
    case $code in
      m) one "$name-main" 0-15 "$@" ;;
      c) MAIN=$here/cand.py one "$name-cand" 0-15 "$@" ;;
      2) CAND=/tmp/cand2 MAIN=$here/cand.py one "$name-cand2" 0-15 "$@" ;;
      3) CAND=/tmp/cand3 MAIN=$here/cand.py one "$name-cand3" 0-15 "$@" ;;
    esac
  done
}
# the copy of the camera-like folder (1024) with --augment over 600 steps: the pairs of parts 20 and 25-28
aug=(--variant jpeg-gpu --data-dir /tmp/cam --workers $workers --resized-cache --augment --steps 600)
case $part in
20)  # the candidate's GPU test, the kernels alone, then the copy with --augment (1024) over 600 steps, four runs
  (cd /tmp/cand && PYTHONPATH=/tmp/cand:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_resize.py) >> "$log" 2>&1
  echo "the candidate's pytest rc=$?" >> "$log"
  [ -z "${DRY:-}" ] && timeout 180 python3 "$here/probe_kernels.py" >> "$log" 2>&1
  one ceiling20 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  T=90 pair camcopy16-aug1024-600a mc "${aug[@]}"
  T=90 pair camcopy16-aug1024-600b cm "${aug[@]}"
  ;;
21)  # the fit: the camera-like folder without the copy (its 2 MP photos through the kernel) and the copy at 512;
  # then the wallpapers' copy with --augment, never measured with a kernel for the crops
  one ceiling21 0-15 --variant compiled --data-on-gpu
  cam=(--variant jpeg-gpu --data-dir /tmp/cam --workers $workers --worker-nice 10)
  pair cam16 mc "${cam[@]}"
  pair cam16b cm "${cam[@]}"
  copy=(--variant jpeg-gpu --data-dir /tmp/cam --workers $workers --resized-cache --steps 600)
  made camcopy-made "${copy[@]}"
  T=80 pair camcopy16-600 mc "${copy[@]}"
  wall=(--variant jpeg-gpu --data-dir /tmp/wall --workers $workers --resized-cache --augment --steps 600)
  [ -d /tmp/wall ] && made wallcopy-aug-made "${wall[@]}" && T=90 pair wallcopy16-aug-600 cm "${wall[@]}"
  ;;
22)  # acceptance, the camera-like folder: without the copy (a default run and 600 steps), --verify, and the copy
  # with and without --augment, 600 steps; 16 cores, and 8 with the workers niced
  one ceiling22 0-15 --variant compiled --data-on-gpu
  cam=(--variant jpeg-gpu --data-dir /tmp/cam --worker-nice 10)
  one cam16 0-15 "${cam[@]}" --workers $workers
  one cam8 0-7 "${cam[@]}" --workers 8
  T=80 one cam16-600 0-15 "${cam[@]}" --workers $workers --steps 600
  T=80 one cam8-600 0-7 "${cam[@]}" --workers 8 --steps 600
  T=80 one cam16-verify 0-15 "${cam[@]}" --workers $workers --verify --steps 300 --settle 0
  for a in "" --augment; do
    T=80 one camcopy16${a:+-aug}-600 0-15 "${cam[@]}" --workers $workers --resized-cache $a --steps 600
    T=80 one camcopy8${a:+-aug}-600 0-7 "${cam[@]}" --workers 8 --resized-cache $a --steps 600
  done
  ;;
23)  # acceptance, the wallpapers: each path over about a minute (their stalls last seconds), --verify on the GPU
  # path's routing; the bytes pool's size is in each run's log
  one ceiling23 0-15 --variant compiled --data-on-gpu
  wall=(--data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=170 one wall16-330 0-15 --variant jpeg-gpu "${wall[@]}" --steps 330
  T=200 one wallcpu16-170 0-15 --variant jpeg-compiled "${wall[@]}" --steps 170
  T=150 one wall16-verify 0-15 --variant jpeg-gpu "${wall[@]}" --verify --steps 300 --settle 0
  ;;
24)  # acceptance, the wallpapers' copy with and without --augment on 16 and 8 cores, and the default set
  one ceiling24 0-15 --variant compiled --data-on-gpu
  for a in "" --augment; do
    T=80 one wallcopy16${a:+-aug}-600 0-15 --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --resized-cache $a \
      --steps 600
    T=80 one wallcopy8${a:+-aug}-600 0-7 --variant jpeg-gpu --data-dir /tmp/wall --workers 8 --worker-nice 10 \
      --resized-cache $a --steps 600
  done
  one def16 0-15 --variant jpeg-gpu --workers $workers
  one def8 0-7 --variant jpeg-gpu --workers 8 --worker-nice 10
  ;;
25)  # candidate 2 against the candidate: the same kernel, the crops drawn in Python's arithmetic or by
  # get_params an image at a time; the draws alone first (draws.py), and candidate 2's tests
  (cd /tmp/cand2 && PYTHONPATH=/tmp/cand2:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_resize.py) >> "$log" 2>&1
  echo "candidate 2's pytest rc=$?" >> "$log"
  python3 "$here/draws.py" >> "$log" 2>&1
  one ceiling25 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  T=90 pair camcopy16-aug1024-600a c2 "${aug[@]}"
  T=90 pair camcopy16-aug1024-600b 2c "${aug[@]}"
  ;;
26)  # part 20's least, for a short lease: one pair of the copy with --augment (1024), then each kernel alone
  one ceiling26 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  T=90 pair camcopy16-aug1024-600a mc "${aug[@]}"
  [ -z "${DRY:-}" ] && timeout 120 python3 "$here/probe_kernels.py" >> "$log" 2>&1
  ;;
27)  # candidate 3 against main: main's kernels, the crops drawn as candidate 2 draws them; its tests first
  (cd /tmp/cand3 && PYTHONPATH=/tmp/cand3:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider \
    tests/test_resize.py) >> "$log" 2>&1
  echo "candidate 3's pytest rc=$?" >> "$log"
  one ceiling27 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  T=90 pair camcopy16-aug1024-600a m3 "${aug[@]}"
  T=90 pair camcopy16-aug1024-600b 3m "${aug[@]}"
  ;;
28)  # part 27's least, for the last minutes of a lease: one pair, no tests
  one ceiling28 0-15 --variant compiled --data-on-gpu
  made camcopy-aug-made "${aug[@]}"
  T=60 pair camcopy16-aug1024-600a m3 "${aug[@]}"
  ;;
esac
tail -30 "$log"
# (at most 8 files come back from $OUT: the records go as one archive)
tar -cJf "$OUT/rec$part.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
