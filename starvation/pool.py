"""
The page-locked shared-memory pool: slots made once, before the worker processes start, registered once
with cudaHostRegister, so that workers write batches (part 1) or the loop copies outputs (part 2) where
the device reads or writes them at the pinned rate.
"""
import contextlib
import math
import os

import torch

from starvation.runtime import DIST, KnownFailure, size, warn

# -----------------------------------------------------------------------------
# the pool: page-locked shared memory, made once


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def available_ram() -> int | None:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(x for x in f if x.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    return None


class SharedPool:
    """n slots of each part (name -> (shape, dtype)) in shared memory, made before the worker processes
    start (they inherit the mapping), and registered once as page-locked memory (cudaHostRegister) so
    that copies to and from it run at the pinned rate. torch's shared memory is unlinked from /dev/shm
    as soon as it is made, so nothing is left there on any exit; close() unregisters it."""

    def __init__(self, what: str, n: int, parts: dict, device: torch.device, pin: bool, shrink: str):
        self.what, self.n, self.registered = what, n, []
        self.nbytes = sum(n * math.prod(shape) * dtype.itemsize for shape, dtype in parts.values())
        need = self.nbytes * DIST.local_world_size  # every rank on this host makes its own
        for where, have in (("/dev/shm", free_bytes("/dev/shm") if os.path.isdir("/dev/shm") else None),
                            ("available memory", available_ram())):
            if have is not None and need > have:
                raise PoolTooBig(f"the {what} needs {size(need)} and {where} has {size(have)} free: {shrink}, "
                                 "or give the machine more (docker run --shm-size=...)")
        for name, (shape, dtype) in parts.items():
            setattr(self, name, torch.empty((n, *shape), dtype=dtype).share_memory_())
        self.pinned = pin and device.type == "cuda" and self.register(device, [getattr(self, k) for k in parts])

    def register(self, device: torch.device, tensors: list) -> bool:
        cudart = torch.cuda.cudart()
        for t in tensors:
            with torch.cuda.device(device):
                err = cudart.cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0)
            if int(err) != 0:
                warn(f"cudaHostRegister of the {size(self.nbytes)} {self.what} failed (cudaError {int(err)}; the "
                     "locked-memory limit, ulimit -l, may be too low): falling back to ordinary copies")
                self.close()
                return False
            self.registered.append(t)
        return True

    def close(self) -> None:
        cudart = torch.cuda.cudart() if self.registered else None
        while self.registered:
            cudart.cudaHostUnregister(self.registered.pop().data_ptr())


class PoolTooBig(KnownFailure):
    """The pool does not fit: one line says how much is needed and what shrinks it."""
