"""nvjpeg's batched decode called directly (ctypes), in each output format, against torchvision's call.

torchvision asks nvjpeg for planar RGB, and each batch of the copy then ran nvjpeg's `rgba2rgb` kernel on the
SMs, beside the step. The question: does another output format (YUV planes, interleaved RGB, Y alone) leave
the SMs free, and at what rate does each decode a batch alone? For each set and format: the median ms a batch
(device synchronized around each call), and the GPU kernels a batch under torch.profiler, by name.
usage: python3 probe.py   (on a GPU; prints its lines)
"""
import ctypes
import io
import statistics
import time
from collections import defaultdict

import numpy as np
import torch
from PIL import Image
from torchvision.io import decode_jpeg

FORMATS = {"YUV": 1, "Y": 2, "RGB": 3, "RGBI": 5}  # nvjpegOutputFormat_t
HARDWARE, DEFAULT = 3, 0  # nvjpegBackend_t


class NvImage(ctypes.Structure):  # nvjpegImage_t
    _fields_ = [("channel", ctypes.c_void_p * 4), ("pitch", ctypes.c_size_t * 4)]


def photos(n: int, w: int, h: int, subsampling: int, seed: int) -> list[bytes]:
    """n JPEGs (q90) of smooth colour fields with sensor-like noise, about 2 bits a pixel."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        field = rng.integers(0, 256, (h // 48 + 2, w // 48 + 2, 3), dtype=np.uint8)
        a = np.asarray(Image.fromarray(field).resize((w, h), Image.BICUBIC), dtype=np.int16)
        a = (a + rng.integers(-10, 11, a.shape)).clip(0, 255).astype(np.uint8)
        b = io.BytesIO()
        Image.fromarray(a).save(b, "JPEG", quality=90, subsampling=subsampling)
        out.append(b.getvalue())
    return out


class Nvjpeg:
    def __init__(self):
        decode_jpeg([torch.frombuffer(photos(1, 64, 64, 2, 0)[0], dtype=torch.uint8)], device="cuda")  # loads it
        path = next(line.split()[-1] for line in open("/proc/self/maps") if "libnvjpeg" in line)
        self.lib, self.handle, self.state = ctypes.CDLL(path), ctypes.c_void_p(), ctypes.c_void_p()
        status = self.lib.nvjpegCreateEx(HARDWARE, None, None, 0, ctypes.byref(self.handle))
        self.backend = "hardware"
        if status:
            self.backend = f"default (hardware: status {status})"
            self.check(self.lib.nvjpegCreateEx(DEFAULT, None, None, 0, ctypes.byref(self.handle)), "create")
        self.check(self.lib.nvjpegJpegStateCreate(self.handle, ctypes.byref(self.state)), "state")
        print(f"libnvjpeg: {path}, backend {self.backend}", flush=True)

    @staticmethod
    def check(status: int, what: str) -> None:
        if status:
            raise RuntimeError(f"nvjpeg {what}: status {status}")

    def decode(self, data: list[bytes], fmt: str) -> list[list[torch.Tensor]]:
        n, code = len(data), FORMATS[fmt]
        self.check(self.lib.nvjpegDecodeBatchedInitialize(self.handle, self.state, n, 1, code), "initialize")
        images, planes = (NvImage * n)(), []
        for i, d in enumerate(data):
            comps, sub = ctypes.c_int(), ctypes.c_int()
            ws, hs = (ctypes.c_int * 4)(), (ctypes.c_int * 4)()
            self.check(self.lib.nvjpegGetImageInfo(self.handle, d, len(d), ctypes.byref(comps), ctypes.byref(sub),
                                                   ws, hs), "info")
            if fmt == "RGB":
                shapes = [(hs[0], ws[0])] * 3
            elif fmt == "RGBI":
                shapes = [(hs[0], ws[0] * 3)]
            elif fmt == "Y":
                shapes = [(hs[0], ws[0])]
            else:
                shapes = [(hs[c], ws[c]) for c in range(comps.value)]
            mine = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in shapes]
            for c, t in enumerate(mine):
                images[i].channel[c], images[i].pitch[c] = t.data_ptr(), t.shape[1]
            planes.append(mine)
        ptrs = (ctypes.c_char_p * n)(*data)
        lengths = (ctypes.c_size_t * n)(*[len(d) for d in data])
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.check(self.lib.nvjpegDecodeBatched(self.handle, self.state, ptrs, lengths, images, stream), "decode")
        return planes


def timed(call, reps: int = 20) -> float:
    for _ in range(3):
        call()
    ms = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), min(ms), max(ms)


def kernels(call, reps: int = 5) -> dict[str, float]:
    """GPU kernels' ms a call, by name (memcpys left out)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    by = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower() \
                and "memset" not in e.name.lower():
            by[e.name[:60]] += e.device_time / 1e3 / reps
    return dict(sorted(by.items(), key=lambda kv: -kv[1]))


def yuv_to_rgb(y: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """JFIF's full-range BT.601, the chroma planes repeated up to Y's size."""
    up = lambda p: torch.nn.functional.interpolate(p[None, None].float(), size=y.shape, mode="nearest")[0, 0] - 128
    y, u, v = y.float(), up(u), up(v)
    rgb = torch.stack([y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u])
    return rgb.round().clamp(0, 255).to(torch.uint8)


def main() -> None:
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    nv = Nvjpeg()
    sets = {"copy at 1024 (1365x1024, 4:2:0)": (1365, 1024, 2), "copy at 512 (683x512, 4:2:0)": (683, 512, 2),
            "2 MP (1600x1200, 4:2:0)": (1600, 1200, 2), "2 MP (1600x1200, 4:4:4)": (1600, 1200, 0)}
    for name, (w, h, sub) in sets.items():
        data = photos(64, w, h, sub, seed=1)
        tensors = [torch.frombuffer(d, dtype=torch.uint8) for d in data]
        print(f"\n== {name}: 64 files, {sum(map(len, data)) / 64 / 1e3:.0f} kB mean, "
              f"{sum(map(len, data)) * 8 / 64 / (w * h):.2f} bits a pixel", flush=True)
        ref = decode_jpeg(tensors, device="cuda")
        mine = nv.decode(data, "RGB")
        same = all(torch.equal(torch.stack(p), r) for p, r in zip(mine, ref))
        yuv = nv.decode(data, "YUV")
        diff = torch.cat([(yuv_to_rgb(*p).int() - r.int()).abs().flatten() for p, r in zip(yuv[:8], ref[:8])])
        print(f"ctypes RGB equals torchvision's: {same}; YUV planes {[tuple(t.shape) for t in yuv[0]]}; "
              f"YUV made RGB here against torchvision's: max {diff.max().item()}, mean {diff.float().mean():.3f} "
              f"levels", flush=True)
        calls = {"torchvision": lambda: decode_jpeg(tensors, device="cuda")}
        calls.update({fmt: (lambda f=fmt: nv.decode(data, f)) for fmt in FORMATS})
        for label, call in calls.items():
            try:
                med, lo, hi = timed(call)
                k = kernels(call)
            except RuntimeError as e:
                print(f"{label:12s} failed: {e}", flush=True)
                continue
            top = ", ".join(f"{n} {ms:.3f}" for n, ms in list(k.items())[:4])
            print(f"{label:12s} {med:7.2f} ms a batch (min {lo:.2f}, max {hi:.2f}), {64e3 / med:6.0f} images/s; "
                  f"kernels {sum(k.values()):.3f} ms a batch: {top}", flush=True)


if __name__ == "__main__":
    main()
