"""A worker's write of a --gpu-decode batch into a preallocated slot (as the pool's workers do), one thread:
the median over the folder's first 10 batches, three passes (the files in the page cache)."""
import sys, time, statistics
sys.path.insert(0, ".")
from pathlib import Path
import torch
torch.set_num_threads(1)
from starvation.photos import Photos, EncodedDataset
p = Photos(Path(sys.argv[1]), made=False, skip_bad=False)
r = p.routing(64, 0, 16, False)
ds = EncodedDataset(512, p, r)
packed = torch.empty(r.slot_bytes, dtype=torch.uint8); lengths = torch.empty(64, dtype=torch.int64)
decoded = ds.empty(r.decoded_rows)
times, device_only = [], []
for rep in range(3):
    for b in range(10):
        idx = list(range(b * 64, b * 64 + 64))
        t0 = time.perf_counter(); ds.write(packed, lengths, decoded, idx); times.append(time.perf_counter() - t0)
        mine, dev = ds.split(idx)
        if not mine: device_only.append(times[-1])
print(f"write a batch: median {1e3*statistics.median(times):.0f} ms ({1e3*min(times):.0f}-{1e3*max(times):.0f}); "
      f"batches of device files only: median {1e3*statistics.median(device_only):.0f} ms")
