"""The GPU path's resize (starvation/resize.py): its weights are torch's, the kernels compute with them what
torch would (run by Triton's interpreter on the CPU), a batch of mixed sizes is fitted image by image, a shrink
past the fit kernel's bound by the crop kernel, and --augment's crops are cut as torchvision cuts them."""
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


def crop_sums(image: torch.Tensor, crop: tuple, size: int) -> torch.Tensor:
    """crop_taps' weighted sums for one image and its crop (crop_boxes'), in torch, before rounding: float
    (3, size, size), flipped if the crop says so."""
    top, left, ch, cw = resize.in_pixels(*image.shape[-2:], crop)
    t = 64  # (at least any run these tests make: 2 x (crop / size) + 2)
    rows, row_w = resize.crop_taps(torch.tensor([top]), torch.tensor([ch]), torch.tensor([t]), size, t)
    cols, col_w = resize.crop_taps(torch.tensor([left]), torch.tensor([cw]), torch.tensor([t]), size, t)
    r = (rows[0][:, None].long() + torch.arange(t)).clamp(max=image.shape[-2] - 1)  # (past the edge: weight 0)
    c = (cols[0][:, None].long() + torch.arange(t)).clamp(max=image.shape[-1] - 1)
    x = (image.float()[:, r, :] * row_w[0][..., None]).sum(-2)
    x = (x[..., c] * col_w[0]).sum(-1)
    return x.flip(-1) if crop[4] else x


@pytest.mark.parametrize("h,w", [(768, 1024), (1024, 683), (100, 1000), (1000, 100), (5, 7)])
def test_the_crops_are_drawn_as_torchvisions_random_resized_crop_draws_them(h, w):
    # the same rule in Python's arithmetic: 4000 draws each way agree in their means and the fallback's share
    # (an image ten times as wide as high falls back to the centre on most draws)
    import torchvision.transforms as T
    torch.manual_seed(0)
    ours = torch.tensor([c[:4] for c in resize.crop_boxes([(h, w)] * 4000)], dtype=torch.float64)
    flips = sum(c[4] for c in resize.crop_boxes([(h, w)] * 4000))
    whole = torch.empty(1, 1, 1).expand(3, h, w)
    theirs = torch.tensor([(t / h, l / w, ch / h, cw / w) for t, l, ch, cw in (
        T.RandomResizedCrop.get_params(whole, list(resize.SCALE), list(resize.RATIO)) for _ in range(4000))],
        dtype=torch.float64)
    for got in (ours, theirs):
        assert (got[:, 2:] > 0).all() and (got[:, :2] + got[:, 2:] <= 1 + 1e-9).all()
    assert torch.allclose(ours.mean(0), theirs.mean(0), atol=0.02), (ours.mean(0), theirs.mean(0))
    area = lambda c: c[:, 2] * c[:, 3]
    assert abs(area(ours).std() - area(theirs).std()) < 0.02
    centred = lambda c: ((c[:, 0] - (1 - c[:, 2]) / 2).abs() < 1 / h).double().mean()
    assert abs(centred(ours) - centred(theirs)) < 0.05
    assert 1800 < flips < 2200


@pytest.mark.parametrize("h,w", [(96, 128), (75, 113), (30, 20), (400, 300), (530, 1100)])
def test_the_crop_taps_are_torchs_resized_crop(h, w):
    image = photo_like(1, h, w, seed=h)[0]
    torch.manual_seed(h)
    for _ in range(8):  # crops from a few pixels (enlarged) to the whole image (shrunk up to 23 times)
        crop = resize.crop_boxes([(h, w)])[0]
        # on a CUDA device torchvision resizes uint8 in float32 (then rounds): the path the crop kernel replaces
        expected = resize.cut(image.float(), crop, 48)
        assert torch.allclose(crop_sums(image, crop, 48), expected, atol=2e-3), resize.in_pixels(h, w, crop)


CROP_KERNEL_CHECK = """
import torch
from starvation import resize
from test_resize import by_taps, crop_sums, photo_like
sizes = [(48, 64), (30, 20), (64, 48), (40, 40)]
images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate(sizes)]
torch.manual_seed(3)
crops = resize.crop_boxes([tuple(m.shape[-2:]) for m in images])
torch.manual_seed(3)
batch = resize.augmented(images, 24, kernel=True)
assert any(c[4] for c in crops) and not all(c[4] for c in crops), crops  # flipped and not
for image, crop, got in zip(images, crops, batch):
    expected = (crop_sums(image, crop, 24) + 0.5).floor().clamp(0, 255)  # rounded half up, as the kernel rounds
    differ = (got.float() - expected).abs()
    # (where a sum falls halfway, the kernel's order of additions may put it on the other side)
    assert differ.max() <= 1 and (differ > 0).float().mean() < 0.02, (image.shape, crop)
# a fit shrunk past the fit kernel's bound (MAX_SHRINK): the crop kernel's, with the fit's taps
images = photo_like(2, 24 * resize.MAX_SHRINK + 8, 200, seed=9)
differ = (resize.fit_all(list(images), 24, kernel=True).int() - by_taps(images, 24).int()).abs()
assert differ.max() <= 1 and (differ > 0).float().mean() < 1e-3
print("crop kernel ok")
"""


