"""The CUDA runtime and driver calls in torch.profiler's chrome trace, per thread: count, total ms, median
and max ms of each name, so that allocations (cudaMalloc, cudaFree, cudaHostAlloc, cudaFreeHost: the frees
wait for the whole device) and long syncs show on the thread that makes them; then each thread's calls
over 5 ms in order.
usage: tp2.py TRACE.json"""
import collections, json, statistics, sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
calls = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "dur" in e]
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name" and "args" in e}
by = collections.defaultdict(lambda: collections.defaultdict(list))
for e in calls:
    by[e["tid"]][e["name"]].append(e["dur"] / 1e3)
t0 = min(e["ts"] for e in calls) if calls else 0
for tid, d in sorted(by.items(), key=lambda kv: -sum(map(len, kv[1].values()))):
    print(f"## thread {tid} {names.get(tid, '')}: {sum(map(len, d.values()))} calls")
    for n, xs in sorted(d.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {n:40s} {len(xs):6d} {sum(xs):9.2f} ms  median {statistics.median(xs):7.3f}  max {max(xs):8.3f}")
    long = sorted((e for e in calls if e["tid"] == tid and e["dur"] > 5000), key=lambda e: e["ts"])
    for e in long[:40]:
        print(f"    at {(e['ts'] - t0) / 1e3:9.1f} ms: {e['name']} {e['dur'] / 1e3:.2f} ms")
