"""Where the decoding thread's slow calls wait, from a CUDA-only torch.profiler trace: the thread that
launches nvjpeg's kernels; its runtime calls over 3 ms and, for each, the GPU work that ended just before
the call returned (what it waited for), with that work's stream and how long it sat queued (start minus
its launch's end); then the queueing delay of each stream's kernels and copies, and the sync events.
usage: tp3.py TRACE.json"""
import bisect, collections, json, statistics, sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
X = [e for e in ev if e.get("ph") == "X" and "dur" in e]
gpu = sorted((e for e in X if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"] + e["dur"])
rt = [e for e in X if e.get("cat") in ("cuda_runtime", "cuda_driver")]
launch = {e["args"].get("correlation"): e for e in rt if "args" in e}
decode_tid = collections.Counter(launch[e["args"]["correlation"]]["tid"] for e in gpu
                                 if "nvjpeg" in e["name"] and e["args"].get("correlation") in launch).most_common(1)
if not decode_tid:  # another decoder: the thread that launches our resize kernel
    decode_tid = collections.Counter(launch[e["args"]["correlation"]]["tid"] for e in gpu
                                     if "_fit_kernel" in e["name"] and e["args"].get("correlation") in launch).most_common(1)
if not decode_tid:
    sys.exit("no decoding thread's kernels in the trace")
tid = decode_tid[0][0]
ends = [e["ts"] + e["dur"] for e in gpu]
def delay(g):
    l = launch.get(g["args"].get("correlation"))
    return None if l is None else g["ts"] - (l["ts"] + l["dur"])
def short(g):
    d = delay(g)
    return (f"{g['name'][:60]} stream {g['args'].get('stream')} {g['dur'] / 1e3:.2f} ms"
            + ("" if d is None else f", queued {d / 1e3:.2f} ms, launched by {launch[g['args']['correlation']]['tid']}"))
mine = sorted((e for e in rt if e["tid"] == tid), key=lambda e: e["ts"])
span = (mine[-1]["ts"] - mine[0]["ts"]) / 1e3 if mine else 0
print(f"## decoding thread {tid}: {len(mine)} calls over {span:.0f} ms; calls over 3 ms:")
for e in (e for e in mine if e["dur"] > 3000):
    end = e["ts"] + e["dur"]
    i = bisect.bisect_right(ends, end + 20)
    waited = [g for g in gpu[max(0, i - 3):i] if ends[gpu.index(g)] > end - 300][::-1]
    print(f"  at {(e['ts'] - mine[0]['ts']) / 1e3:.1f} ms: {e['name']} {e['dur'] / 1e3:.2f} ms, returned after: "
          + ("; ".join(short(g) for g in waited) if waited else "no GPU work ended in the 0.3 ms before"))
print("## queueing delay (GPU start minus launch end), per stream: count, median, p90, max ms; launching threads")
by = collections.defaultdict(list)
for g in gpu:
    d = delay(g)
    if d is not None:
        by[(g["args"].get("stream"), g.get("cat"))].append((d / 1e3, launch[g["args"]["correlation"]]["tid"]))
for (s, cat), xs in sorted(by.items(), key=lambda kv: -len(kv[1])):
    ds = sorted(d for d, _ in xs)
    print(f"  stream {s} {cat}: {len(ds)}, {statistics.median(ds):.2f} / {ds[int(0.9 * len(ds))]:.2f} / {ds[-1]:.2f}; "
          f"{dict(collections.Counter(t for _, t in xs).most_common(2))}")
sync = [e for e in X if e.get("cat") == "cuda_sync"]
print(f"## sync events: {len(sync)}; the longest 15 on the decoding thread:")
for e in sorted((e for e in sync if e.get("tid") == tid), key=lambda e: -e["dur"])[:15]:
    print(f"  {e['name']} {e['dur'] / 1e3:.2f} ms {json.dumps(e.get('args', {}))[:200]}")
