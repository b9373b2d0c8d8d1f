"""The wallpapers' cost to the workers: each JPEG decoded as a worker decodes it (decoders.decode to 512, one
thread, the median of 3), then a batch's sum over every batch of 64 read in order: the files --gpu-decode's
routing gives the workers with 67 slots (16 workers x 4 queued + 3) and with 35 (2 queued), against every file
(the CPU path). usage: python probe.py FOLDER (the 264-file set: each of the 24 JPEGs 11 times, as 1-NAME ...)"""
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, ".")
from starvation import decoders, photos  # noqa: E402

torch.set_num_threads(1)
p = photos.Photos(Path(sys.argv[1]), False, False)
ms = {}  # (class folder, file name without its copy's prefix): ms
for f, h in zip(p.files, p.survey.headers):
    if f.name.startswith("1-"):
        took = []
        for _ in range(3):
            t0 = time.perf_counter()
            decoders.decode(f, 512)
            took.append((time.perf_counter() - t0) * 1e3)
        ms[f.parent.name, f.name[2:]] = statistics.median(took)
        print(f"{f.parent.name:14s} {h.kind:16s} {h.width}x{h.height} {h.pixels / 1e6:5.1f} MP "
              f"{f.stat().st_size / 1e6:5.2f} MB {ms[f.parent.name, f.name[2:]]:6.1f} ms", flush=True)


def cost(indices):
    return sum(ms[p.files[i].parent.name, p.files[i].name.split("-", 1)[1]] for i in indices)


n = len(p.files)
batches = [[(s + j) % n for j in range(64)] for s in range(0, n, math.gcd(n, 64))]
for slots in (67, 35):
    r = p.routing(64, 0, slots, sequential=True)
    per = [cost(r.split(b)[0]) for b in batches]
    print(f"{slots} slots ({r.slot_bytes / 1e6:.1f} MB): the workers' files cost {statistics.mean(per):.0f} ms a "
          f"batch on one thread (median {statistics.median(per):.0f}, most {max(per):.0f})")
per = [cost(b) for b in batches]
print(f"the CPU path: {statistics.mean(per):.0f} ms a batch on one thread (median {statistics.median(per):.0f}, "
      f"most {max(per):.0f})")
