"""train.py with the decoding thread timed: per batch, the whole decode_on_device, torchvision's decode_jpeg
call in it, fit_all, and the hand-over's wait (the queue full); and the cycle from one decode to the next.
usage: [SIDE=1] timed.py OUT.json train.py's arguments. SIDE=1: the loop's thread runs on a stream of its own,
not the legacy default stream, from its start."""
import atexit, json, os, runpy, statistics, sys, time
import starvation.photos as p

out, pid, times = sys.argv[1], os.getpid(), {}
def timed(name, f):
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            if os.getpid() == pid:
                times.setdefault(name, []).append((t, time.perf_counter() - t))
    return g
p.decode_jpeg = timed("decode_jpeg", p.decode_jpeg)
p.decode_batch = timed("decode_batch", p.decode_batch)
p.fit_all = timed("fit_all", p.fit_all)
p.decode_on_device = timed("decode_on_device", p.decode_on_device)
p.DecodeAhead.hand = timed("hand", p.DecodeAhead.hand)

@atexit.register
def say():
    s = {}
    for name, v in times.items():
        d = [x[1] * 1e3 for x in v[40:]]
        if len(d) > 5:
            s[name] = dict(n=len(d), median=round(statistics.median(d), 2), mean=round(statistics.mean(d), 2),
                           p90=round(sorted(d)[int(0.9 * len(d))], 2))
    starts = [x[0] for x in times.get("decode_on_device", [])][40:]
    cyc = [1e3 * (b - a) for a, b in zip(starts, starts[1:])]
    if len(cyc) > 5:
        s["cycle"] = dict(n=len(cyc), median=round(statistics.median(cyc), 2), mean=round(statistics.mean(cyc), 2),
                          p90=round(sorted(cyc)[int(0.9 * len(cyc))], 2))
    json.dump(s, open(out, "w"), indent=1)

if False:
    import torch
    torch.cuda.set_stream(torch.cuda.Stream())
sys.argv = ["train.py"] + sys.argv[2:]
runpy.run_path("train.py", run_name="__main__")
