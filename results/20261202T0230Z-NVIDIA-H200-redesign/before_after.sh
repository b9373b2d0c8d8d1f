#!/usr/bin/env bash
# Before/after the redesign on one machine, in one command: each variant run by the code before (.device/before,
# main at e2def56) and after (the working tree), interleaved, the order swapped every other variant.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
rec=/tmp/rec; mkdir -p "$rec"
photos=$PWD/.device/photos512
log=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$log"
nproc >> "$log"
one() {  # ver name script args...
  local ver=$1 name=$2 script=$3; shift 3
  local dir=$PWD; [ "$ver" = before ] && dir=$PWD/.device/before
  local t0=$SECONDS
  (cd "$dir" && timeout 120 python3 "$script" "$@" --json "$rec/$ver.$name.json") > "$rec/$ver.$name.log" 2>&1
  local rc=$?
  echo "$ver $name rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$rec/$ver.$name.log")" >> "$log"
}
pair() {  # name script args...: before then after, or after then before
  if [ "$flip" = 1 ]; then one after "$@"; one before "$@"; flip=0; else one before "$@"; one after "$@"; flip=1; fi
}
flip=0
pair pool train.py --variant pool --workers 16
pair prefetch train.py --variant prefetch --workers 16
pair ceiling train.py --variant prefetch --data-on-gpu
pair jpeg-compiled train.py --variant jpeg-compiled --workers 16 --data-dir "$photos"
pair infer-streams infer.py --variant streams
pair infer-ceiling infer.py --variant streams --outputs-on-gpu
# the moved paths, checked on the device: what the step reads against what the host or the decoder made
one after verify-jpeg-gpu train.py --variant jpeg-gpu --workers 16 --data-dir "$photos" --verify --steps 100
one after verify-pool train.py --variant pool --workers 16 --verify --steps 100
python3 - "$rec" "$OUT/records.json" <<'EOF'
import json, pathlib, sys
out = {p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))}
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k, r in out.items():
    print(k, round(r["steps_per_s"], 2), r.get("steps"), r.get("settled"), r.get("steps_per_s_halves"))
EOF
tar -czf "$OUT/logs.tgz" -C "$rec" .
