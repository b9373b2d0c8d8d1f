# What a run folder's run.sh (results/*/run.sh) needs on a lent GPU machine, sourced from it:
#   lease_start PART   $OUT, $log ($OUT/logPART.txt) and $rec ($OUT/rec); the machine (GPU, driver, CPU, uptime)
#                      and the code into the log.
#                      DRY=1 makes a small CPU run here instead: $extra shrinks every run, $files and $workers
#                      the sets, and taskset runs its command on whatever cores there are
#   one NAME CORES ARGS...   train.py ARGS (or $SCRIPT) on CORES under a timeout (T, default 90 s), its record
#                      $rec/NAME.json and its figures as a line of the log; skipped once LIMIT s (default 520)
#                      have passed, so that a command ends within the lease
#   pair NAME ORDER ARGS...   one run for each code of ORDER on cores $C (default 0-15): a code is a letter of the
#                      run.sh's CODES (letter -> "PART FLAGS...", its plan) and an optional digit, --decode-threads N;
#                      "P3P" is P on 3 threads, then P on one. The run is NAME-K-PART[-tN], K its place in ORDER
#   line RECORD        a record's figures in one line
#   gpu_tests SECONDS PYTEST-ARGS...   the GPU's tests, with pytest installed from the carried wheels (.device/whl),
#                      their last lines and rc into the log; none in a dry run
#   camera_set         /tmp/cam, once: the camera-like set (tools/photo_sets.py camera, $files files)
#   wallpaper_copies   /tmp/wall, once: KDE's wallpapers' JPEGs (carried as .device/wall) copied $COPIES times (11),
#                      each copy in a folder of its own; what the set holds into the log
#   copies NAME ARGS...   the resized copies (512, and 1024 for --augment) of the folder in ARGS made once, by a
#                      run of 100 steps each (ARGS' --steps 600 made 100): a timed run on a new copy would stall
#   lease_end PART     the log's tail; the records as one archive (at most 8 files come back from $OUT)
# Each run.sh keeps its own plan (its parts, its pairs); a folder written before this file keeps its own copy.

lease_start() {
  OUT=${OUT:-/tmp/out}; log=$OUT/log$1.txt rec=$OUT/rec; mkdir -p "$rec"
  export XDG_CACHE_HOME=/tmp/xdg PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  extra=(); files=640; workers=16
  if [ -n "${DRY:-}" ]; then
    extra=(--device cpu --img-size 64 --batch-size 8 --steps 4 --warmup 1 --no-compile); files=40; workers=2
    taskset() { shift 2; "$@"; }  # (the device's 16 cores are not here)
  fi
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || echo "no GPU: a dry run"; nproc
    git log --oneline -1
    python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
    lscpu | grep -E "Model name|MHz|^CPU\(s\)"; uptime; } >> "$log" 2>&1  # (hosts' cores have differed in speed)
}

line() {
  python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
print(f"verified {r.get('verified_batches')}, " if r.get("verified_batches") else "", end="")
print(f"{r.get('steps_per_s', 0):.2f} steps/s, {r.get('steps')} steps, settled={r.get('settled')}, step median "
      f"{r.get('step_ms_median', 0):.1f} ms, waited {r.get('data_wait_share', 0):.0%}, wait p90 "
      f"{r.get('data_wait_ms_p90', 0):.1f} ms", end="")
t = r.get("decode_thread")
print(f", {t.get('threads', 1)} decoding thread(s) busy {t['busy_share']:.0%}, {t['busy_ms_median']:.1f} ms a batch "
      f"(CPU {t['cpu_ms_median']:.1f})" + (f", nvjpeg's calls {t['nvjpeg_ms_median']:.1f} (CPU "
      f"{t['nvjpeg_cpu_ms_median']:.1f})" if "nvjpeg_ms_median" in t else "")
      if t else "")
PY
}

one() {
  local name=$1 cores=$2 t0=$SECONDS; shift 2
  if [ $SECONDS -gt "${LIMIT:-520}" ]; then echo "$name skipped (time)" >> "$log"; return; fi
  timeout "${T:-90}" taskset -c "$cores" python3 "${SCRIPT:-train.py}" "$@" "${extra[@]}" --json "$rec/$name.json" \
    > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(line "$rec/$name.json")" >> "$log"
}

pair() {
  local name=$1 order=$2 k=0 run n; shift 2
  for run in $(grep -o '[a-zA-Z][0-9]*' <<< "$order"); do
    k=$((k + 1)) n=${run:1}
    local code=(${CODES[${run:0:1}]:?pair: no code ${run:0:1} in CODES})  # (flags hold no spaces: split on them)
    one "$name-$k-${code[0]}${n:+-t$n}" "${C:-0-15}" "$@" "${code[@]:1}" ${n:+--decode-threads $n}
  done
}

gpu_tests() {
  local seconds=$1; shift
  [ -z "${DRY:-}" ] || return 0
  [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/whl/*.whl >> "$log" 2>&1
  PYTHONPATH=$PWD:/tmp/site timeout "$seconds" python3 -m pytest -q -p no:cacheprovider "$@" >> "$log" 2>&1
  echo "pytest rc=$?" >> "$log"
}

camera_set() {
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files "$files" >> "$log" 2>&1
}

wallpaper_copies() {
  [ ! -d /tmp/wall ] || return 0
  for k in $(seq 1 "${COPIES:-11}"); do mkdir -p /tmp/wall/c$k
    for f in .device/wall/*/*.jpg; do cp "$f" "/tmp/wall/c$k/$(basename "$(dirname "$f")")-$(basename "$f")"; done
  done
  python3 -c "import sys; sys.path.insert(0, 'tools'); from photo_sets import describe; from pathlib import Path
print(describe(Path('/tmp/wall')))" >> "$log" 2>&1
}

copies() {
  local name=$1; shift
  [ ! -f "/tmp/$name-copies-made" ] || return 0
  T=60 one $name-copy-make 0-15 "${@/600/100}" --resized-cache
  T=60 one $name-copy-augment-make 0-15 "${@/600/100}" --resized-cache --augment
  touch "/tmp/$name-copies-made"
}

lease_end() {
  tail -30 "$log"
  tar -cJf "$OUT/rec$1.tar.xz" -C "$OUT" rec && rm -rf "$rec"; ls -la "$OUT"
}
