"""How far --baseline-copy's files are from the originals: each progressive file of a folder written again by
cache.baseline_one (PIL, quality="keep": its own quantization tables and subsampling), both decoded by
torchvision's CPU decoder; the mean and largest absolute difference a pixel, in levels of 255, the copy's size
against the original's, and the time to make one (one thread).
usage: python3 fidelity.py FOLDER   (from the repository root; prints its lines)
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from starvation import cache, photos  # noqa: E402
from starvation.decoders import decode_whole, read_jpeg  # noqa: E402

torch.set_num_threads(1)
p = photos.Photos(Path(sys.argv[1]), False, False)
means, largest, sizes, took = [], [], [], []
with tempfile.TemporaryDirectory() as into:
    for f in p.progressive():
        t0 = time.perf_counter()
        name, n = cache.baseline_one((f, p.folder, Path(into), p.max_pixels))
        took.append(time.perf_counter() - t0)
        twin = Path(into) / name
        diff = (decode_whole(read_jpeg(f, p.max_pixels), f).int() - decode_whole(read_jpeg(twin, p.max_pixels), twin).int()).abs()
        means.append(diff.float().mean().item())
        largest.append(diff.max().item())
        sizes.append(n / f.stat().st_size)
print(f"{len(means)} progressive files: mean difference a pixel {statistics.median(means):.3f} levels (median of "
      f"files; {min(means):.3f}-{max(means):.3f}), largest on any pixel {max(largest)} (median of files "
      f"{statistics.median(largest):.0f}); the copy {statistics.median(sizes):.2f} times the original's bytes "
      f"(median); made in {statistics.median(took) * 1e3:.0f} ms a file (median, decode check included)")
