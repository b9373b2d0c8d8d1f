"""Per-image CPU cost of the worker's decode + fit, one thread: torchvision (today) against PIL's resize with a
box (resize-then-crop computed for the crop only) and PIL's draft (DCT-domain downscale) where a photo is >= 2x.
usage: bench.py FOLDER [N]"""
import io, statistics, sys, time
from pathlib import Path
import torch
from PIL import Image
torch.set_num_threads(1)
from starvation import photos, resize

files = sorted(Path(sys.argv[1]).glob("*.jpg"))[: int(sys.argv[2]) if len(sys.argv) > 2 else 32]
datas = [f.read_bytes() for f in files]
S = 512

def tv(data):
    return resize.fit(photos.decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=photos.ImageReadMode.RGB), S)

def box_of(w, h):
    h2, w2, top, left = resize.scaled(h, w, S)
    sx, sy = w / w2, h / h2
    return (left * sx, top * sy, (left + S) * sx, (top + S) * sy)

def pil(data, draft=True):
    im = Image.open(io.BytesIO(data))
    w, h = im.size
    if draft:
        im.draft("RGB", (max(S, round(S * w / min(w, h))), max(S, round(S * h / min(w, h)))))  # keeps >= the target
    im = im.convert("RGB")
    dw, dh = im.size
    b = box_of(w, h)
    b = (b[0] * dw / w, b[1] * dh / h, b[2] * dw / w, b[3] * dh / h)
    out = im.resize((S, S), Image.BILINEAR, box=b)
    return torch.from_numpy(__import__("numpy").asarray(out)).permute(2, 0, 1).contiguous()

def tv_pilresize(data):
    t = photos.decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8), mode=photos.ImageReadMode.RGB)
    im = Image.fromarray(t.permute(1, 2, 0).numpy())
    h, w = t.shape[-2:]
    out = im.resize((S, S), Image.BILINEAR, box=box_of(w, h))
    return torch.from_numpy(__import__("numpy").asarray(out)).permute(2, 0, 1).contiguous()

def timed(fn):
    for d in datas[:3]:
        fn(d)
    ts = []
    for _ in range(2):
        for d in datas:
            t = time.perf_counter(); fn(d); ts.append(1e3 * (time.perf_counter() - t))
    return statistics.median(ts)

ref = [tv(d) for d in datas[:8]]
for name, fn in [("torchvision decode + fit (today)", tv), ("torchvision decode + PIL box resize", tv_pilresize),
                 ("PIL decode (draft) + box resize", pil), ("PIL decode, no draft, + box resize", lambda d: pil(d, False))]:
    out = [fn(d) for d in datas[:8]]
    diff = max((a.int() - b.int()).abs().float().mean().item() for a, b in zip(out, ref))
    print(f"{name}: {timed(fn):.2f} ms an image (worst mean |diff| from today's over 8: {diff:.2f} levels)", flush=True)
