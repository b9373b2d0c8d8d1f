"""Starves for its loader: a DataLoader without workers, so the training process makes every batch itself
(each image drawn and normalized on the CPU) while the GPU waits. The fix: num_workers."""
import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, Dataset

from common import Rate, parse, profiled, step_range


class Noise(Dataset):
    def __init__(self, size: int):
        self.size = size

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        x = torch.rand(3, self.size, self.size)
        return (x - 0.5) / 0.25, i % 1000


args = parse(__doc__)
loader = DataLoader(Noise(args.img_size), batch_size=args.batch_size, shuffle=True)
model = torchvision.models.resnet18().to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i, (x, y) in enumerate(loader):
        if i == args.steps:
            break
        with step_range(args, i):
            x, y = x.to(args.device), y.to(args.device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof_step()
        rate.step(i)
rate.report("single_process")
