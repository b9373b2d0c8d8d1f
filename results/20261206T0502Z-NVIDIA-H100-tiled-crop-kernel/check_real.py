"""The landed crop kernel on five real files of a camera-like set (tools/photo_sets.py camera /tmp/cam --files 40),
in Triton's interpreter: its crops to 24 against torchvision's resized_crop, its fits against torchvision's resize.
usage: TRITON_INTERPRET=1 PYTHONPATH=. python check_real.py (from the repository root)"""
import time

import torch
from pathlib import Path
from torchvision.io import decode_image, ImageReadMode

from starvation import resize

files = sorted(p for p in Path("/tmp/cam").rglob("*") if p.is_file())
picked = [f for f in files if f.suffix.lower() in (".jpg", ".jpeg", ".png")][::8][:5]
images = [decode_image(str(f), mode=ImageReadMode.RGB) for f in picked]
for size in (24,):
    torch.manual_seed(1); crops = [resize.crop_box(*m.shape[-2:]) for m in images]
    torch.manual_seed(1); t0 = time.time(); batch = resize.augmented(images, size, kernel=True)
    for f, m, c, got in zip(picked, images, crops, batch):
        d = (got.float() - resize.cut(m.float(), c, size).round().clamp(0, 255)).abs()
        print(f.name, tuple(m.shape), resize.in_pixels(*m.shape[-2:], c), "max", d.max().item(), "share", round((d > 0).float().mean().item(), 4))
    print("augmented", round(time.time() - t0, 1), "s")
    t0 = time.time(); fitted = resize.fit_all(images, size, kernel=True); fit = torch.stack([resize.fit(m, size) for m in images])
    d = (fitted.int() - fit.int()).abs(); print("fit vs torchvision: max", d.max().item(), "share", round((d > 0).float().mean().item(), 4), round(time.time() - t0, 1), "s")
