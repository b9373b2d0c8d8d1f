"""Starves one rank: a DDP job whose ranks each read a shard of their own, where the last rank's shard holds
images four times as large on a side, which its workers resize (a set merged from two sources, say). Every
all-reduce waits for that rank: the others idle in NCCL's kernels while it loads. The fix: balance the
shards' work (resize the large images once, ahead of training), or more workers where the work is.

    torchrun --nproc-per-node 2 tests/jobs/ddp_starved_rank.py --torch-profile traces/   # then analyze.py traces/
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

from common import Rate, parse, profiled, step_range


class Shard(Dataset):
    def __init__(self, size: int, scale: int):
        self.size, self.scale = size, scale

    def __len__(self):
        return 1_000_000

    def __getitem__(self, i):
        x = torch.rand(1, 3, self.scale * self.size, self.scale * self.size)
        if self.scale > 1:
            x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", antialias=True)
        return (x[0] - 0.5) / 0.25, i % 1000


args = parse(__doc__)
rank, world, local = (int(os.environ.get(k, d)) for k, d in (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))
cuda = args.device.startswith("cuda")
if cuda:
    torch.cuda.set_device(local)
dist.init_process_group("nccl" if cuda else "gloo")
device = f"cuda:{local}" if cuda else "cpu"
loader = DataLoader(Shard(args.img_size, 4 if rank == world - 1 and world > 1 else 1), batch_size=args.batch_size,
                    shuffle=True, num_workers=4, pin_memory=cuda, persistent_workers=True)
model = DistributedDataParallel(torchvision.models.resnet18().to(device), device_ids=[local] if cuda else None)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i, (x, y) in enumerate(loader):
        if i == args.steps:
            break
        with step_range(args, i):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()  # note: DDP's all-reduce of the gradients, which waits for every rank
            opt.step()
        prof_step()
        rate.step(i)
rate.report(f"ddp_starved_rank, rank {rank}")
dist.destroy_process_group()
