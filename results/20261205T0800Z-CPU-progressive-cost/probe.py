"""Progressive against baseline files of the camera-like set, one thread, 64 of each: PIL's whole decode, PIL
with draft to what 512 needs (libjpeg's DCT scaling), and decoders.decode (the workers' path, to 512); the
median ms a file, twice. usage: python probe.py DIR (made by tools/photo_sets.py camera DIR)"""
import io, statistics, sys, time
from pathlib import Path
import torch
from PIL import Image
sys.path.insert(0, ".")
from starvation.decoders import decode
from starvation.folder import find_photos, read_checked
torch.set_num_threads(1)
files = [f for f in find_photos(Path(sys.argv[1]))[0] if f.suffix == ".jpg"]
def kind(f):
    with Image.open(f) as im:
        return "progressive" if im.info.get("progressive") or im.info.get("progression") else "baseline"
groups = {}
for f in files:
    groups.setdefault(kind(f), []).append(f)
def timed(fn, fs):
    out = []
    for f in fs:
        t0 = time.perf_counter(); fn(f); out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)
def whole(f):
    with Image.open(f) as im:
        im.convert("RGB")
def draft(f):
    with Image.open(f) as im:
        s = 512 / min(im.size); im.draft("RGB", (int(im.size[0] * s + 1), int(im.size[1] * s + 1))); im.convert("RGB")
for k, fs in sorted(groups.items()):
    fs = fs[:64]
    for _ in range(2):
        print(f"{k}: {len(fs)} files, PIL whole {timed(whole, fs):.1f} ms, PIL draft {timed(draft, fs):.1f} ms, "
              f"decoders.decode to 512 {timed(lambda f: decode(f, 512), fs):.1f} ms")
