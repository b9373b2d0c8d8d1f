"""The workers' decode rate on camera-like files, by kind, with 1, 8 and 16 processes decoding at once: does a
core's rate hold when every core decodes (hyper-threads, memory bandwidth)? python3 .device/probe49.py DIR"""
import multiprocessing as mp, os, sys, time
from pathlib import Path
import torch
sys.path.insert(0, os.getcwd())
from starvation.decoders import decode
from starvation.folder import peek

def work(args):
    files, seconds = args
    torch.set_num_threads(1)
    n, t_end = 0, time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < t_end:
        decode(files[n % len(files)], 512)
        n += 1
    return n, time.perf_counter() - t0

if __name__ == "__main__":
    folder = Path(sys.argv[1])
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".jpg", ".png"))
    kinds = {}
    for f in files:
        h = peek(f, 89_478_485)
        kinds.setdefault(h.kind if hasattr(h, "kind") else "bad", []).append(f)
    print({k: len(v) for k, v in kinds.items()}, flush=True)
    print(open("/proc/cpuinfo").read().count("processor"), "logical CPUs;", os.popen("lscpu | grep -i 'thread\\|core\\|socket\\|model name'").read(), flush=True)
    for kind in ("progressive", "baseline 4:2:0"):
        fs = kinds.get(kind, [])
        if not fs:
            continue
        for procs in (1, 8, 16):
            with mp.get_context("fork").Pool(procs) as pool:
                out = pool.map(work, [(fs[i::procs] or fs, 3.0) for i in range(procs)])
            n = sum(a for a, _ in out); secs = max(b for _, b in out)
            print(f"{kind}: {procs} processes: {n / secs:.0f} files/s, {1e3 * secs * procs / n:.1f} ms a file a process",
                  flush=True)
