"""
What the jobs in this folder share, and only that: their flags, and the profiler a user puts around a loop.
Each job is a plain PyTorch training script, written the way users write them, that starves the GPU for
one reason (or does not): analyze.py must name that reason from a trace of it, without the study's names.

    nsys profile python tests/jobs/single_process.py          # or: analyze.py --run -- python tests/jobs/...
    python tests/jobs/single_process.py --torch-profile traces/
"""
import argparse
import contextlib
import os
import socket
import time

import torch


def parse(description: str, **defaults) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=defaults.get("steps", 200), help="steps to train (default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=defaults.get("batch_size", 64), help="(default: %(default)s)")
    p.add_argument("--img-size", type=int, default=defaults.get("img_size", 224), help="(default: %(default)s)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="(default: %(default)s)")
    p.add_argument("--nvtx", action="store_true",
                   help="a range of the job's own around each step ('train_step N'), as NVTX and as a torch.profiler "
                        "label")
    p.add_argument("--torch-profile", metavar="DIR",
                   help="record 10 steps with torch.profiler, after 10 skipped and 3 of warm-up, into DIR")
    p.add_argument("--torch-trace", metavar="DIR",
                   help="record every step with torch.profiler, without a schedule or prof.step(), into DIR (a chrome "
                        "trace a process, exported at the end): the quick look many users take")
    return p.parse_args()


@contextlib.contextmanager
def profiled(args):
    """Yields step(): call it once a step. Under --torch-profile it is the profiler's prof.step()."""
    if not (args.torch_profile or args.torch_trace):
        yield lambda: None
        return
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device.startswith("cuda") else [])
    if args.torch_trace:
        with profile(activities=activities) as prof:
            yield lambda: None
        os.makedirs(args.torch_trace, exist_ok=True)
        prof.export_chrome_trace(os.path.join(args.torch_trace, f"{socket.gethostname()}_{os.getpid()}.pt.trace.json"))
        return
    with profile(activities=activities, schedule=schedule(wait=10, warmup=3, active=10),
                 on_trace_ready=tensorboard_trace_handler(args.torch_profile, use_gzip=True)) as prof:
        yield prof.step


@contextlib.contextmanager
def step_range(args, i: int):
    """--nvtx: the job's own range around step i, seen by nsys (NVTX) and by torch.profiler (a label)."""
    if not args.nvtx:
        yield
        return
    torch.cuda.nvtx.range_push(f"train_step {i}")
    try:
        with torch.profiler.record_function(f"train_step {i}"):
            yield
    finally:
        torch.cuda.nvtx.range_pop()


class Rate:
    """The job's own steps/s, printed at the end: the first 10 steps left out, the device synchronized."""

    def __init__(self, device: str):
        self.device, self.t0, self.n = device, None, 0

    def step(self, i: int) -> None:
        if i == 10:
            self.sync()
            self.t0 = time.perf_counter()
        elif i > 10:
            self.n += 1

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def report(self, name: str) -> None:
        self.sync()
        if self.t0 and self.n:
            print(f"{name}: {self.n / (time.perf_counter() - self.t0):.2f} steps/s over {self.n} steps", flush=True)
