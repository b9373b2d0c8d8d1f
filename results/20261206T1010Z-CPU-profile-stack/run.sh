#!/usr/bin/env bash
# What torch.profiler's Python frames (--profile-stack) cost a traced step, on this machine's CPU: train.py's
# small CPU run (the sizes it picks without a GPU) of the compiled variant, 30 steps with the last 10 traced,
# without and with --profile-stack, in turns, three of each; and the same run unprofiled. Each run's profiled
# and whole-window rates come from its record.
# usage: results/20261206T1010Z-CPU-profile-stack/run.sh (from the repository root, with .venv's python on PATH)
set -euo pipefail
OUT=${OUT:-/tmp/out-stack}; mkdir -p "$OUT"
export XDG_CACHE_HOME=$OUT/xdg PYTHONPATH=$PWD
run() {  # name args...
  local name=$1; shift
  python train.py --variant compiled --device cpu --steps 30 --warmup 3 "$@" --json "$OUT/$name.json" \
    > "$OUT/$name.log" 2>&1
  python - "$OUT/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}: {r['steps_per_s']:.3f} steps/s over the window, traced steps "
      f"{r.get('profiled_steps_per_s') or 0:.3f} steps/s ({r.get('profiled_steps')} steps)")
PY
}
run plain
for k in 1 2 3; do
  run "frames-off-$k" --profile torch --profile-steps 10 --profile-dir "$OUT/traces-off-$k"
  run "frames-on-$k" --profile torch --profile-steps 10 --profile-dir "$OUT/traces-on-$k" --profile-stack
done
