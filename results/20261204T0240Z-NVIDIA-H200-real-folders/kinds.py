"""Each kind of JPEG file (2 MP, camera-like noise) decoded by torchvision's batched CUDA decoder, 64 at a
time, and on the CPU, one thread: which kinds the GPU's batched path takes at its own rate.
usage: python3 kinds.py OUT.json"""
import io, json, sys, time
sys.path[:0] = [".", "tools"]
import numpy as np, torch
from PIL import Image
from torchvision.io import decode_jpeg, ImageReadMode
from photo_sets import scene
from starvation import photos
from starvation.folder import read_header

rng = np.random.default_rng(0)
base = [Image.fromarray(scene(1600, 1200, rng)) for _ in range(8)]
kinds = {"baseline 4:2:0": dict(subsampling=2), "baseline 4:4:4": dict(subsampling=0),
         "baseline 4:2:2": dict(subsampling=1), "grey": dict(subsampling=2, grey=True),
         "progressive": dict(subsampling=2, progressive=True)}
out = {}
for name, o in kinds.items():
    files = []
    for im in base:
        buf = io.BytesIO()
        (im.convert("L") if o.get("grey") else im).save(buf, "JPEG", quality=90, subsampling=o["subsampling"],
                                                        progressive=o.get("progressive", False))
        files.append(buf.getvalue())
    kind = read_header(files[0], "x.jpg", photos.MAX_PIXELS).kind
    enc = [torch.frombuffer(bytearray(files[k % 8]), dtype=torch.uint8) for k in range(64)]
    decode_jpeg(enc, mode=ImageReadMode.RGB, device="cuda"); torch.cuda.synchronize()
    t = []
    for _ in range(5):
        t0 = time.perf_counter(); decode_jpeg(enc, mode=ImageReadMode.RGB, device="cuda"); torch.cuda.synchronize()
        t.append(time.perf_counter() - t0)
    gpu = 64 / sorted(t)[2]
    torch.set_num_threads(1)
    c = []
    from pathlib import Path
    p = Path(f"/tmp/kind.jpg"); p.write_bytes(files[0])
    for _ in range(5):
        t0 = time.perf_counter(); photos.decode(p, 512); c.append(time.perf_counter() - t0)
    out[name] = dict(kind=kind, kb=round(len(files[0]) / 1e3), gpu_images_per_s=round(gpu), cpu_ms=round(sorted(c)[2] * 1e3, 1))
    print(name, out[name], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
