"""Parallel decoders beside the compiled step (H200, 1024x768 photos): one batch a step handed to N threads,
each with its own stream (priority -1) and, for nvImageCodec, its own decoder; switch interval 1 ms.
usage: probe4.py FOLDER"""
import collections, queue, sys, threading, time
from pathlib import Path
import torch
import train
from starvation import photos
from starvation.data import Batch

files = sorted(Path(sys.argv[1]).glob("*.jpg"))
enc = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files]
groups = [enc[i * 64:(i + 1) * 64] for i in range(len(enc) // 64)]
dev, S = torch.device("cuda"), 512
sys.setswitchinterval(0.001)
def say(*a):
    print(*a, flush=True)
cfg = train.parse_config(["--variant", "compiled", "--data-on-gpu"])
main = torch.cuda.current_stream()
model = train.make_model(cfg, dev, main)
step = train.make_step(cfg, model, torch.optim.Adam(model.parameters(), fused=True), dev)
batch = Batch(torch.randint(0, 256, (64, 3, S, S), dtype=torch.uint8, device=dev), torch.randint(0, 1000, (64,), device=dev))
t = time.perf_counter(); step(batch); torch.cuda.synchronize(); say(f"compiled in {time.perf_counter() - t:.1f} s")

def rate(make_job=None, threads=1, n=100, warm=20):
    tokens, done, err = queue.Queue(maxsize=2 * threads), [0], []
    lock = threading.Lock()
    def worker():
        job = make_job()
        s = torch.cuda.Stream(priority=-1)
        held = collections.deque()
        try:
            with torch.cuda.stream(s):
                k = 0
                while tokens.get() is not None:
                    k += 1
                    held.append((s.record_event(), job(groups[k % len(groups)])))
                    while len(held) > 2:
                        held.popleft()[0].synchronize()
                    with lock:
                        done[0] += 1
        except Exception as e:
            err.append(e)
    ths = [threading.Thread(target=worker, daemon=True) for _ in range(threads if make_job else 0)]
    for th in ths:
        th.start()
    for i in range(warm + n):
        if i == warm:
            torch.cuda.synchronize(); t0 = time.perf_counter(); d0 = done[0]
        if ths:
            try:
                tokens.put_nowait(1)
            except queue.Full:
                pass
        step(batch)
    torch.cuda.synchronize()
    dt, d1 = time.perf_counter() - t0, done[0]
    for th in ths:
        tokens.put(None)
    for th in ths:
        th.join()
    return 1e3 * dt / n, (d1 - d0) / n, err

tv = lambda: (lambda data: photos.decode_batch(data, S, dev))
def nv():
    hw = photos.hardware_decoder()
    return lambda data: photos.decode_batch(data, S, dev, hw)
base = rate()[0]
say(f"step alone {base:.2f} ms ({1e3 / base:.2f} steps/s)")
for name, make, threads in [("tv + kernel", tv, 1), ("tv + kernel", tv, 2), ("nv + kernel", nv, 1),
                            ("nv + kernel", nv, 2), ("nv + kernel", nv, 3)]:
    ms, per, err = rate(make, threads)
    say(f"  {name}, {threads} thread(s): {ms:.2f} ms (+{ms - base:.2f}), {per:.2f} jobs/step{' ERR ' + repr(err[0]) if err else ''}")
say(f"step alone at the end {rate()[0]:.2f} ms")
