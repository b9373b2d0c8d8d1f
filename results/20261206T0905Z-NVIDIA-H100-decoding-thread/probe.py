"""Main's crop kernel (before) against the three-channel one (the resize at $RESIZE, swap.py's), alone, on
batches of 64 random images: each call's time with the device synchronized, the device's time a call (torch's
profiler), and whether the two cut the same pixels from the same draws. The three-channel kernel with 8 and
with 16 output rows a program. (The lease ran this while main held the three-channel kernel: its log calls
that one "main".)
usage: RESIZE=/tmp/resize_channels.py python probe.py"""
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize

sys.path.insert(0, str(Path(__file__).parent))
from swap import resize_from_file  # noqa: E402

before, channels, dev, n = resize, resize_from_file(), torch.device("cuda"), 20


def timed(name: str, code: str, call) -> None:
    for _ in range(3):  # (compiles, and the taps' cache)
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    torch.cuda.synchronize()
    total = (time.perf_counter() - t0) / n * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            call()
        torch.cuda.synchronize()
    kernels = {e.key[:30]: round(getattr(e, "device_time_total", 0) / n / 1e3, 3) for e in prof.key_averages()}
    print(json.dumps(dict(shape=name, code=code, total_ms=round(total, 2), crop_kernel_ms=kernels.get("_crop_kernel"),
                          device_ms=round(sum(kernels.values()), 3))), flush=True)


# (height, width): the copy at 1024 (4:3), a camera's 2 MP and 12 MP photos
for h, w, name in ((1024, 1365, "copy 1024"), (683, 512, "copy 512, portrait"), (1200, 1600, "2 MP"),
                   (3000, 4000, "12 MP")):
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    torch.manual_seed(0)
    a = before.augmented(images, 512)
    torch.manual_seed(0)
    b = channels.augmented(images, 512)
    print(json.dumps(dict(shape=name, pixels_apart=int((a != b).sum()), most_apart=int((a.int() - b.int()).abs().max()))))
    timed(name, "before", lambda: before.augmented(images, 512))
    for r in (8, 16):
        channels.crop_kernel.__defaults__ = (r,)
        timed(name, f"three channels, {r} rows", lambda: channels.augmented(images, 512))
    channels.crop_kernel.__defaults__ = (8,)
