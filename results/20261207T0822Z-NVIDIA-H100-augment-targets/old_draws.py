"""train.py with --augment's crops drawn as before (torchvision's RandomResizedCrop.get_params, an image at a
time, its arithmetic in 1-element tensors): the A of an A/B in one command.
usage: python results/20261207T0822Z-NVIDIA-H100-augment-targets/old_draws.py ARGS... (train.py's)"""
import sys

import torch
import torchvision.transforms as T

sys.path.insert(0, ".")
import train  # noqa: E402
from starvation import decoders, resize  # noqa: E402


def crop_boxes(shapes: list[tuple[int, int]]) -> list[tuple[float, float, float, float, bool]]:
    boxes = []
    for h, w in shapes:
        whole = torch.empty(1, 1, 1).expand(3, h, w)  # (get_params reads the shape only)
        top, left, ch, cw = T.RandomResizedCrop.get_params(whole, list(resize.SCALE), list(resize.RATIO))
        boxes.append((top / h, left / w, ch / h, cw / w, bool(torch.rand(()) < 0.5)))
    return boxes


resize.crop_boxes = decoders.crop_boxes = crop_boxes
sys.exit(train.guarded(lambda: train.main(train.parse_config(sys.argv[1:]))))
