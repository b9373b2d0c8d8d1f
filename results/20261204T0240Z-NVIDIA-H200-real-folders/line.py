"""One line from a train.py record: steps/s, the window's note, and the record's photos routing."""
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
p = r.get("photos") or {}
print(f"{r['steps_per_s']:.2f} steps/s, {r['steps']} steps, settled={r.get('settled')}, wait p90 "
      f"{r.get('data_wait_ms_p90')}, to_workers={p.get('to_workers')} rows={p.get('decoded_rows')} "
      f"verify={r.get('verified_batches')}/{r.get('verify_mismatches')}")
