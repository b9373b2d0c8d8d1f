"""Make N photos of W x H (q90) from the sample photos: a random crop scaled up to the size, with
sensor-like noise so that a file holds about what a camera's does. usage: mkphotos.py OUT N W H NOISE [START STEP]"""
import sys
from pathlib import Path
import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_image, encode_jpeg, read_file

out, n, w, h, noise = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
start, step = (int(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else (0, 1)
out.mkdir(parents=True, exist_ok=True)
samples = sorted(Path(__file__).parent.joinpath("samples").iterdir())
photos = [decode_image(read_file(str(p)), mode=ImageReadMode.RGB) for p in samples]
for k in range(start, n, step):
    g = torch.Generator().manual_seed(k)
    im = photos[k % len(photos)]
    _, ih, iw = im.shape
    ch, cw = int(ih * 0.8), int(iw * 0.8)
    y = int(torch.randint(0, ih - ch + 1, (1,), generator=g)); x = int(torch.randint(0, iw - cw + 1, (1,), generator=g))
    crop = TF.resize(im[:, y:y + ch, x:x + cw], [h, w], antialias=True).float()
    if k % 5 == 4:  # some portrait
        crop = crop.transpose(1, 2)
    crop = (crop + noise * torch.randn(crop.shape, generator=g)).clamp(0, 255).to(torch.uint8)
    (out / f"{k:04d}.jpg").write_bytes(encode_jpeg(crop.contiguous(), quality=90).numpy().tobytes())
