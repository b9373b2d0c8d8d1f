"""main's crop kernel against the candidate's (rows in tiles), alone, on batches of 64 random images: each call's
time with the device synchronized, and the device's time a call (torch's profiler), for --augment's crops and
for the fit (the candidate's "fit by tiles": every fit through its crop kernel, as if MAX_SHRINK were 0). Then
the device's decode of 64 files of each resized copy that /tmp/xdg holds, timed the same way.
usage: python probe_tiles.py (after run.sh has made /tmp/cand)"""
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torchvision.io import ImageReadMode, decode_jpeg, read_file

from starvation import resize

sys.path.insert(0, str(Path(__file__).parent))
from cand import resize as cand  # noqa: E402

dev, n = torch.device("cuda"), 20


def timed(name: str, what: str, code: str, call) -> None:
    for _ in range(3):  # (compiles, and the taps' cache)
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    host = (time.perf_counter() - t0) / n * 1e3
    torch.cuda.synchronize()
    total = (time.perf_counter() - t0) / n * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        torch.cuda.synchronize()
    kernels = sorted(((e.key[:40], round(getattr(e, "device_time_total", 0) / n / 1e3, 3))
                      for e in prof.key_averages()), key=lambda k: -k[1])
    print(json.dumps(dict(shape=name, what=what, code=code, host_ms=round(host, 2), total_ms=round(total, 2),
                          device_ms=round(sum(k[1] for k in kernels), 3), kernels=kernels[:4])), flush=True)


def by_tiles(images, size):
    keep, cand.MAX_SHRINK = cand.MAX_SHRINK, 0
    try:
        return cand.fit_all(images, size)
    finally:
        cand.MAX_SHRINK = keep


# (height, width, what it stands for): the copy at 512, 640, 768 and 1024 (4:3), a camera's 2 MP and 12 MP photos
SHAPES = ((512, 683, "copy 512"), (640, 853, "copy 640"), (768, 1024, "copy 768"), (1024, 1365, "copy 1024"),
          (1200, 1600, "2 MP"), (3000, 4000, "12 MP"))
for h, w, name in SHAPES:
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    timed(name, "augment", "main", lambda: resize.augmented(images, 512))
    timed(name, "augment", "cand", lambda: cand.augmented(images, 512))
    if h > 512:
        timed(name, "fit", "main", lambda: resize.fit_all(images, 512))
        timed(name, "fit", "cand by tiles", lambda: by_tiles(images, 512))
    if h > 1500:  # past MAX_SHRINK at 224: both through their crop kernels
        timed(name, "fit 224", "main", lambda: resize.fit_all(images, 224))
        timed(name, "fit 224", "cand", lambda: cand.fit_all(images, 224))

for copy in sorted(Path("/tmp/xdg/gpu-starvation").glob("resized-*px-*")):
    files = sorted(p for p in copy.rglob("*.jpg"))[:64]
    data = [read_file(str(f)) for f in files]
    mp = sum(m.shape[-1] * m.shape[-2] for m in decode_jpeg(data[:8], mode=ImageReadMode.RGB)) / 8 * len(data) / 1e6
    stream = torch.cuda.Stream(priority=-1)
    with torch.cuda.stream(stream):
        timed(f"{copy.name.split('-')[1]} copy, {len(data)} files, {mp:.1f} MP", "decode", "torchvision",
              lambda: decode_jpeg(data, mode=ImageReadMode.RGB, device=dev))
