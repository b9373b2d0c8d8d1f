"""Does not starve: a ResNet-50 whose batches are made on the GPU, so the GPU is busy every step and only
the model's own cost sets the pace. The verdict: GPU-bound, look at the model."""
import torch
import torch.nn.functional as F
import torchvision

from common import Rate, parse, profiled, step_range

args = parse(__doc__, batch_size=128)
model = torchvision.models.resnet50().to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i in range(args.steps):
        with step_range(args, i):
            x = torch.randn(args.batch_size, 3, args.img_size, args.img_size, device=args.device)
            y = torch.randint(0, 1000, (args.batch_size,), device=args.device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof_step()
        rate.step(i)
rate.report("gpu_bound")
