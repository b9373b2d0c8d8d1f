"""
The profilers' side of a run: NVTX ranges in the study's colours (or through torch.cuda.nvtx where the
attached nsys would drop them), torch.profiler's schedule, nsys's capture range.
"""
import contextlib
import importlib.metadata
import os

import torch

from starvation.ranges import RANGES
from starvation.runtime import DIST, warn


class Marker:
    """Named ranges for the profilers: nvtx ranges in RANGES' colours, and torch.profiler labels when that
    runs. Under torchrun every name ends with the rank, " (rank 1)"."""

    def __init__(self, backend: str, torch_profiler: bool, suffix: str = ""):
        self.backend, self.torch_profiler, self.suffix = backend, torch_profiler, suffix
        if backend == "nvtx":
            import nvtx
            self._nvtx = nvtx

    @contextlib.contextmanager
    def __call__(self, name: str):
        color = RANGES[name.split()[0] if name.startswith("Batch ") else name]
        name += self.suffix
        with contextlib.ExitStack() as stack:
            if self.backend == "nvtx":
                stack.enter_context(self._nvtx.annotate(name, color=color))
            elif self.backend == "torch":
                torch.cuda.nvtx.range_push(name)
                stack.callback(torch.cuda.nvtx.range_pop)
            if self.torch_profiler:
                stack.enter_context(torch.profiler.record_function(name))
            yield


def nvtx_backend(enabled: bool) -> str:
    """'nvtx' (the study's coloured ranges), 'torch' (torch.cuda.nvtx, no colours) or 'off'."""
    if not enabled:
        return "off"
    try:
        import nvtx
    except ImportError:
        warn("the nvtx package is not installed: NVTX ranges go through torch.cuda.nvtx, "
             "without colours (pip install nvtx)")
        return "torch"
    # nvtx >= 0.2.12 asks the attached tool whether its domain is enabled; nsys 2023.4 never says
    # yes, so every nvtx.annotate range would vanish from the report without a word.
    attached = bool(os.environ.get("NVTX_INJECTION64_PATH"))
    if attached and type(nvtx.get_domain()).__name__ == "DummyDomain":
        version = getattr(nvtx, "__version__", None) or importlib.metadata.version("nvtx")
        if not os.environ.get("NVTX_FALLBACK_SAID"):  # run_all.sh says it once a run, not once a report
            warn(f"the attached profiler reports the nvtx domain disabled (nvtx {version} asks "
                 "nvtxDomainIsEnabled, which nsys 2023.4 does not answer), so nvtx.annotate ranges would be "
                 "dropped: recording them through torch.cuda.nvtx instead, without colours "
                 "(nvtx<=0.2.11 or a newer nsys keeps the colours)")
        return "torch"
    return "nvtx"


def torch_profiler(cfg, device: torch.device, total: int, capture_from: int):
    if cfg.profile != "torch":
        return None
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities, record_shapes=True, with_stack=cfg.profile_stack,
        schedule=torch.profiler.schedule(wait=max(0, capture_from - 1), warmup=min(1, capture_from),
                                         active=total - capture_from, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            cfg.profile_dir, worker_name=f"rank{DIST.rank}" if DIST.launched else None))


