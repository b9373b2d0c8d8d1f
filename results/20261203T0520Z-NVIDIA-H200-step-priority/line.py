"""One line for a run: rate, halves, data wait p90, step ms, and the decoding thread's timings if timed.
usage: line.py REC/NAME"""
import json, sys
from pathlib import Path
base = sys.argv[1]
try:
    r = json.loads(Path(base + ".json").read_text())
except (OSError, ValueError):
    print("no record"); sys.exit()
rate = r.get("steps_per_s")
out = [f"{rate:.2f}" if rate else "-", f"halves={[round(h, 2) for h in r.get('steps_per_s_halves') or []]}",
       f"n={r.get('steps')} wait={r.get('data_wait_share')} wait_p90={r.get('data_wait_ms_p90')} "
       f"step_ms={r.get('step_ms_median')} p90={r.get('step_ms_p90')} cache={r.get('resized_cache')}"]
try:
    t = json.loads(Path(base + ".times").read_text())
    out += [f"{k}={v['median']}/{v['mean']}/{v['p90']}" for k, v in t.items() if k in ("decode_jpeg", "fit_all", "hand", "cycle")]
except (OSError, ValueError):
    pass
print(" ".join(out))
