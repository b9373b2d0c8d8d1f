"""Where --gpu-decoder nvjpeg's time goes on the camera-like folder without the copy: in part 1 it made 11.03
steps/s against torchvision's 32.43, its step 88 ms (median) while its loop waited for data 5% of the window.

Alone, on batches of 64 of the folder's files that the device decodes (baseline JPEG), by kind and mixed as a
run draws them: whether nvjpeg's hardware backend takes each kind in a batch (nvjpegDecodeBatchedSupported, 0:
yes), the median ms a batch (device synchronized around each of 5 calls) of decode_batch (the decode, the fit to
512 and, for the planes, the colours) with each decoder, and of each decoder's call alone; then the GPU kernels
of a mixed batch under torch.profiler.
usage: python3 probe2.py DIR [mixed]   (on a GPU, from the repository root; prints its lines; mixed: the mixed
batches only, without the kernels, and torchvision's decoder called once a kind of file too: part 5, after
YuvDecoder took each kind in a call of its own)
"""
import ctypes
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from PIL import Image, JpegImagePlugin
from torch.profiler import ProfilerActivity, profile
from torchvision.io import ImageReadMode, decode_jpeg

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from starvation.decoders import decode_batch, planes_decoder  # noqa: E402
from starvation.nvjpeg import YuvDecoder  # noqa: E402

SAMPLING = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}


def kind(path: Path) -> str | None:
    """The file's kind, or None where the workers would decode it (progressive, not JPEG)."""
    with Image.open(path) as im:
        if im.format != "JPEG" or im.info.get("progressive") or im.info.get("progression"):
            return None
        if im.mode == "L":
            return "grey"
        big = " 8 MP+" if im.width * im.height >= 8e6 else ""
        return SAMPLING.get(JpegImagePlugin.get_sampling(im), "other") + big


def ms(fn, calls: int = 5) -> float:
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def supported(yuv: YuvDecoder, data: torch.Tensor) -> int:
    """nvjpegDecodeBatchedSupported for one file: 0 where the hardware backend takes it in a batch."""
    stream, answer = ctypes.c_void_p(), ctypes.c_int(-1)
    yuv.lib.nvjpegJpegStreamCreate(yuv.handle, ctypes.byref(stream))
    yuv.lib.nvjpegJpegStreamParseHeader(yuv.handle, ctypes.c_void_p(data.data_ptr()), ctypes.c_size_t(data.numel()),
                                        stream)
    yuv.lib.nvjpegDecodeBatchedSupported(yuv.handle, stream, ctypes.byref(answer))
    yuv.lib.nvjpegJpegStreamDestroy(stream)
    return answer.value


def top_kernels(fn, n: int = 6) -> str:
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    rows = sorted((e for e in p.key_averages() if e.device_type.name == "CUDA"),
                  key=lambda e: -e.self_device_time_total)
    total = sum(e.self_device_time_total for e in rows) / 3e3
    return f"{total:.2f} ms of kernels a batch: " + "; ".join(
        f"{e.key[:60]} {e.self_device_time_total / 3e3:.2f}" for e in rows[:n])


def main(folder: str, mixed: bool = False) -> None:
    device = torch.device("cuda")
    files = {}
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and (k := kind(path)):
            files.setdefault(k, []).append(torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8))
    print(torch.cuda.get_device_name(), torch.__version__, {k: len(v) for k, v in files.items()}, flush=True)
    yuv = YuvDecoder()
    decode_jpeg([files["4:2:0"][0]], device=device)  # (loads torchvision's libnvjpeg, which YuvDecoder opens)
    yuv(files["4:2:0"][:1], device)
    planes = planes_decoder()
    every = [d for v in files.values() for d in v]
    kind_of = {id(d): k.split()[0] for k, v in files.items() for d in v}  # (8 MP or more: no kind of its own)

    def by_kind(batch):  # torchvision's decoder, one call a kind of file, as YuvDecoder now calls nvjpeg
        groups = {}
        for d in batch:
            groups.setdefault(kind_of[id(d)], []).append(d)
        return [decode_jpeg(g, mode=ImageReadMode.RGB, device=device) for g in groups.values()]
    batches = {} if mixed else {k: (v * 64)[:64] for k, v in files.items()}
    rng = random.Random(0)
    for i in range(3):
        batches[f"mixed {i + 1}"] = rng.sample(every, 64)
    for name, batch in batches.items():
        ok = sorted({supported(yuv, d) for d in batch})
        line = f"{name:14} hardware batch takes it: {ok}; "
        try:
            line += (f"decode_batch torchvision {ms(lambda: decode_batch(batch, 512, device)):.1f} ms, "
                     f"planes {ms(lambda: decode_batch(batch, 512, device, planes)):.1f}; alone: decode_jpeg "
                     f"{ms(lambda: decode_jpeg(batch, mode=ImageReadMode.RGB, device=device)):.1f}, "
                     f"YuvDecoder {ms(lambda: yuv(batch, device)):.1f}")
            if mixed:
                line += f", decode_jpeg a call a kind {ms(lambda: by_kind(batch)):.1f}"
                # (each image where it belongs: the planes' path against torchvision's, as the GPU test asks)
                differ = (decode_batch(batch, 512, device, planes)[0].int() - decode_batch(batch, 512, device)[0].int())
                line += f"; planes against torchvision's RGB: mean {differ.abs().float().mean():.2f} levels"
        except RuntimeError as e:
            line += f"failed: {str(e).splitlines()[0]}"
        print(line, flush=True)
    if not mixed:
        batch = batches["mixed 1"]
        print("kernels, torchvision:", top_kernels(lambda: decode_batch(batch, 512, device)), flush=True)
        print("kernels, planes:", top_kernels(lambda: decode_batch(batch, 512, device, planes)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["mixed"])
