"""
nvjpeg's batched decode, called directly (ctypes), for its YUV output: each JPEG's own planes, Y at full size
and Cb and Cr at their subsampled size, which the GPU's hardware JPEG engines write with no kernel on the SMs.
torchvision asks nvjpeg for RGB, which nvjpeg then makes with a colour-conversion kernel over every decoded
pixel, beside the step. Here the planes are fitted or cut first and the colours converted at the training
size (resize.from_planes). The library is the one torchvision ships and loads (libnvjpeg).
"""
import ctypes
import glob
import time
from pathlib import Path
from typing import NamedTuple

import torch

YUV = 1                 # nvjpegOutputFormat_t
DEFAULT, HARDWARE = 0, 3  # nvjpegBackend_t: the hardware engines where the GPU has them (A100, H100, H200)


class _Image(ctypes.Structure):  # nvjpegImage_t
    _fields_ = [("channel", ctypes.c_void_p * 4), ("pitch", ctypes.c_size_t * 4)]


class Planes(NamedTuple):
    """A batch's planes: every plane in one buffer, and each image's (offset, height, width) for Y, Cb and Cr
    (a grey file's Cb and Cr are one pixel of no colour, at the buffer's end)."""
    flat: torch.Tensor
    planes: list[list[tuple[int, int, int]]]


def library() -> str:
    """The path of libnvjpeg: the copy this process has loaded (torchvision's), else the one torchvision ships,
    or the nvidia-nvjpeg wheel's."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libnvjpeg" in line:
                return line.split()[-1]
    import torchvision
    site = Path(torchvision.__file__).parent.parent
    found = sorted(glob.glob(str(site / "torchvision.libs" / "libnvjpeg*.so*"))) + \
        sorted(glob.glob(str(site / "nvidia" / "**" / "libnvjpeg.so*"), recursive=True))
    if not found:
        raise OSError("no libnvjpeg beside torchvision (its CUDA builds ship one)")
    return found[0]


class YuvDecoder:
    """decode(list of 1-D uint8 tensors, device) -> Planes, decoded on the current stream. A status other than
    success raises RuntimeError, which decoders.decode_batch answers with torchvision's decoder. Each batch's
    start and the wall and CPU seconds of its nvjpeg calls go to `calls`: the decoding thread's record sets
    them against the thread's whole time a batch."""

    def __init__(self):
        self.lib, self.handle, self.states = None, ctypes.c_void_p(), {}
        self.calls: list[tuple[float, float, float]] = []

    def check(self, status: int, what: str) -> None:
        if status:
            raise RuntimeError(f"nvjpeg: {what} failed (status {status})")

    def start(self) -> None:
        self.lib = ctypes.CDLL(library())
        # the hardware engines where the GPU has them, else nvjpeg's CUDA decoder
        if self.lib.nvjpegCreateEx(HARDWARE, None, None, 0, ctypes.byref(self.handle)):
            self.check(self.lib.nvjpegCreateEx(DEFAULT, None, None, 0, ctypes.byref(self.handle)), "start")

    def __call__(self, encoded: list[torch.Tensor], device: torch.device) -> Planes:
        with torch.cuda.device(device):  # (the handle is made on, and decodes to, this device)
            if self.lib is None:
                self.start()
            n = len(encoded)
            shapes, kinds = [], {}
            for i, data in enumerate(encoded):
                components, subsampling = ctypes.c_int(), ctypes.c_int()
                widths, heights = (ctypes.c_int * 4)(), (ctypes.c_int * 4)()
                self.check(self.lib.nvjpegGetImageInfo(self.handle, ctypes.c_void_p(data.data_ptr()),
                                                       ctypes.c_size_t(data.numel()),
                                                       ctypes.byref(components), ctypes.byref(subsampling), widths,
                                                       heights), "reading a header")
                if components.value not in (1, 3):
                    raise RuntimeError(f"nvjpeg: {components.value} components")
                shapes.append([(heights[c], widths[c]) for c in range(components.value)])
                kinds.setdefault(subsampling.value, []).append(i)
            total = sum(h * w for planes in shapes for h, w in planes)
            flat = torch.empty(total + 1, dtype=torch.uint8, device=device)
            flat[total] = 128
            images, planes, offset = (_Image * n)(), [], 0
            for i, mine in enumerate(shapes):
                laid = []
                for c, (h, w) in enumerate(mine):
                    images[i].channel[c], images[i].pitch[c] = flat.data_ptr() + offset, w
                    laid.append((offset, h, w))
                    offset += h * w
                planes.append(laid if len(laid) == 3 else laid + [(total, 1, 1)] * 2)
            stream = ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
            t0, cpu0 = time.perf_counter(), time.thread_time()
            # one batched call for each kind of file (its subsampling, or grey): on an H100 the engines decoded
            # a batch of one kind faster than torchvision's RGB, and one that mixed kinds at half its rate. Each
            # kind has a state of its own, so that no call reuses buffers a call before it may still read
            for subsampling, group in kinds.items():
                if subsampling not in self.states:
                    self.states[subsampling] = ctypes.c_void_p()
                    self.check(self.lib.nvjpegJpegStateCreate(self.handle, ctypes.byref(self.states[subsampling])),
                               "its state")
                state, k = self.states[subsampling], len(group)
                self.check(self.lib.nvjpegDecodeBatchedInitialize(self.handle, state, k, 1, YUV), "starting a batch")
                self.check(self.lib.nvjpegDecodeBatched(
                    self.handle, state, (ctypes.c_void_p * k)(*[encoded[i].data_ptr() for i in group]),
                    (ctypes.c_size_t * k)(*[encoded[i].numel() for i in group]),
                    (_Image * k)(*[images[i] for i in group]), stream), "decoding a batch")
            self.calls.append((t0, time.perf_counter() - t0, time.thread_time() - cpu0))
        return Planes(flat, planes)
