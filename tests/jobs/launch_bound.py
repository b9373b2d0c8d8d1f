"""Starves on its launches: no loader at all (its batches are made on the GPU), but a small model, a stack
of narrow layers, whose kernels each run for a few microseconds, less than the CPU takes to launch the
next, so the GPU idles between them. The fix: fewer, larger kernels (torch.compile, CUDA graphs, a larger
batch)."""
import torch
import torch.nn.functional as F

from common import Rate, parse, profiled, step_range

args = parse(__doc__, batch_size=64)
width = 256
model = torch.nn.Sequential(*[m for _ in range(16) for m in (torch.nn.Linear(width, width), torch.nn.ReLU())],
                            torch.nn.Linear(width, 10)).to(args.device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
rate = Rate(args.device)
with profiled(args) as prof_step:
    for i in range(args.steps):
        with step_range(args, i):
            x = torch.randn(args.batch_size, width, device=args.device)
            y = torch.randint(0, 10, (args.batch_size,), device=args.device)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        prof_step()
        rate.step(i)
rate.report("launch_bound")
