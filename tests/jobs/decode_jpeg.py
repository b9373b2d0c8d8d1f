"""Starves on decoding: a folder of camera-size JPEGs (1600x1200, made on first use in $JOB_PHOTOS, by
default /tmp/job-photos), read as torchvision's ImageFolder with its usual transforms, by four workers: each
photo is decoded whole on the CPU before it is cut to 224. The fix: more workers, then decode on the GPU or
keep a copy at the training size."""
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from PIL import Image
from torch.utils.data import DataLoader
from torchvision import transforms

from common import Rate, parse, profiled, step_range


def make_photos(folder: Path, n: int = 128) -> None:
    """Noisy 1600x1200 photos, as a camera's sensor makes them, in two classes."""
    rng = np.random.default_rng(0)
    for k in range(n):
        d = folder / f"class{k % 2}"
        d.mkdir(parents=True, exist_ok=True)
        scene = np.linspace(0, 255, 1600)[None, :, None] * np.ones((1200, 1, 3)) * rng.uniform(0.3, 1, 3)
        pixels = np.clip(scene + rng.normal(0, 12, scene.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(d / f"{k}.jpg", quality=90)


args = parse(__doc__)
data = Path(os.environ.get("JOB_PHOTOS", "/tmp/job-photos"))
if not (data / "class1").exists():
    make_photos(data)
dataset = torchvision.datasets.ImageFolder(data, transforms.Compose([
    transforms.RandomResizedCrop(args.img_size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))
sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=10**7)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=4, pin_memory=True,
                    persistent_workers=True)
model = torchvision.models.resnet18(num_classes=2).to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i, (x, y) in enumerate(loader):
        if i == args.steps:
            break
        with step_range(args, i):
            x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof_step()
        rate.step(i)
rate.report("decode_jpeg")
