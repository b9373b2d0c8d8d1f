"""main's resize kernels against the candidate's, alone, on batches of 64 random images: each call's time with the
device synchronized, and the device's kernels a call (torch's profiler), for the fit (no --augment) and the crops.
usage: python probe_kernels.py (after run.sh has made /tmp/cand)"""
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize

sys.path.insert(0, str(Path(__file__).parent))
from cand import resize as cand  # noqa: E402

dev, n = torch.device("cuda"), 20
# (height, width, what it stands for): the copy at 512, 768 and 1024 (4:3), a camera's 2 MP and 12 MP photos
SHAPES = ((512, 683, "copy 512"), (768, 1024, "copy 768"), (1024, 1365, "copy 1024"), (1200, 1600, "2 MP"),
          (3000, 4000, "12 MP"))
for h, w, name in SHAPES:
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    calls = [("fit", "main", lambda: resize.fit_all(images, 512)), ("fit", "cand", lambda: cand.fit_all(images, 512)),
             ("augment", "main", lambda: resize.augmented(images, 512)),
             ("augment", "cand", lambda: cand.augmented(images, 512))]
    if h > 1500:  # a photo to 224: shrunk past main's bound (MAX_SHRINK), which torchvision's resize then fits
        calls += [("fit 224", "main", lambda: resize.fit_all(images, 224)),
                  ("fit 224", "cand", lambda: cand.fit_all(images, 224))]
    for what, code, call in calls:
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
                              kernel_ms=kernels[0], device_ms=round(sum(k[1] for k in kernels), 3))), flush=True)
