"""train.py with a timeline: every decode call, source wait and hand-over of the decoding thread, every
wait of the loop for a batch, and a heartbeat thread's lateness (it sleeps 1 ms; what it wakes late by is
time waiting for the GIL or a core), each as (start, seconds) from the process start. With WARM=1, the
decoding thread first decodes 64 copies of the folder's largest file; with PROF=FIRST:N, a CUDA-only
torch.profiler trace covers the loop's fetches FIRST to FIRST+N (OUT.json's name, .trace.json).
usage: [WARM=1] [PROF=FIRST:N] tl.py OUT.json train.py's arguments"""
import atexit, json, os, runpy, sys, threading, time
import starvation.photos as p

out, pid, t0, ev = sys.argv[1], os.getpid(), time.perf_counter(), {}

def timed(name, f):
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            if os.getpid() == pid:  # not in a forked worker
                ev.setdefault(name, []).append((round(t - t0, 6), round(time.perf_counter() - t, 6)))
    return g

p.decode_jpeg = timed("decode_jpeg", p.decode_jpeg)
import starvation.nvjpeg as nj
nj.HardwareJpeg.__call__ = timed("hw_decode", nj.HardwareJpeg.__call__)
p.fit_all = timed("fit_all", p.fit_all)
p.before_nvjpeg_writes = timed("nvjpeg_sync", p.before_nvjpeg_writes)
p.decode_on_device = timed("decode_on_device", p.decode_on_device)
p.DecodeAhead.hand = timed("hand", p.DecodeAhead.hand)
p.DecodeAhead.fetch = timed("loop_wait", p.DecodeAhead.fetch)
work = p.DecodeAhead.work
def work_timed(self, *a):  # the decoding thread's wait for the workers' next batch of bytes
    self.source.__class__.__next__ = timed("source_wait", self.source.__class__.__next__)
    return work(self, *a)
p.DecodeAhead.work = work_timed

if os.environ.get("WARM"):  # nvjpeg's buffers grown once, before the run: 64 copies of the largest file decoded
    import glob, torch, torchvision.io
    inner = p.DecodeAhead.work
    def work_warm(self, *a):
        if not torch.cuda.is_available():
            return inner(self, *a)
        folder = sys.argv[sys.argv.index("--data-dir") + 1]
        if "--resized-cache" in sys.argv:
            folder = max(glob.glob(os.environ["XDG_CACHE_HOME"] + "/gpu-starvation/resized-*px-*"), key=os.path.getmtime)
        files = [f for f in glob.glob(folder + "/**/*", recursive=True) if f.lower().endswith((".jpg", ".jpeg"))]
        big = max(files, key=os.path.getsize)
        data = torchvision.io.read_file(big)
        t = time.perf_counter()
        torchvision.io.decode_jpeg([data] * 64, device="cuda")
        torch.cuda.synchronize()
        print(f"WARM: 64 x {big} ({os.path.getsize(big)} B) in {time.perf_counter() - t:.3f} s", file=sys.stderr)
        return inner(self, *a)
    p.DecodeAhead.work = work_warm

if os.environ.get("PROF"):  # PROF=FIRST:N: CUDA activities only (light), over the loop's fetches FIRST to FIRST+N
    import torch
    from torch._C._profiler import _ExperimentalConfig
    first, n = map(int, os.environ["PROF"].split(":"))
    fetch, seen, prof = p.DecodeAhead.fetch, [0], []
    def fetch_prof(self):
        seen[0] += 1
        if seen[0] == first:
            acts = [torch.profiler.ProfilerActivity.CUDA if torch.cuda.is_available() else torch.profiler.ProfilerActivity.CPU]
            prof.append(torch.profiler.profile(activities=acts,
                        experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True)))
            prof[0].start()
        if seen[0] == first + n and prof:
            prof[0].stop()
            prof[0].export_chrome_trace(out.replace(".tl.json", ".trace.json"))
        return fetch(self)
    p.DecodeAhead.fetch = fetch_prof

def heartbeat():
    while True:
        t = time.perf_counter()
        time.sleep(0.001)
        late = time.perf_counter() - t - 0.001
        ev.setdefault("heartbeat_late", []).append((round(t - t0, 6), round(late, 6)))
threading.Thread(target=heartbeat, daemon=True, name="heartbeat").start()

@atexit.register
def dump():
    if os.getpid() == pid:
        json.dump(ev, open(out, "w"))

sys.argv = ["train.py"] + sys.argv[2:]
runpy.run_path("train.py", run_name="__main__")
