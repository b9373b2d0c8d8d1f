"""One line per record under a folder: name, rate (steps/s or batches/s), window, waits."""
import json, sys
from pathlib import Path
for p in sorted(Path(sys.argv[1]).rglob("*.json")):
    if p.name in ("env.json", "diagnosis.json"):
        continue
    try:
        r = json.loads(p.read_text())
    except ValueError:
        print(p, "unreadable"); continue
    rate = r.get("steps_per_s") or r.get("batches_per_s")
    extra = ""
    if r.get("loader_batches_per_s"):
        extra = f" loader {r['loader_batches_per_s']:.2f} workers {r.get('workers_batches_per_s')}"
    if rate:
        n = r.get("steps") or r.get("batches")
        halves = r.get("steps_per_s_halves") or r.get("batches_per_s_halves") or []
        extra += f" n={n} halves={[round(h, 2) for h in halves]} wait={r.get('data_wait_share', r.get('output_path_share'))}"
        extra += f" step_ms={r.get('step_ms_median')} wait_p90={r.get('data_wait_ms_p90')}"
        extra += f" verified={r.get('verified_batches')} cpus={r.get('cpu_count')} photos={r.get('photos')} cache={r.get('resized_cache')}"
    print(f"{p.relative_to(sys.argv[1])}: {rate if rate is None else round(rate, 2)}{extra}")
