"""The GPU path's resize (starvation/resize.py): its weights are torch's, the kernel computes with them what
torch would (run by Triton's interpreter on the CPU), and a batch of mixed sizes is fitted image by image."""
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from starvation import resize
from conftest import ROOT


def photo_like(k: int, h: int, w: int, seed: int = 0) -> torch.Tensor:
    """k uint8 images (3, h, w) smooth enough that a resize's sums fall between levels, as a photo's do."""
    noise = torch.randint(0, 256, (k, 3, h, w), generator=torch.Generator().manual_seed(seed)).float()
    return F.avg_pool2d(noise, 5, 1, 2).round().to(torch.uint8)


def by_taps(images: torch.Tensor, size: int) -> torch.Tensor:
    """What the kernel computes, in torch: each output pixel the taps' weighted sum, rounded half up."""
    h2, w2, top, left = resize.scaled(*images.shape[-2:], size)
    rows, row_w = resize.taps(images.shape[-2], h2, top, size, images.device)
    cols, col_w = resize.taps(images.shape[-1], w2, left, size, images.device)
    r = rows[:, None].long() + torch.arange(row_w.shape[1])
    c = cols[:, None].long() + torch.arange(col_w.shape[1])
    x = (images.float()[..., r, :] * row_w[..., None]).sum(-2)  # (k, 3, size, w)
    x = (x[..., c] * col_w).sum(-1)
    return (x + 0.5).floor().clamp(0, 255).to(torch.uint8)


@pytest.mark.parametrize("h,w", [(96, 128), (128, 96), (75, 113), (48, 48), (30, 20), (400, 300), (530, 1100)])
def test_the_taps_are_torchs_resize_and_crop(h, w):
    images = photo_like(2, h, w)
    # on a CUDA device torchvision resizes a uint8 batch in float32 and rounds: the path the kernel replaces
    expected = resize.fit(images.float(), 48).round().clamp(0, 255).to(torch.uint8)
    got = by_taps(images, 48)
    differ = (got.int() - expected.int()).abs()
    # one level apart where a sum falls halfway (common where a side halves): rounded up, torch rounds to even
    assert got.shape == (2, 3, 48, 48) and differ.max() <= 1 and (differ > 0).float().mean() < 0.01


def test_a_batch_of_mixed_sizes_is_fitted_image_by_image():
    images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate([(96, 128), (48, 48), (128, 96), (96, 128)])]
    batch = resize.fit_all(images, 48, kernel=False)
    assert torch.equal(batch, torch.stack([resize.fit(image, 48) for image in images]))


KERNEL_CHECK = """
import torch
from starvation import resize
from test_resize import by_taps, photo_like
sizes = [(96, 128), (48, 48), (128, 96), (96, 128), (30, 20)]
images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate(sizes)]
batch = resize.fit_all(images, 48, kernel=True)
for image, got in zip(images, batch):
    expected = image if image.shape[-1] == 48 else by_taps(image[None], 48)[0]
    assert (got.int() - expected.int()).abs().max() <= 1, image.shape
    assert (got != expected).float().mean() < 1e-3, image.shape
print("kernel ok")
"""


def test_the_kernel_computes_what_its_taps_say():
    pytest.importorskip("triton")
    # the interpreter is chosen when the kernel is defined: in a process of its own, set before the import
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    p = subprocess.run([sys.executable, "-c", KERNEL_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "kernel ok" in p.stdout, p.stderr[-3000:]
