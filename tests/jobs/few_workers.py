"""Starves for its loader: two workers, pinned memory and non-blocking copies, but each sample costs the
CPU more (an image cut and resized, as an augmentation does) than two processes can make for the GPU.
The fix: more workers."""
import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Dataset

from common import Rate, parse, profiled, step_range


class Augmented(Dataset):
    def __init__(self, size: int):
        self.size = size

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        x = torch.rand(1, 3, 2 * self.size, 2 * self.size)
        x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True)[0]
        return (x - 0.5) / 0.25, i % 1000


args = parse(__doc__)
loader = DataLoader(Augmented(args.img_size), batch_size=args.batch_size, shuffle=True, num_workers=2,
                    pin_memory=True, persistent_workers=True)
model = torchvision.models.resnet18().to(args.device)
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
rate.report("few_workers")
