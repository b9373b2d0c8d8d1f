#!/usr/bin/env bash
# Before (.device/before: main as the last session left it) and after (the working tree), interleaved, the
# order swapped every other pair: the photo guard's cost on the GPU and CPU decode paths, and the study's
# pool and ceiling as controls.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
rec=$OUT/rec; mkdir -p "$rec"
photos=$PWD/.device/photos512
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$log"; nproc >> "$log"
one() {  # ver name cores script args...
  local ver=$1 name=$2 cores=$3 script=$4; shift 4
  local dir=$PWD; [ "$ver" = before ] && dir=$PWD/.device/before
  local t0=$SECONDS
  (cd "$dir" && timeout 150 taskset -c "$cores" python3 "$script" "$@" --json "$rec/$ver.$name.json") > "$rec/$ver.$name.log" 2>&1
  echo "$ver $name rc=$? $((SECONDS - t0))s: $(tail -n 1 "$rec/$ver.$name.log")" >> "$log"
}
flip=0
pair() { if [ $flip = 1 ]; then one after "$@"; one before "$@"; flip=0; else one before "$@"; one after "$@"; flip=1; fi; }
pair jpeg-compiled 0-15 train.py --variant jpeg-compiled --workers 16 --data-dir "$photos"
pair jpeg-gpu 0-15 train.py --variant jpeg-gpu --workers 16 --data-dir "$photos"
pair jpeg-gpu-8 0-7 train.py --variant jpeg-gpu --workers 8 --data-dir "$photos"
pair jpeg-compiled-8 0-7 train.py --variant jpeg-compiled --workers 8 --data-dir "$photos"
pair pool 0-15 train.py --variant pool --workers 16
pair ceiling 0-15 train.py --variant prefetch --data-on-gpu
python3 - "$rec" <<'PY' >> "$log"
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(p.read_text())
    print(p.stem, round(r["steps_per_s"], 2), r.get("steps"), r.get("settled"), r.get("steps_per_s_halves"))
PY
