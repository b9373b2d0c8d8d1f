"""Main's --augment (starvation/resize.py, the code before) with the candidate's pieces that PIECES names (a comma
list), each alone or together, to find which of them slowed train.py:
  draws     the batch's crops drawn at once (the candidate's crop_boxes), not crop_box an image
  pinned    the table sent from page-locked memory
  pointers  each image read where it lies, by its offset from the first image's address: no copy into one buffer
The kernel is main's tiled crop kernel in every case; everything but augmented is main's.
usage: PIECES=draws python pieces.py ARGS... (train.py's)"""
import itertools
import math
import os
import sys

import torch

from starvation.resize import crop_box, crop_kernel, crop_taps, cut, in_pixels, kernel_fits
from candidate import resize as candidate

PIECES = set(filter(None, os.environ.get("PIECES", "").split(",")))


def augmented(images: list[torch.Tensor], size: int, kernel: bool | None = None) -> torch.Tensor:
    """starvation.resize.augmented, with the pieces PIECES names."""
    device = images[0].device
    if "draws" in PIECES:
        crops = candidate.crop_boxes([tuple(m.shape[-2:]) for m in images])
    else:
        crops = [crop_box(*m.shape[-2:]) for m in images]
    if not (kernel_fits(device) if kernel is None else kernel):
        return torch.stack([cut(m, c, size) for m, c in zip(images, crops)])
    boxes = [(*in_pixels(*m.shape[-2:], crop), crop[4], *m.shape[-2:]) for m, crop in zip(images, crops)]
    runs = [(math.ceil(2 * b[2] / size) + 2, math.ceil(2 * b[3] / size) + 2) for b in boxes]
    t, k = max(max(r) for r in runs), len(images)
    if "pointers" in PIECES:
        images = [m.contiguous() for m in images]
        offsets = [m.data_ptr() - images[0].data_ptr() for m in images]  # (bytes: the images are uint8)
    else:
        offsets = itertools.accumulate((m.numel() for m in images[:-1]), initial=0)
    table = torch.tensor(list(zip(*[(*b, *r, o) for b, r, o in zip(boxes, runs, offsets)])), dtype=torch.int64)
    if "pinned" in PIECES and device.type == "cuda":
        table = table.pin_memory()
    y, x, ch, cw, flip, h, w, run_h, run_w, offsets = table.to(device, non_blocking=True).unbind(0)
    rows, row_w = crop_taps(y, ch, run_h, size, t)
    cols, col_w = crop_taps(x, cw, run_w, size, t)
    flip = flip.bool()[:, None]  # a flip reads the columns' runs right to left
    cols, col_w = torch.where(flip, cols.flip(1), cols), torch.where(flip[..., None], col_w.flip(1), col_w)
    flat = images[0] if "pointers" in PIECES else torch.cat([m.reshape(-1) for m in images])
    out = torch.empty((k, 3, size, size), dtype=torch.uint8, device=device)
    crop_kernel(flat, out, offsets, h.int(), w.int(), run_h.int(), run_w.int(), rows, row_w, cols, col_w, t, size)
    return out


if __name__ == "__main__":
    import train
    from starvation import decoders

    decoders.augmented = augmented
    sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
