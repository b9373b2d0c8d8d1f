"""One line from a train.py or infer.py record: its rate (steps/s, or part 2's batches/s), window and
whether it settled."""
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no record ({e})"); sys.exit()
rate = r.get("steps_per_s", r.get("batches_per_s"))
print(f"{rate:.2f} /s, {r.get('steps')} steps, settled={r.get('settled')}, wait {r.get('data_wait_share')}, "
      f"preset={r.get('preset')}")
