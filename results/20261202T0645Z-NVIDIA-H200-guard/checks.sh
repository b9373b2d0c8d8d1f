#!/usr/bin/env bash
# After the change, on the device: --verify on each photo path for 300 batches, part 2's streams and its
# ceiling, bad files on the GPU decode path, and SIGTERM to run_all.sh alone during a GPU run.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
rec=$OUT/rec; mkdir -p "$rec"
photos=$PWD/.device/photos512
log=$OUT/log.txt
one() {  # name script args...
  local name=$1; shift
  local t0=$SECONDS
  timeout 150 python3 "$@" --json "$rec/$name.json" > "$rec/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s: $(tail -n 1 "$rec/$name.log")" >> "$log"
}
one verify-jpeg-gpu train.py --variant jpeg-gpu --workers 16 --data-dir "$photos" --verify --steps 300
one verify-jpeg-compiled train.py --variant jpeg-compiled --workers 16 --data-dir "$photos" --verify --steps 300
one verify-jpeg train.py --variant jpeg --workers 16 --data-dir "$photos" --verify --steps 300
one infer-streams infer.py --variant streams
one infer-ceiling infer.py --variant streams --outputs-on-gpu
# bad files where only the GPU decodes: a stream cut short, a header past the pixel limit, and data the
# decoder only warns about (an end marker after half the image data)
python3 - "$photos" /tmp/bad <<'PY'
import pathlib, shutil, sys
src, root = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = sorted(src.glob("*.jpg"))
for kind in ("cut", "bomb", "warned"):
    d = root / kind
    d.mkdir(parents=True)
    for f in files[:63]:
        shutil.copy(f, d)
    data = bytearray(files[63].read_bytes())
    if kind == "cut":
        data = data[:len(data) // 2]
    elif kind == "bomb":
        i = data.index(b"\xff\xc0")
        data[i + 5:i + 9] = (60000).to_bytes(2, "big") * 2
    else:
        data = data[:len(data) // 2] + b"\xff\xd9"
    (d / "zz-bad.jpg").write_bytes(bytes(data))
PY
for kind in cut bomb warned; do
  one "bad-gpu-$kind" train.py --variant jpeg-gpu --workers 16 --data-dir /tmp/bad/$kind --steps 20
  one "bad-cpu-$kind" train.py --variant jpeg --workers 16 --data-dir /tmp/bad/$kind --steps 20
done
# SIGTERM to run_all.sh alone, in the window of a GPU run
export PYTHON=python3
./run_all.sh --no-install --no-nsys --no-loader --repeat 1 --variants ceiling --out /tmp/ra -- --steps 100000 \
  > "$OUT/run_all.log" 2>&1 &
pid=$!
for _ in $(seq 120); do grep -q "measured\|warm-up" /tmp/ra/logs/ceiling.run1.log 2>/dev/null && break; sleep 1; done
sleep 10
t0=$(date +%s.%N); kill -TERM $pid; wait $pid; rc=$?; t1=$(date +%s.%N)
echo "run_all SIGTERM: rc=$rc after $(python3 -c "print(round($t1 - $t0, 1))") s; left: $(pgrep -f /tmp/ra | wc -l)" >> "$log"
tail -n 3 /tmp/ra/logs/ceiling.run1.log >> "$log"; cat /tmp/ra/INCOMPLETE >> "$log"
python3 - "$rec" <<'PY' >> "$log"
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(p.read_text())
    print(p.stem, round(r["steps_per_s"], 2), r.get("steps"), r.get("verified_batches"), r.get("verify_mismatches"))
PY
