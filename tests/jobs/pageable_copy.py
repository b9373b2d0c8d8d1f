"""Starves on its copies: the data set is held in memory as one tensor (the whole set fits), and each
batch goes to the GPU with a plain .to(device) from pageable memory, a copy that holds the loop while the
GPU waits. The fix: pinned memory and non-blocking copies."""
import torch
import torch.nn.functional as F
import torchvision

from common import Rate, parse, profiled, step_range

args = parse(__doc__, img_size=512)
n = 4  # batches in the set
images = torch.randn(n * args.batch_size, 3, args.img_size, args.img_size)
labels = torch.randint(0, 1000, (n * args.batch_size,))
model = torchvision.models.resnet18().to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i in range(args.steps):
        with step_range(args, i):
            k = (i % n) * args.batch_size
            x, y = images[k:k + args.batch_size].to(args.device), labels[k:k + args.batch_size].to(args.device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof_step()
        rate.step(i)
rate.report("pageable_copy")
