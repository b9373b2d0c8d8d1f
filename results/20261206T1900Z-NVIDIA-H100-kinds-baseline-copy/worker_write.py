"""What a pool worker spends on a --gpu-decode batch of the camera-like set, with and without --baseline-copy:
EncodedDataset.write of the folder's first 10 batches of 64 into a slot, as a worker writes them (the files
the routing gives the workers decoded, the rest read, checked and packed), one thread, in two alternating pairs
(the first pass reads the files from disk, the later ones from the page cache).
usage: XDG_CACHE_HOME=DIR python3 worker_write.py FOLDER   (from the repository root; prints its lines)
"""
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from starvation import cache, photos  # noqa: E402

torch.set_num_threads(1)
for with_copy in (False, True, False, True):
    p = photos.Photos(Path(sys.argv[1]), False, False)
    if with_copy:
        p.read_baseline(*cache.baseline_copy(p.folder, p.progressive(), p.max_pixels, 2))
    routing = p.routing(64, 0, 11, True)
    dataset = photos.EncodedDataset(512, p, routing)
    packed, lengths = torch.empty(routing.slot_bytes, dtype=torch.uint8), torch.empty(64, dtype=torch.int64)
    decoded = dataset.empty(routing.decoded_rows)
    times = []
    for b in range(10):
        t0 = time.perf_counter()
        dataset.write(packed, lengths, decoded, list(range(b * 64, b * 64 + 64)))
        times.append(time.perf_counter() - t0)
    print(f"--baseline-copy {'on ' if with_copy else 'off'}: the workers decode {sum(routing.workers)} files of "
          f"the folder; a batch {statistics.median(times) * 1e3:.0f} ms median ({min(times) * 1e3:.0f}-"
          f"{max(times) * 1e3:.0f})", flush=True)
