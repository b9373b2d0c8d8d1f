"""--augment's crops alone, on a batch of 64 random images at each copy's size: the host's time a call (launches only),
the whole call's with the device synchronized, crop_box's 64 draws, and the device's kernels a call (torch's
profiler). usage: python .device49/probe_aug.py"""
import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize

sys.path.insert(0, ".device49")
import resize_old  # noqa: E402  (before the change)

dev, n = torch.device("cuda"), 20
for short in (512, 768, 1024):  # a batch of the copy's size (4:3 photos); the crops' cost does not hang on content
    images = [torch.randint(0, 256, (3, short, short * 4 // 3), dtype=torch.uint8, device=dev) for _ in range(64)]
    for what, call in (("augment", lambda: resize.augmented(images, 512)),
                       ("augment-old", lambda: resize_old.augmented(images, 512)),
                       ("fit", lambda: resize.fit_all(images, 512))):
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        resize.crop_boxes([tuple(m.shape[-2:]) for m in images])
        box_ms = (time.perf_counter() - t0) * 1e3
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
        kernels = sorted(((e.key[:60], round(getattr(e, "device_time_total", 0) / n / 1e3, 3), e.count // n)
                          for e in prof.key_averages()), key=lambda k: -k[1])
        print(json.dumps(dict(short=short, what=what, host_ms=round(host, 2), total_ms=round(total, 2),
                              crop_box_ms=round(box_ms, 2), kernels_ms=kernels[:8],
                              kernels_sum_ms=round(sum(k[1] for k in kernels), 3))), flush=True)
