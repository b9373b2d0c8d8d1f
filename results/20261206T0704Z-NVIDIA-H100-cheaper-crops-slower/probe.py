"""The resize before (main's starvation.resize, f0c5e57's) against the candidate's (candidate.py), alone, on
batches of 64 random images: each call's time on the calling thread, with the device synchronized, and the
device's time a call (torch's profiler), for --augment's crops and for the fit. Then the crops' draws alone:
crop_box 64 times against crop_boxes once.
usage: python probe.py"""
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize as before

sys.path.insert(0, str(Path(__file__).parent))
from candidate import resize  # noqa: E402

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


# (height, width, what it stands for): the copy at 1024 (4:3), a camera's 2 MP and 12 MP photos
SHAPES = ((1024, 1365, "copy 1024"), (1200, 1600, "2 MP"), (3000, 4000, "12 MP"))
for h, w, name in SHAPES:
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    mixed = images[:32] + [m.transpose(1, 2).contiguous() for m in images[32:]]  # half of them portrait
    timed(name, "augment", "before", lambda: before.augmented(images, 512))
    timed(name, "augment", "candidate", lambda: resize.augmented(images, 512))
    timed(name + ", half portrait", "augment", "before", lambda: before.augmented(mixed, 512))
    timed(name + ", half portrait", "augment", "candidate", lambda: resize.augmented(mixed, 512))
    if h > 512:
        timed(name, "fit", "before", lambda: before.fit_all(images, 512))
        timed(name, "fit", "candidate", lambda: resize.fit_all(images, 512))
    if h > 1500:  # runs past MAX_RUN at 224: both tiled
        timed(name, "fit 224", "before", lambda: before.fit_all(images, 224))
        timed(name, "fit 224", "candidate", lambda: resize.fit_all(images, 224))

shapes = [(1024, 1365)] * 64
for code, draw in (("crop_box x 64", lambda: [resize.crop_box(*s) for s in shapes]),
                   ("crop_boxes", lambda: resize.crop_boxes(shapes))):
    t0 = time.perf_counter()
    for _ in range(50):
        draw()
    print(json.dumps(dict(what="draws", code=code, host_ms=round((time.perf_counter() - t0) / 50 * 1e3, 3))))
