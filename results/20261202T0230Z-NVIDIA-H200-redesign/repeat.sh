#!/usr/bin/env bash
# The two variants whose before/after differed, again: three rounds, before and after alternating.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
rec=/tmp/rec; mkdir -p "$rec"; log=$OUT/log.txt
one() {  # ver name script args...
  local ver=$1 name=$2 script=$3; shift 3
  local dir=$PWD; [ "$ver" = before ] && dir=$PWD/.device/before
  (cd "$dir" && timeout 120 python3 "$script" "$@" --json "$rec/$ver.$name.json") > "$rec/$ver.$name.log" 2>&1
  echo "$ver $name rc=$?: $(tail -n 1 "$rec/$ver.$name.log")" >> "$log"
}
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then a=after b=before; else a=before b=after; fi
  one $a infer-streams.$r infer.py --variant streams
  one $b infer-streams.$r infer.py --variant streams
  one $b prefetch.$r train.py --variant prefetch --workers 16
  one $a prefetch.$r train.py --variant prefetch --workers 16
done
python3 - "$rec" "$OUT/records.json" <<'PY'
import json, pathlib, sys
out = {p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json"))}
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k, r in out.items():
    print(k, round(r["steps_per_s"], 2), r.get("steps"), r.get("settled"))
PY
