"""The decode thread's cap, beside the compiled step (H200, 1024x768 photos): the new fit kernel against
torchvision's resize, the decode stream's priority, and Python's GIL switch interval. Each job runs once a
step on a thread and stream of its own; ms/step and jobs done per step. usage: probe3.py FOLDER"""
import collections, queue, statistics, sys, threading, time
from pathlib import Path
import torch
import train
from starvation import photos, resize
from starvation.data import Batch

files = sorted(Path(sys.argv[1]).glob("*.jpg"))
enc = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files]
groups = [enc[i * 64:(i + 1) * 64] for i in range(len(enc) // 64)]
dev, S = torch.device("cuda"), 512
def say(*a):
    print(*a, flush=True)

tv_images = photos.decode_jpeg(groups[0], mode=photos.ImageReadMode.RGB, device=dev)
torch.cuda.synchronize()
ref = resize.fit_all(tv_images, S, kernel=False)
out = resize.fit_all(tv_images, S, kernel=True)
d = (out.int() - ref.int()).abs()
say(f"kernel vs torchvision's resize: equal {(d == 0).float().mean().item():.5f}, max {d.max().item()}")
try:
    hw = photos.hardware_decoder()
except Exception as e:
    say("nvimgcodec: cannot load:", type(e).__name__, e); hw = None

k = [0]
def nxt():
    k[0] += 1
    return groups[k[0] % len(groups)]
def tv_torch():
    torch.cuda.current_stream().synchronize()
    return resize.fit_all(photos.decode_jpeg(nxt(), mode=photos.ImageReadMode.RGB, device=dev), S, kernel=False)
def tv_decode():
    torch.cuda.current_stream().synchronize()
    return photos.decode_jpeg(nxt(), mode=photos.ImageReadMode.RGB, device=dev)
JOBS = {"tv + torch resize (today)": tv_torch, "tv + kernel": lambda: photos.decode_batch(nxt(), S, dev),
        "kernel fit alone": lambda: resize.fit_all(tv_images, S), "tv decode only": tv_decode}
if hw is not None:
    JOBS["nv + kernel"] = lambda: photos.decode_batch(nxt(), S, dev, hw)

def alone(job, n=12):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            job()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t = time.perf_counter(); job(); torch.cuda.synchronize(); ts.append(1e3 * (time.perf_counter() - t))
    return statistics.median(ts)

cfg = train.parse_config(["--variant", "compiled", "--data-on-gpu"])
main = torch.cuda.current_stream()
model = train.make_model(cfg, dev, main)
step = train.make_step(cfg, model, torch.optim.Adam(model.parameters(), fused=True), dev)
batch = Batch(torch.randint(0, 256, (64, 3, S, S), dtype=torch.uint8, device=dev), torch.randint(0, 1000, (64,), device=dev))
t = time.perf_counter(); step(batch); torch.cuda.synchronize(); say(f"compiled in {time.perf_counter() - t:.1f} s")

def rate(job=None, n=100, warm=20, prio=0):
    tokens, done, err = queue.Queue(maxsize=2), [0], []
    def worker():
        s = torch.cuda.Stream(priority=prio)
        held = collections.deque()
        try:
            with torch.cuda.stream(s):
                while tokens.get() is not None:
                    held.append((s.record_event(), job()))
                    while len(held) > 2:
                        held.popleft()[0].synchronize()
                    done[0] += 1
        except Exception as e:
            err.append(e)
    th = threading.Thread(target=worker, daemon=True)
    if job is not None:
        th.start()
    for i in range(warm + n):
        if i == warm:
            torch.cuda.synchronize(); t0 = time.perf_counter(); d0 = done[0]
        if job is not None:
            try:
                tokens.put_nowait(1)
            except queue.Full:
                pass
        step(batch)
    torch.cuda.synchronize()
    dt, d1 = time.perf_counter() - t0, done[0]
    if job is not None:
        tokens.put(None); th.join()
    return 1e3 * dt / n, (d1 - d0) / n, err

say("\njob alone, ms a batch (median of 12, synchronized):")
for name, job in JOBS.items():
    say(f"  {name}: {alone(job):.2f}")
for switch, prio in [(0.005, 0), (0.005, -1), (0.001, 0), (0.001, -1), (0.0002, -1)]:
    sys.setswitchinterval(switch)
    base = rate()[0]
    say(f"\nswitch interval {switch * 1e3:g} ms, job stream priority {prio}: step alone {base:.2f} ms ({1e3 / base:.2f} steps/s)")
    for name, job in JOBS.items():
        ms, per, err = rate(job, prio=prio)
        say(f"  {name}: {ms:.2f} ms (+{ms - base:.2f}), {per:.2f} jobs/step{' ERR ' + repr(err[0]) if err else ''}")
