"""
The page-locked shared-memory pool: slots made once, before the worker processes start, registered once
with cudaHostRegister, so that workers write batches (part 1) or the loop copies outputs (part 2) where
the device reads or writes them at the pinned rate. Then part 1's use of it: the dataset that writes a
batch into its slot, and the loader that hands out a slot only once the copy that last read it is done.
"""
import contextlib
import math
import os

import torch
from torch.utils.data import BatchSampler, Dataset

from starvation.data import Batch, Loader
from starvation.runtime import DIST, KnownFailure, checksum, log, size, warn

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


def pool_slots(cfg) -> int:
    """train.py --pool's slots: one for every batch that can be live: those queued, the prefetcher's, the one
    computing and the one being taken, or with --gpu-decode one being decoded by each decoding thread."""
    return cfg.queued + cfg.prefetch_depth + 1 + cfg.decode_threads


def training_pool(cfg, device: torch.device, source) -> SharedPool:
    """train.py --pool's pool (cfg: its TrainConfig), pool_slots(cfg) slots, each holding what the run's source
    (starvation/sources.py) puts in one: a batch of images, or the files' bytes and the images the workers
    decode."""
    n = pool_slots(cfg)
    pool = SharedPool("pinned pool", n, source.slot_parts(), device, pin=True,
                      shrink=f"--workers or --prefetch-factor shrink it ({n} slots = {cfg.workers} workers x "
                             f"{cfg.prefetch_factor or 2} queued + {n - cfg.queued} in flight)")
    if DIST.rank == 0:
        log(f"pinned pool: {pool.n} slots, {size(pool.nbytes)}" + (" per rank" if DIST.launched else "")
            + source.slot_note(n) + ("" if device.type == "cuda" else " of plain shared memory (no accelerator)"))
    return pool


# -----------------------------------------------------------------------------
# train.py --pool: the workers write each batch straight into a slot, and the copy reads it there


class PoolDataset(Dataset):
    """--pool: the images of batch k, made (or decoded) in place into slot k % n of the shared pool (the
    sampler tags each index with its batch number, TaggedBatches). A worker hands back the slot's number,
    not the images, and, for --verify, the checksum of what it wrote."""

    def __init__(self, source, pool: SharedPool, batched: bool, verify: bool):
        self.source, self.pool, self.batched, self.verify = source, pool, batched, verify

    def __getitems__(self, tagged: list[tuple[int, int]]):
        slot = tagged[0][0] % self.pool.n
        indices = self.source.into_slot(self.pool, slot, [i for _, i in tagged], self.batched)
        self.pool.labels[slot].copy_(torch.tensor([self.source.label(i) for i in indices]))
        return slot, checksum(self.pool.images[slot]) if self.verify and self.source.host_checksum else None


class TaggedBatches:
    """A batch sampler whose indices carry their batch's number: batch k goes into slot k % n."""

    def __init__(self, batches: BatchSampler):
        self.batches = batches

    def __iter__(self):
        return ([(k, i) for i in b] for k, b in enumerate(self.batches))


class PoolLoader(Loader):
    """--pool: slot k % n holds batch k. Taking batch j lets the DataLoader hand batch j + queued to a
    worker, which overwrites its slot: so, before that, the copy that last read the slot must be done.
    Per-slot events say when, without a device-wide sync. It closes the pool with its workers."""

    def __init__(self, pool: SharedPool, loader, queued: int, verify: bool, encoded: bool, device: torch.device):
        self.pool, self.pin_each_batch = pool, device.type == "cuda" and not pool.pinned
        self.done, self.taken = [None] * pool.n, 0
        super().__init__(loader, queued, verify, encoded)

    def fetch(self) -> Batch:
        reused = (self.taken + self.queued) % self.pool.n
        if self.done[reused] is not None:
            self.done[reused].synchronize()
            self.done[reused] = None
        slot, host_sum = next(self.it)
        self.taken += 1
        images, labels = self.pool.images[slot], self.pool.labels[slot]
        if self.pin_each_batch:  # registering failed: an ordinary pinned copy, and the slot is free at once
            images, labels = images.pin_memory(), labels.pin_memory()
        decoded = self.pool.decoded[slot] if hasattr(self.pool, "decoded") else None  # --cpu-decoded's images
        return Batch(images, labels, host_sum, slot, lengths=self.pool.lengths[slot] if self.encoded else None,
                     decoded=decoded)

    def copy_issued(self, host: Batch, done) -> None:
        self.done[host.slot] = done

    def close(self) -> None:
        for done in self.done:  # no copy may still read a slot when its pages are unpinned
            if done is not None:
                done.synchronize()
        super().close()
        self.pool.close()