def test_the_crop_kernel_cuts_a_batch_of_mixed_sizes_in_one_launch_and_fits_the_largest_shrinks():
    # (Triton 3.6's interpreter cannot loop a loaded count of times; its compiled kernel can: the GPU test)
    pytest.importorskip("triton", minversion="3.8")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    p = subprocess.run([sys.executable, "-c", CROP_KERNEL_CHECK], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and "crop kernel ok" in p.stdout, p.stderr[-3000:]


@pytest.mark.skipif(not torch.cuda.is_available() or resize.triton is None, reason="the compiled kernels need a GPU")
def test_the_kernels_compile_on_a_gpu_and_cut_what_their_taps_say():
    # shrunk about as much as a photo is to 512 (the fit kernel, its taps unrolled), and the last past
    # resize.MAX_SHRINK (the crop kernel fits it, looping over the same taps)
    sizes = [(300, 400), (400, 300), (30, 20), (600, 800), (1000, 1300)]
    images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate(sizes)]
    fitted = resize.fit_all([m.cuda() for m in images], 128).cpu()
    for image, got in zip(images, fitted):
        assert (got.int() - by_taps(image[None], 128)[0].int()).abs().max() <= 1, image.shape
    torch.manual_seed(5)
    crops = resize.crop_boxes([tuple(m.shape[-2:]) for m in images])
    torch.manual_seed(5)
    cut = resize.augmented([m.cuda() for m in images], 128).cpu()
    for image, crop, got in zip(images, crops, cut):
        differ = (got.float() - (crop_sums(image, crop, 128) + 0.5).floor().clamp(0, 255)).abs()
        assert differ.max() <= 1 and (differ > 0).float().mean() < 0.02, (image.shape, crop)


def to_planes(images: list[torch.Tensor], subsample: int) -> tuple[torch.Tensor, list]:
    """RGB images as a JPEG holds them, for resize.from_planes: Y, and Cb and Cr averaged over subsample x
    subsample pixels (JFIF's full-range BT.601), every plane in one buffer; a grey image (1, h, w) as its Y and
    one pixel of no colour, as the decoder lays it out."""
    chunks, planes, offset = [], [], 0
    for m in images:
        if m.shape[0] == 1:
            mine = [m[0]]
        else:
            r, g, b = m.float()
            y = 0.299 * r + 0.587 * g + 0.114 * b
            cb, cr = 128 + (b - y) / 1.772, 128 + (r - y) / 1.402
            mine = [y] + [F.avg_pool2d(c[None], subsample, ceil_mode=True)[0] for c in (cb, cr)]
        layout = []
        for p in mine:
            chunks.append(p.round().clamp(0, 255).to(torch.uint8).reshape(-1))
            layout.append((offset, *p.shape))
            offset += p.numel()
        planes.append(layout)
    chunks.append(torch.tensor([128], dtype=torch.uint8))
    planes = [p if len(p) == 3 else p + [(offset, 1, 1)] * 2 for p in planes]
    return torch.cat(chunks), planes


def fit_planes_in_torch(flat: torch.Tensor, planes: list, size: int) -> torch.Tensor:
    """fit() of each plane, as torchvision resizes it, in float (each chroma plane to the size Y is resized to,
    then the same centre crop), then converted to RGB, rounded half up: (k, 3, size, size)."""
    out = []
    for (oy, h, w), *chroma in planes:
        h2, w2, top, left = resize.scaled(h, w, size)
        fitted = [F.interpolate(flat[o:o + ph * pw].view(1, 1, ph, pw).float(), size=(h2, w2), mode="bilinear",
                                antialias=True, align_corners=False)[0, 0, top:top + size, left:left + size]
                  for o, ph, pw in [(oy, h, w), *chroma]]
        y, cb, cr = fitted[0], fitted[1] - 128, fitted[2] - 128
        rgb = torch.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb])
        out.append((rgb + 0.5).floor().clamp(0, 255).to(torch.uint8))
    return torch.stack(out)


PLANES_CHECK = """
import torch
from starvation import resize
from test_resize import fit_planes_in_torch, photo_like, to_planes
sizes = [(48, 64), (30, 20), (64, 48), (24, 24), (31, 21)]
images = [photo_like(1, h, w, seed=k)[0] for k, (h, w) in enumerate(sizes)]
images.append(images[0][:1])  # a grey one
# 4:4:4: cut and fitted as the RGB images are, but for the rounding of the colours, converted after, not before
flat, planes = to_planes(images, 1)
for augment in (False, True):
    torch.manual_seed(4)
    rgb = [m.expand(3, -1, -1).contiguous() for m in images]
    expected = resize.augmented(rgb, 24, kernel=True) if augment else resize.fit_all(rgb, 24, kernel=True)
    torch.manual_seed(4)
    got = resize.from_planes(flat, planes, 24, augment)
    differ = (got.int() - expected.int()).abs()
    assert differ.max() <= 3 and differ.float().mean() < 0.6, (augment, differ.max(), differ.float().mean())
    assert torch.equal(got[-1][0], got[-1][1]) and torch.equal(got[-1][0], got[-1][2])  # grey stays grey
# 4:2:0: each plane fitted at its own scale (of even sides, whose chroma is exactly half)
flat, planes = to_planes(images[:4], 2)
differ = (resize.from_planes(flat, planes, 24).int() - fit_planes_in_torch(flat, planes, 24).int()).abs()
# (Cb and Cr are rounded before they are converted)
assert differ.max() <= 2 and differ.float().mean() < 0.5, (differ.max(), differ.float().mean())
print("planes ok")
"""


def test_a_batch_of_jpeg_planes_is_cut_and_made_rgb_as_its_rgb_images_are():
    # (JPEG's Y, Cb and Cr, as nvjpeg's YUV output lays them out, in 4:4:4 and 4:2:0, and a grey file's Y alone)
    pytest.importorskip("triton", minversion="3.8")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    p = subprocess.run([sys.executable, "-c", PLANES_CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "planes ok" in p.stdout, p.stderr[-3000:]
