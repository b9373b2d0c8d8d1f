"""
A decoded photo to the training size: its shorter side resized to --img-size (antialiased bilinear), then
the centre cropped. In the workers, torchvision's resize, one image at a time. On the GPU (--gpu-decode),
a batch at a time, one Triton kernel for each distinct size among its images: uint8 in and out, each output
pixel made from the few input pixels under it, with torch's own weights. With --augment, a random-resized
crop and a coin's flip instead, as ImageNet training makes them: in the workers torchvision's, one image at
a time; on the GPU two Triton kernels for the batch (down the columns, then across), each image read through
its own crop's weights. A batch decoded to JPEG's planes (--gpu-decoder nvjpeg: Y, Cb and Cr, the chroma
subsampled) goes through the same two kernels plane by plane, each at its own scale of the image's crop, and
a third converts its colours to RGB at the training size.

Why a kernel: the GPU's resize runs beside the step and shares its SMs. torchvision's on a CUDA uint8
batch is five passes over it (to float32, resize, round, to uint8, crop). Measured on the H200 for a batch
of 64 photos of 1024x768: 2.6 ms alone, and beside the compiled step (19.1 ms) it lengthened each step by
about 2 ms; the kernel, which reads the pixels under the crop and writes each output pixel once, takes
0.4 ms alone and lengthened the step by 0.3 ms. The crops have the same reason and one more: torchvision's
resized_crop is several launches for each image, all made by the decoding thread, which also feeds the
device's decoder; the crop kernels are two launches for the batch, their weights a few dozen more.
"""
import contextlib
import functools
import itertools
import math

import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF

try:
    import triton
    import triton.language as tl
except ImportError:  # torch's CPU builds may come without it: then the batch is fitted by torchvision's resize
    triton = None


