"""Starves on a sync: its loader keeps up (8 workers, pinned, non-blocking), but every step reads the loss
and the predictions back to the host (.item(), .cpu()) for its top-5 accuracy, so the CPU waits for the
GPU, and the GPU then waits while the CPU ranks the predictions and launches the next step. The fix: read
them every N steps, or keep them on the GPU."""
import numpy as np
import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Dataset

from common import Rate, parse, profiled, step_range


class Held(Dataset):
    """Samples from a set held in memory: no work to make them."""

    def __init__(self, size: int):
        self.images = torch.randn(256, 3, size, size)

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        return self.images[i % len(self.images)], i % 1000


args = parse(__doc__, batch_size=128)
loader = DataLoader(Held(args.img_size), batch_size=args.batch_size, shuffle=True, num_workers=8,
                    pin_memory=True, persistent_workers=True)
model = torchvision.models.resnet18().to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate, seen, correct, losses = Rate(args.device), 0, 0, []
with profiled(args) as prof_step:
    for i, (x, y) in enumerate(loader):
        if i == args.steps:
            break
        with step_range(args, i):
            x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())  # note: a CPU-GPU sync point, every step
            top5 = np.argsort(-logits.detach().cpu().numpy(), axis=1)[:, :5]
            correct += int((top5 == y.cpu().numpy()[:, None]).any(axis=1).sum())
            seen += len(y)
        prof_step()
        rate.step(i)
rate.report("item_sync")
