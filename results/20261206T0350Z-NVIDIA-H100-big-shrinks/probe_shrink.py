"""A fit shrunk past resize.MAX_SHRINK, alone, before and after: torchvision's resize (resize.py as main had it
before, the file OLD) against the crop kernel with the fit's taps (this tree's), on batches of 64 random images.
For each: the first call (with its compile), a call's time with the device synchronized, the device's time a
call (torch's profiler), and how far apart the two outputs are.
usage: python probe_shrink.py OLD (from the repository root)"""
import importlib.util
import json
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize

spec = importlib.util.spec_from_file_location("resize_old", sys.argv[1])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

dev, n = torch.device("cuda"), 10
# (height, width, size, what it stands for): within the bound (the fit kernel on both sides), then past it
SHAPES = ((1200, 1600, 224, "2 MP to 224"), (3000, 4000, 224, "12 MP to 224"), (3456, 4608, 512, "16 MP to 512"),
          (6000, 8000, 512, "48 MP to 512"))
for h, w, size, name in SHAPES:
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    outs = {}
    for code, module in (("before", old), ("after", resize)):
        call = lambda: module.fit_all(images, size)  # noqa: E731
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        outs[code] = call()
        torch.cuda.synchronize()
        first = (time.perf_counter() - t0) * 1e3
        for _ in range(2):
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
        # (each event's own device time: an op's total holds its kernels' again)
        kernels = sorted(((e.key[:40], round(getattr(e, "self_device_time_total", 0) / n / 1e3, 3))
                          for e in prof.key_averages()), key=lambda k: -k[1])
        print(json.dumps(dict(shape=name, code=code, first_ms=round(first, 1), host_ms=round(host, 2),
                              total_ms=round(total, 2), device_ms=round(sum(k[1] for k in kernels), 3),
                              kernels=kernels[:3])), flush=True)
    differ = (outs["before"].int() - outs["after"].int()).abs()
    print(json.dumps(dict(shape=name, max_level_apart=int(differ.max()),
                          share_apart=round(float((differ > 0).float().mean()), 4))), flush=True)
    images = outs = None
    torch.cuda.empty_cache()