def fit(image: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 (3, H, W), or a stack of them, -> (3, size, size): the shorter side resized to size, then the
    centre cropped."""
    if min(image.shape[-2:]) != size:  # (a photo of the resized cache has its shorter side at size already)
        image = TF.resize(image, size, antialias=True)
    if tuple(image.shape[-2:]) != (size, size):
        image = TF.center_crop(image, [size, size])
    return image.contiguous()


SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)  # --augment's crops: RandomResizedCrop's defaults, ImageNet's


TRIES = 10  # RandomResizedCrop.get_params' draws before it falls back to the centre


def crop_boxes(shapes: list[tuple[int, int]]) -> list[tuple[float, float, float, float, bool]]:
    """--augment: a random-resized crop of each h x w image (its area a SCALE of the image's, its sides in a
    RATIO), by RandomResizedCrop.get_params' rule, as fractions of the image (top, left, height, width), and
    whether to flip it left to right, a coin's throw. Fractions, so that a box chosen from a file's header can be
    cut from the image at whatever scale it was decoded.
    The batch's random numbers are one call of torch's generator (torch.manual_seed repeats them); the rule's
    arithmetic is Python's. The decoding thread draws a batch's crops beside busy workers, where get_params' dozen
    small tensor operations an image took milliseconds a batch, and torch's exp and sqrt of a CPU tensor up to 25
    ms a call."""
    draws = torch.rand(len(shapes), 4 * TRIES + 1, dtype=torch.float64).tolist()
    low, high = math.log(RATIO[0]), math.log(RATIO[1])
    boxes = []
    for (h, w), u in zip(shapes, draws):
        for t in range(0, 4 * TRIES, 4):
            area = h * w * (SCALE[0] + (SCALE[1] - SCALE[0]) * u[t])
            aspect = math.exp(low + (high - low) * u[t + 1])
            cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < cw <= w and 0 < ch <= h:
                top, left = int(u[t + 2] * (h - ch + 1)), int(u[t + 3] * (w - cw + 1))
                break
        else:  # get_params' fallback: the centre, its sides within RATIO
            ch, cw = min(h, round(w / RATIO[0])), min(w, round(h * RATIO[1]))
            top, left = (h - ch) // 2, (w - cw) // 2
        boxes.append((top / h, left / w, ch / h, cw / w, u[-1] < 0.5))
    return boxes


def in_pixels(h: int, w: int, crop: tuple[float, float, float, float, bool]) -> tuple[int, int, int, int]:
    """crop_boxes' crop of an h x w image in its pixels: top, left, height, width (at least one pixel)."""
    top, left = round(crop[0] * h), round(crop[1] * w)
    return top, left, max(1, min(h - top, round(crop[2] * h))), max(1, min(w - left, round(crop[3] * w)))


def cut(image: torch.Tensor, crop: tuple[float, float, float, float, bool], size: int) -> torch.Tensor:
    """uint8 (3, H, W) -> (3, size, size): the crop (crop_boxes') cut, resized to size, and flipped if it says so."""
    image = TF.resized_crop(image, *in_pixels(*image.shape[-2:], crop), [size, size], antialias=True)
    return (TF.horizontal_flip(image) if crop[4] else image).contiguous()


def scaled(h: int, w: int, size: int) -> tuple[int, int, int, int]:
    """fit()'s geometry for an h x w image: the resized height and width, and the crop's top and left."""
    short, long = (h, w) if h <= w else (w, h)
    long = int(size * long / short)  # torchvision's rule (_compute_resized_output_size)
    h2, w2 = (size, long) if h <= w else (long, size)
    return h2, w2, int(round((h2 - size) / 2.0)), int(round((w2 - size) / 2.0))  # center_crop's rounding


@functools.lru_cache(maxsize=64)
def taps(n_in: int, n_out: int, start: int, size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One axis of fit(): outputs start..start+size of resizing n_in pixels to n_out, each as a weighted sum of
    a run of `t` inputs. Returns the first input of each run ((size,) int32) and the weights ((size, t)
    float32, zero where a run is shorter). The weights are torch's own, read off by resizing the identity,
    512 of its rows at a time (a camera's long side would make it hundreds of MB at once)."""
    w = torch.empty((n_in, size), device=device)  # input i's weight in output j
    for r in range(0, n_in, 512):
        m = min(512, n_in - r)
        basis = torch.zeros((m, n_in), device=device)
        basis[torch.arange(m, device=device), torch.arange(r, r + m, device=device)] = 1.0
        w[r:r + m] = F.interpolate(basis.view(1, 1, m, n_in), size=(m, n_out), mode="bilinear", antialias=True,
                                   align_corners=False)[0, 0, :, start:start + size]
    w = w.t()
    used = w != 0
    first = used.int().argmax(1)
    last = n_in - 1 - used.flip(1).int().argmax(1)
    t = int((last - first).max()) + 1
    first = first.clamp(max=n_in - t)  # a run that would pass the edge starts earlier, its extra weights zero
    return first.int().contiguous(), w.gather(1, first[:, None].long() + torch.arange(t, device=device)).contiguous()


def launching_on(device: torch.device):
    """The context to launch a Triton kernel in: Triton launches on the thread's current device, on its current
    stream, so a CUDA device is made current; Triton's interpreter runs on the CPU and needs none."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


if triton is not None:
    @triton.jit
    def _fit_kernel(src, dst, h, w, rows, row_w, cols, col_w,
                    SIZE: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr, BLOCK: tl.constexpr):
        # one program: BLOCK pixels of output row i of one image's one channel (axis 0: image * 3 + channel)
        plane, i, jb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        j = jb * BLOCK + tl.arange(0, BLOCK)
        ok = j < SIZE
        first_col = tl.load(cols + j, mask=ok, other=0)
        first_row = tl.load(rows + i)
        source = src + plane.to(tl.int64) * h * w
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for t in tl.static_range(TH):
            line = tl.zeros([BLOCK], dtype=tl.float32)
            for u in tl.static_range(TW):
                x = tl.load(source + (first_row + t) * w + first_col + u, mask=ok, other=0)
                line += tl.load(col_w + j * TW + u, mask=ok, other=0.0) * x.to(tl.float32)
            acc += tl.load(row_w + i * TH + t) * line
        # rounded half up (torch.round rounds half to even: where a sum falls exactly halfway, as it often does
        # where a side halves, this pixel is one level above torchvision's)
        acc = tl.minimum(tl.maximum(acc + 0.5, 0.0), 255.0)
        tl.store(dst + plane.to(tl.int64) * SIZE * SIZE + i * SIZE + j, acc.to(tl.uint8), mask=ok)

    @triton.jit
    def _crop_down_kernel(src, mid, offsets, heights, widths, lefts, spans, runs_h, rows, row_w, T, MID_W,
                          SIZE: tl.constexpr, R: tl.constexpr, BLOCK: tl.constexpr, PER: tl.constexpr):
        # the crops' first pass: for R output rows and BLOCK of the columns under one plane's crop (axis 0: the
        # plane; PER planes share a row of the tables: an RGB image's 3 channels, or 1), each column's taps
        # summed down its rows. Two passes, because in one, each input row's sums across its taps must pass
        # between threads before they weigh the output rows; here neighbouring lanes read neighbouring bytes,
        # and no lane needs another's sum
        plane, ib, jb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        image = plane // PER
        h, w, span = tl.load(heights + image), tl.load(widths + image), tl.load(spans + image)
        i = ib * R + tl.arange(0, R)
        j = jb * BLOCK + tl.arange(0, BLOCK)
        i_ok, j_ok = i < SIZE, j < span
        tap = image.to(tl.int64) * SIZE + i
        first_row = tl.load(rows + tap, mask=i_ok, other=0)
        source = src + tl.load(offsets + image) + (plane % PER).to(tl.int64) * h * w + tl.load(lefts + image)
        acc = tl.zeros([R, BLOCK], dtype=tl.float32)
        for t in range(tl.where(jb * BLOCK < span, tl.load(runs_h + image), 0)):  # (none past the crop's side)
            row = first_row + t
            weight = tl.load(row_w + tap * T + t, mask=i_ok, other=0.0)
            x = tl.load(source + row[:, None] * w + j[None, :], mask=(i_ok & (row < h))[:, None] & j_ok[None, :],
                        other=0)
            acc += weight[:, None] * x.to(tl.float32)
        # kept in 1/256ths of a level in 16 bits: half float32's traffic, and the second pass's sums stay within
        # 1/500 of a level of float32's
        tl.store(mid + plane.to(tl.int64) * SIZE * MID_W + i[:, None] * MID_W + j[None, :],
                 (acc * 256.0 + 0.5).to(tl.uint16), mask=i_ok[:, None] & j_ok[None, :])

    @triton.jit
    def _crop_across_kernel(mid, dst, lefts, spans, runs_w, cols, col_w, T, MID_W,
                            SIZE: tl.constexpr, R: tl.constexpr, BLOCK: tl.constexpr, PER: tl.constexpr):
        # the second pass: R output rows by BLOCK output columns, each column's taps summed across the first
        # pass's sums, rounded half up (torch.round rounds half to even: where a sum falls exactly halfway, as it
        # often does where a side halves, this pixel is one level above torchvision's)
        plane, ib, jb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        image = plane // PER
        span = tl.load(spans + image)
        i = ib * R + tl.arange(0, R)
        j = jb * BLOCK + tl.arange(0, BLOCK)
        i_ok, j_ok = i < SIZE, j < SIZE
        tap = image.to(tl.int64) * SIZE + j
        first = tl.load(cols + tap, mask=j_ok, other=0) - tl.load(lefts + image)  # (a column of the first pass)
        source = mid + plane.to(tl.int64) * SIZE * MID_W + i[:, None] * MID_W
        acc = tl.zeros([R, BLOCK], dtype=tl.float32)
        for u in range(tl.load(runs_w + image)):
            at = first + u
            weight = tl.load(col_w + tap * T + u, mask=j_ok, other=0.0)
            x = tl.load(source + at[None, :], mask=i_ok[:, None] & (j_ok & (at < span))[None, :], other=0)
            acc += weight[None, :] * x.to(tl.float32)
        acc = tl.minimum(tl.maximum(acc * (1 / 256) + 0.5, 0.0), 255.0)
        tl.store(dst + plane.to(tl.int64) * SIZE * SIZE + i[:, None] * SIZE + j[None, :], acc.to(tl.uint8),
                 mask=i_ok[:, None] & j_ok[None, :])

    def crop_kernel(src, dst, offsets, heights, widths, lefts, spans, runs_h, runs_w, rows, row_w, cols, col_w,
                    t: int, mid_width: int, size: int, per: int = 3) -> None:
        """The crops over a batch, in two passes: dst (planes, size, size), the tables as cut_planes makes them, a
        row for each `per` planes (3: an RGB image's channels, which lie one after another from its offset), t
        weights a run; row i's columns read are lefts[i] to lefts[i] + spans[i], mid_width the most of any.
        Launched on dst's device (launching_on), on its current stream."""
        planes, r, block = dst.numel() // (size * size), 8, 128
        mid = torch.empty((planes, size, mid_width), dtype=torch.uint16, device=dst.device)
        with launching_on(dst.device):
            _crop_down_kernel[(planes, triton.cdiv(size, r), triton.cdiv(mid_width, block))](
                src, mid, offsets, heights, widths, lefts, spans, runs_h, rows, row_w, t, mid_width,
                SIZE=size, R=r, BLOCK=block, PER=per)
            _crop_across_kernel[(planes, triton.cdiv(size, r), triton.cdiv(size, block))](
                mid, dst, lefts, spans, runs_w, cols, col_w, t, mid_width, SIZE=size, R=r, BLOCK=block, PER=per)

    @triton.jit
    def _ycc_to_rgb_kernel(images, N, BLOCK: tl.constexpr):
        # BLOCK pixels of one image (axis 0): its Y, Cb and Cr made R, G and B in place, by JPEG's (JFIF's)
        # full-range BT.601, rounded half up
        image, b = tl.program_id(0), tl.program_id(1)
        p = b * BLOCK + tl.arange(0, BLOCK)
        ok = p < N
        at = images + image.to(tl.int64) * 3 * N + p
        y = tl.load(at, mask=ok, other=0).to(tl.float32) + 0.5
        cb = tl.load(at + N, mask=ok, other=128).to(tl.float32) - 128.0
        cr = tl.load(at + 2 * N, mask=ok, other=128).to(tl.float32) - 128.0
        tl.store(at, tl.minimum(tl.maximum(y + 1.402 * cr, 0.0), 255.0).to(tl.uint8), mask=ok)
        tl.store(at + N, tl.minimum(tl.maximum(y - 0.344136 * cb - 0.714136 * cr, 0.0), 255.0).to(tl.uint8),
                 mask=ok)
        tl.store(at + 2 * N, tl.minimum(tl.maximum(y + 1.772 * cb, 0.0), 255.0).to(tl.uint8), mask=ok)


# The fit kernel unrolls its taps (about 2 x shrink + 1 a side) and compiles a variant for each count, so its
# compile time grows with the square of the shrink. A group shrunk more than this (a 12 MP photo to 512 is
# shrunk 5.9 times, to 224 13 times) is fitted by the crop kernels instead, with the same weights: they loop
# over taps of any count, and compile once.
MAX_SHRINK = 6


def kernel_fits(device: torch.device) -> bool:
    """Whether fit_all and augmented use their kernels on this device (a CUDA device, and Triton at hand)."""
    return triton is not None and device.type == "cuda"


def fit_all(images: list[torch.Tensor], size: int, kernel: bool | None = None) -> torch.Tensor:
    """fit() over a batch of decoded images, (k, 3, size, size), on their device: one call for each distinct
    size among them (a folder of one camera's photos: one call for the batch). With the kernels (on a CUDA
    device by default), a pixel whose sum falls exactly halfway is one level above fit()'s: the kernels round
    half up, torch half to even."""
    device = images[0].device
    kernel = kernel_fits(device) if kernel is None else kernel
    out = torch.empty((len(images), 3, size, size), dtype=torch.uint8, device=device)
    alike: dict[tuple, list[int]] = {}
    for j, image in enumerate(images):
        alike.setdefault(tuple(image.shape), []).append(j)
    for (_, h, w), js in alike.items():
        group = torch.stack([images[j] for j in js])
        if (h, w) == (size, size):
            fitted = group
        elif not kernel:
            fitted = fit(group, size)
        else:
            fitted = out if len(js) == len(images) else torch.empty((len(js), 3, size, size), dtype=torch.uint8,
                                                                    device=device)
            fit_by_kernel(group, fitted, size)
        if fitted is not out:
            out[js] = fitted
    return out


def fit_by_kernel(group: torch.Tensor, out: torch.Tensor, size: int) -> None:
    """fit() of images of one size, (n, 3, h, w), written into out (n, 3, size, size), with torch's weights
    (taps): by the fit kernel, or past MAX_SHRINK by the crop kernel, each image given the same taps."""
    (n, _, h, w), device = group.shape, group.device
    h2, w2, top, left = scaled(h, w, size)
    rows, row_w = taps(h, h2, top, size, device)
    cols, col_w = taps(w, w2, left, size, device)
    if min(h, w) <= MAX_SHRINK * size:
        with launching_on(device):
            _fit_kernel[(n * 3, size, triton.cdiv(size, 128))](group, out, h, w, rows, row_w, cols, col_w, SIZE=size,
                                                               TH=row_w.shape[1], TW=col_w.shape[1], BLOCK=128)
        return
    # (the crop kernels' tables: one row an image, t weights a run; each image's columns all read)
    heights, widths, lefts, spans, runs_h, runs_w = (torch.full((n,), v, dtype=torch.int32, device=device)
                                                     for v in (h, w, 0, w, row_w.shape[1], col_w.shape[1]))
    t = max(row_w.shape[1], col_w.shape[1])
    row_w, col_w = (F.pad(x, (0, t - x.shape[1])).expand(n, size, t).contiguous() for x in (row_w, col_w))
    crop_kernel(group, out, torch.arange(n, device=device) * (3 * h * w), heights, widths, lefts, spans, runs_h,
                runs_w, rows.expand(n, size).contiguous(), row_w, cols.expand(n, size).contiguous(), col_w, t, w,
                size)


def crop_taps(start: torch.Tensor, length: torch.Tensor, run: torch.Tensor, size: int, t: int,
              low: torch.Tensor | None = None, high: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One axis of a batch's crops, each resized to size as torch's antialiased bilinear resize weighs it
    (Pillow's filter: a triangle one input pixel wide, stretched by the scale where the crop shrinks).
    start, length, run: (k,) tensors, each crop's first pixel and its side (fractional in a subsampled plane),
    and the most pixels an output pixel reads (at least 2 x length / size + 2). low, high: the pixels a run may
    read, by default the crop's own, as a crop cut before it is resized; a fit reads its whole image. Returns,
    for every output pixel, the first input pixel of its run ((k, size) int32) and the run's weights, t of them
    ((k, size, t) float32, zero past the run's end), computed for the whole batch at once on the tensors' device."""
    start = start.double()
    first_pixel = start.floor()  # (the sums below are kept relative to it: a whole crop's are then torch's own)
    offset, length, run = (start - first_pixel).float(), length.float(), run.float()
    low = torch.zeros_like(offset) if low is None else (low - first_pixel).float()
    high = ((start + length).ceil() if high is None else high) - first_pixel
    high = high.float()
    scale = (length / size)[:, None]                      # (k, 1)
    support = scale.clamp(min=1.0)
    center = offset[:, None] + scale * (torch.arange(size, device=length.device, dtype=torch.float32) + 0.5)
    lo = torch.maximum((center - support + 0.5).floor(), low[:, None])  # torch's own bounds of each run
    hi = torch.minimum((center + support + 0.5).floor(), high[:, None])
    first = torch.minimum(lo, torch.maximum(high - run, low)[:, None])  # a run near the end starts earlier: its
    at = first[..., None] + torch.arange(t, device=length.device)      # extra weights are zero
    w = (1 - ((at - center[..., None] + 0.5) / support[..., None]).abs()).clamp(min=0)
    w = torch.where((at >= lo[..., None]) & (at < hi[..., None]), w, 0.0)
    w = w / w.sum(-1, keepdim=True)
    return (first + first_pixel[:, None]).int(), w


def cut_planes(flat: torch.Tensor, out: torch.Tensor, boxes: list[tuple], size: int, per: int = 3,
               whole: bool = False) -> None:
    """Crops of images or planes that lie in one buffer, `flat`, each resized to size (and flipped where its box
    says) into out (planes, size, size), by the crop kernels. boxes: one (top, left, height, width, flip, h, w,
    offset) a row of the tables, in pixels of an h x w plane (fractional in a subsampled one), `per` planes of
    h x w from offset on (3: an RGB image's channels). whole: the runs may read the whole plane, as fit() resizes
    it before it crops; else only the crop, as cut() crops before it resizes."""
    # an output pixel reads a run of at most 2 x (crop / size) + 2 pixels of each axis: each crop's own runs,
    # and t, the longest of the batch's, which the taps are laid out by
    runs = [(math.ceil(2 * b[2] / size) + 2, math.ceil(2 * b[3] / size) + 2) for b in boxes]
    t = max(max(r) for r in runs)
    # the columns the first pass sums: the crop's, or a run's where the crop is narrower, within the image (a
    # fit's runs may start a run before the crop)
    lefts = [max(0, math.floor(b[1]) - (r[1] if whole else 0)) for b, r in zip(boxes, runs)]
    rights = [min(b[6], math.ceil(b[1] + b[3]) + r[1]) if whole else math.ceil(b[1] + b[3])
              for b, r in zip(boxes, runs)]
    spans = [min(max(right - left, r[1]), b[6] - left) for b, r, left, right in zip(boxes, runs, lefts, rights)]
    table = zip(*[(*b, *r, left, s) for b, r, left, s in zip(boxes, runs, lefts, spans)])  # a row a field
    y, x, ch, cw, flip, h, w, offsets, run_h, run_w, left, span = torch.tensor(
        list(table), dtype=torch.float64).to(out.device, non_blocking=True).unbind(0)
    bounds = lambda side: (torch.zeros_like(side), side) if whole else (None, None)
    rows, row_w = crop_taps(y, ch, run_h, size, t, *bounds(h))
    cols, col_w = crop_taps(x, cw, run_w, size, t, *bounds(w))
    flip = flip.bool()[:, None]  # a flip reads the columns' runs right to left
    cols, col_w = torch.where(flip, cols.flip(1), cols), torch.where(flip[..., None], col_w.flip(1), col_w)
    crop_kernel(flat, out, offsets.long(), h.int(), w.int(), left.int(), span.int(), run_h.int(), run_w.int(), rows,
                row_w, cols, col_w, t, max(spans), size, per)


def augmented(images: list[torch.Tensor], size: int, kernel: bool | None = None) -> torch.Tensor:
    """--augment over a batch of decoded images, on their device: each cut from a crop of its own (crop_boxes),
    resized and flipped as cut() does. With the kernels (on a CUDA device by default) the whole batch is two
    launches, its taps computed for every crop at once; else torchvision's resized_crop, one image at a time."""
    device = images[0].device
    crops = crop_boxes([tuple(m.shape[-2:]) for m in images])
    if not (kernel_fits(device) if kernel is None else kernel):
        return torch.stack([cut(m, c, size) for m, c in zip(images, crops)])
    # one buffer holds the batch, whatever the images' sizes: each image found by its offset
    offsets = itertools.accumulate((m.numel() for m in images[:-1]), initial=0)
    boxes = [(*in_pixels(*m.shape[-2:], crop), crop[4], *m.shape[-2:], o)
             for m, crop, o in zip(images, crops, offsets)]
    out = torch.empty((len(images), 3, size, size), dtype=torch.uint8, device=device)
    cut_planes(torch.cat([m.reshape(-1) for m in images]), out, boxes, size)
    return out


def from_planes(flat: torch.Tensor, planes: list[list[tuple[int, int, int]]], size: int,
                augment: bool = False) -> torch.Tensor:
    """A batch decoded to JPEG's own planes (Y, Cb, Cr: nvjpeg's YUV output, the chroma subsampled), all in one
    buffer, to uint8 RGB (k, 3, size, size). Each image's planes are fitted as fit() fits an image (with augment:
    cut from a crop of its own, flipped on a coin's throw, as cut() cuts one), the chroma through the same crop
    at its own scale; then the colours are converted at the training size, where there are fewer pixels than
    decoded. planes: each image's (offset, height, width) in flat for Y, Cb and Cr. By the kernels only (a CUDA
    device, or Triton's interpreter)."""
    boxes, crops = [], crop_boxes([image[0][1:] for image in planes]) if augment else None
    for k, image in enumerate(planes):
        _, h, w = image[0]
        if augment:
            crop = crops[k]
            (top, left, ch, cw), flip = in_pixels(h, w, crop), crop[4]
        else:  # fit()'s resize and centre crop, as a crop of the image before it is resized
            h2, w2, top, left = scaled(h, w, size)
            top, left, ch, cw, flip = top * h / h2, left * w / w2, size * h / h2, size * w / w2, False
        for offset, ph, pw in image:
            # a chroma sample stands for 2 (or 1) pixels of Y each way, whatever is left over at an odd edge
            sy, sx = 1 / round(h / ph), 1 / round(w / pw)
            boxes.append((top * sy, left * sx, ch * sy, cw * sx, flip, ph, pw, offset))
    out = torch.empty((len(planes), 3, size, size), dtype=torch.uint8, device=flat.device)
    cut_planes(flat, out, boxes, size, per=1, whole=not augment)
    with launching_on(out.device):
        _ycc_to_rgb_kernel[(len(planes), triton.cdiv(size * size, 1024))](out, size * size, BLOCK=1024)
    return out
