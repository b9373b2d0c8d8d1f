"""Read tl.py's timelines: per window of 50 loop waits, the loop's wait, the decode calls, the source
waits and the heartbeat's lateness (median / p90, ms), so that a run that changes kind shows where.
usage: tlread.py OUT.json"""
import json, statistics, sys
ev = json.load(open(sys.argv[1]))
def stats(xs):
    xs = sorted(x * 1e3 for x in xs)
    return f"{statistics.median(xs):6.2f}/{xs[int(0.9 * len(xs))]:6.2f}" if xs else "     -/     -"
waits = ev.get("loop_wait", [])
print("window  t(s)   loop_wait   decode_jpeg  nvjpeg_sync  source_wait  hand        heartbeat_late   (median/p90 ms)")
for i in range(0, len(waits) - 1, 50):
    a, b = waits[i][0], waits[min(i + 50, len(waits) - 1)][0]
    inside = lambda k: [d for t, d in ev.get(k, []) if a <= t < b]  # noqa: E731
    print(f"{i:5d} {a:6.1f}  {stats(inside('loop_wait'))}  {stats(inside('decode_jpeg'))}  {stats(inside('nvjpeg_sync'))}  "
          f"{stats(inside('source_wait'))}  {stats(inside('hand'))}  {stats(inside('heartbeat_late'))}")
