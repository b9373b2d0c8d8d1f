"""Where the step's stream loses time, from torch.profiler's chrome trace: kernels per stream, the step
stream's gaps (host late: its next kernel was launched after the gap began; else it waited on the device),
how long other streams' kernels overlap the step's, and the decoding thread's calls.
usage: tp.py TRACE.json"""
import collections, json, statistics, sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
X = [e for e in ev if e.get("ph") == "X" and "dur" in e]
kern = [e for e in X if e.get("cat") == "kernel"]
copies = [e for e in X if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
launch = {e["args"].get("correlation"): e for e in X if e.get("cat") == "cuda_runtime" and "args" in e}
by = collections.defaultdict(list)
for e in kern:
    by[e["args"].get("stream")].append(e)
print("## kernels per stream: count, total ms, median us, launching threads")
for s, es in sorted(by.items(), key=lambda kv: -sum(e["dur"] for e in kv[1])):
    tids = collections.Counter(launch[e["args"]["correlation"]]["tid"] for e in es if e["args"].get("correlation") in launch)
    print(f"  stream {s}: {len(es)}, {sum(e['dur'] for e in es) / 1e3:.1f} ms, {statistics.median(e['dur'] for e in es):.1f} us, {dict(tids.most_common(3))}")
cs = collections.Counter()
for e in copies:
    cs[(e["cat"], e["args"].get("stream"))] += e["dur"]
print("## copies/memsets per stream, ms:", {k: round(v / 1e3, 2) for k, v in cs.items()})
if not by:
    sys.exit("no kernels")
step_stream = max(by, key=lambda s: sum(e["dur"] for e in by[s]))
ks = sorted(by[step_stream], key=lambda e: e["ts"])
span = ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"]
busy = sum(e["dur"] for e in ks)
print(f"## step stream {step_stream}: span {span / 1e3:.1f} ms, kernels {busy / 1e3:.1f} ms ({100 * busy / span:.1f}%)")
gaps = {"host late": [], "device": []}
end = ks[0]["ts"] + ks[0]["dur"]
for e in ks[1:]:
    g = e["ts"] - end
    if g > 5:
        l = launch.get(e["args"].get("correlation"))
        late = l is not None and l["ts"] + l["dur"] > end + 2
        gaps["host late" if late else "device"].append(g)
    end = max(end, e["ts"] + e["dur"])
for k, g in gaps.items():
    if g:
        g.sort()
        print(f"  gaps over 5 us, {k}: {len(g)}, {sum(g) / 1e3:.1f} ms, median {statistics.median(g):.0f} us, "
              f"p90 {g[int(0.9 * len(g))]:.0f}, max {g[-1]:.0f}; over 1 ms: {sum(x > 1000 for x in g)} ({sum(x for x in g if x > 1000) / 1e3:.1f} ms)")
# overlap: time other streams' kernels run while a step kernel runs
iv = [(e["ts"], e["ts"] + e["dur"]) for e in ks]
print("## other streams' kernels: ms inside the step stream's kernels / ms in its gaps")
for s, es in by.items():
    if s == step_stream:
        continue
    inside = total = 0.0
    j = 0
    for e in sorted(es, key=lambda e: e["ts"]):
        a, b = e["ts"], e["ts"] + e["dur"]
        total += b - a
        while j < len(iv) and iv[j][1] <= a:
            j += 1
        k = j
        while k < len(iv) and iv[k][0] < b:
            inside += max(0, min(b, iv[k][1]) - max(a, iv[k][0]))
            k += 1
    print(f"  stream {s}: {inside / 1e3:.1f} / {(total - inside) / 1e3:.1f}")
names = collections.Counter()
for e in kern:
    if e["args"].get("stream") != step_stream:
        names[(e["args"].get("stream"), e["name"][:60])] += e["dur"]
print("## other streams' kernels by name, ms:")
for (s, n), d in names.most_common(12):
    print(f"  {s} {n}: {d / 1e3:.1f}")
ops = collections.defaultdict(list)
for e in X:
    if e.get("cat") == "cpu_op" and any(w in e["name"] for w in ("decode_jpeg", "fit", "resize", "_copy_from")):
        ops[(e["tid"], e["name"])].append(e["dur"] / 1e3)
print("## CPU ops of interest (thread, name): count, median ms, p90, max")
for k, d in sorted(ops.items(), key=lambda kv: -sum(kv[1]))[:12]:
    d.sort()
    print(f"  {k}: {len(d)}, {statistics.median(d):.2f}, {d[int(0.9 * len(d))]:.2f}, {d[-1]:.2f}")
ann = collections.defaultdict(list)
for e in X:
    if e.get("cat") == "user_annotation" and e["name"] in ("get batch", "Compute", "copy batch"):
        ann[(e["tid"], e["name"])].append(e["dur"] / 1e3)
print("## host ranges (thread, name): count, median ms, p90, sum")
for k, d in ann.items():
    d.sort()
    print(f"  {k}: {len(d)}, {statistics.median(d):.2f}, {d[int(0.9 * len(d))]:.2f}, {sum(d):.1f}")
