"""The resized copies' decode alone, no step: for each copy under the cache, batches of 64 decoded by
decode_batch (torchvision's batched decoder) and fitted, or cropped with --augment's kernel, for about 4 s
each; batches/s and megapixels/s decoded. usage: python .device49/probe_copy.py [SECONDS]"""
import json
import sys
import time
from pathlib import Path

import torch
from torchvision.io import decode_jpeg

from starvation.cache import cache_root
from starvation.decoders import decode_batch

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
device = torch.device("cuda")
for copy in sorted(cache_root().glob("resized-*px-*")):
    if ".making-" in copy.name:
        continue
    files = sorted(p for p in copy.rglob("*.jpg"))
    data = [torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8) for p in files]
    batches = [data[i:i + 64] for i in range(0, len(data) - 63, 64)]
    for what in ("decode", "fit", "augment"):
        n = mp = 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            b = batches[n % len(batches)]
            if what == "decode":
                images = decode_jpeg(b, device=device)
            else:
                _, images = decode_batch(b, 512, device, None, what == "augment")
            mp += sum(m.shape[-1] * m.shape[-2] for m in images) / 1e6
            n += 1
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(json.dumps(dict(copy=copy.name, what=what, files=len(files), batches=n,
                              batches_per_s=round(n / dt, 2), mp_per_s=round(mp / dt), mp_a_batch=round(mp / n, 1))),
              flush=True)
