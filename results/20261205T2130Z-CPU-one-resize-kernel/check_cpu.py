"""main's kernels against the candidate's, in Triton's interpreter on the CPU: the same images, the same crops
(one seed each), each output's largest difference in levels and the share of its pixels that differ. First
8 smooth random images, then the photos given, decoded by torchvision on the CPU and fitted to 64.
usage: TRITON_INTERPRET=1 PYTHONPATH=. python RUN_FOLDER/check_cpu.py [PHOTO ...] (from the repository root,
after run.sh has made /tmp/cand)"""
import sys
from pathlib import Path

import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file

from starvation import resize

sys.path[:0] = [str(Path(__file__).parent), "tests"]
from cand import resize as cand  # noqa: E402
from test_resize import photo_like  # noqa: E402

# sizes from a few pixels to 22 times the output's, strips among them, one already at the output's size
sizes = [(96, 128), (128, 96), (75, 113), (300, 200), (41, 300), (200, 37), (530, 700), (64, 64)]
images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate(sizes)]
for size in (24, 48):
    for image, a, b in zip(images, resize.fit_all(images, size, kernel=True), cand.fit_all(images, size, kernel=True)):
        d = (a.int() - b.int()).abs()
        bound = " (main: torchvision's resize, past MAX_SHRINK)" if min(image.shape[-2:]) > resize.MAX_SHRINK * size else ""
        print(f"fit {tuple(image.shape[-2:])} to {size}: differ by at most {d.max().item()}, "
              f"{(d > 0).float().mean().item():.2%} of pixels{bound}")
    for seed in range(3):
        torch.manual_seed(seed)
        a = resize.augmented(images, size, kernel=True)
        torch.manual_seed(seed)
        b = cand.augmented(images, size, kernel=True)
        d = (a.int() - b.int()).abs()
        print(f"crops to {size}, seed {seed}: 8 images, differ by at most {d.max().item()}, "
              f"{(d > 0).float().mean().item():.2%} of pixels")

photos = [decode_jpeg(read_file(f), mode=ImageReadMode.RGB) for f in sys.argv[1:]]
for f, image, a, b in zip(sys.argv[1:], photos, resize.fit_all(photos, 64, kernel=True),
                          cand.fit_all(photos, 64, kernel=True)):
    d = (a.int() - b.int()).abs()
    bound = " (main: torchvision's resize, past MAX_SHRINK)" if min(image.shape[-2:]) > resize.MAX_SHRINK * 64 else ""
    print(f"fit {Path(f).name} {tuple(image.shape[-2:])} to 64: differ by at most {d.max().item()}, "
          f"{(d > 0).float().mean().item():.2%} of pixels{bound}")
# (the photos' crops are left out: main's crop kernel, loops of a loaded count, ran in the interpreter over 20 minutes
# on them without finishing)
