"""The crops in one pass (the code before: main's resize with two-pass.patch taken back, at $RESIZE) against
two passes (main), alone, on batches of 64 random images: each call's time with the device synchronized, the
device's time of the crop kernels a call (torch's profiler), and whether the two cut the same pixels from the
same draws; then two passes with other tiles (rows by columns a program), the same for both passes.
usage: RESIZE=/tmp/resize_before.py python probe.py"""
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from starvation import resize

sys.path.insert(0, str(Path(__file__).parent.parent / "20261206T0905Z-NVIDIA-H100-decoding-thread"))
from swap import resize_from_file  # noqa: E402

before, dev, n = resize_from_file(), torch.device("cuda"), 20


def tiles(r: int, block: int):
    """main's crop_kernel with r rows by block columns a program."""
    def crop_kernel(src, dst, offsets, heights, widths, lefts, spans, runs_h, runs_w, rows, row_w, cols, col_w,
                    t, mid_width, size):
        k = dst.shape[0]
        mid = torch.empty((k * 3, size, mid_width), dtype=torch.uint16, device=dst.device)
        with resize.launching_on(dst.device):
            resize._crop_down_kernel[(k * 3, resize.triton.cdiv(size, r), resize.triton.cdiv(mid_width, block))](
                src, mid, offsets, heights, widths, lefts, spans, runs_h, rows, row_w, t, mid_width,
                SIZE=size, R=r, BLOCK=block)
            resize._crop_across_kernel[(k * 3, resize.triton.cdiv(size, r), resize.triton.cdiv(size, block))](
                mid, dst, lefts, spans, runs_w, cols, col_w, t, mid_width, SIZE=size, R=r, BLOCK=block)
    return crop_kernel


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
    kernels = {e.key: getattr(e, "device_time_total", 0) / n / 1e3 for e in prof.key_averages()}
    crops = sum(v for k, v in kernels.items() if k.startswith("_crop"))
    print(json.dumps(dict(shape=name, code=code, total_ms=round(total, 2), crop_kernels_ms=round(crops, 3),
                          device_ms=round(sum(kernels.values()), 3))), flush=True)


for h, w, name in ((1024, 1365, "copy 1024"), (768, 1024, "copy 768"), (683, 512, "copy 512, portrait"),
                   (1200, 1600, "2 MP"), (3000, 4000, "12 MP")):
    images = [torch.randint(0, 256, (3, h, w), dtype=torch.uint8, device=dev) for _ in range(64)]
    images = [torch.nn.functional.avg_pool2d(m[None].float(), 5, 1, 2)[0].round().to(torch.uint8) for m in images]
    torch.manual_seed(0)
    a = before.augmented(images, 512)
    torch.manual_seed(0)
    b = resize.augmented(images, 512)
    differ = (a.int() - b.int()).abs()
    print(json.dumps(dict(shape=name, pixels_apart=round(float((differ > 0).float().mean()), 6),
                          most_apart=int(differ.max()))), flush=True)
    timed(name, "one pass", lambda: before.augmented(images, 512))
    timed(name, "two passes", lambda: resize.augmented(images, 512))
    main = resize.crop_kernel
    for r, block in ((16, 128), (4, 256), (32, 64)):
        resize.crop_kernel = tiles(r, block)
        timed(name, f"two passes, {r} x {block}", lambda: resize.augmented(images, 512))
    resize.crop_kernel = main
    del images, a, b
