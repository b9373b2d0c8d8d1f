"""
What train.py's loop is fed, beneath the study's own steps: a batch on the host or the device, the base
that every image source shares (random images, decoded photos, the files' bytes), the Loader that takes
the DataLoader's batches and times the loop's wait for them, and the ceiling's feeder, which makes one
batch on the device and hands it out again.
"""
import itertools
import os
import signal
import time
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset, Sampler, get_worker_info

from starvation.runtime import DIST, checksum, current_stream


@dataclass
class Batch:
    """A batch on the host (from a Loader) or on the device (from a feeder's copy)."""
    images: torch.Tensor
    labels: torch.Tensor
    host_sum: torch.Tensor | None = None  # --verify: checksum taken on the host before the copy
    slot: int | None = None               # --pool, on the host: the slot the images are in
    ready: object = None                  # on the device: event recorded on the copy stream after the copy
    lengths: torch.Tensor | None = None   # --gpu-decode, on the host: images holds the files' bytes, packed
    decoded: torch.Tensor | None = None   # --gpu-decode, on the host: the images the workers decoded, first


def moved(t: torch.Tensor, host: Batch, device: torch.device, non_blocking: bool) -> torch.Tensor:
    """One of a host batch's tensors on the device. On the CPU .to() is no copy: a pool slot's is cloned,
    as a GPU's copy would be, or the step would read a slot a worker refills."""
    return t.clone() if host.slot is not None and device.type == "cpu" else t.to(device, non_blocking=non_blocking)


class Images(Dataset):
    """Images of 3 x img_size x img_size, sample i made in place by fill(), and their labels (i % 10 here),
    for any index i: the sampler (Endless) gives indices until the measurement stops the loop. A subclass
    says how an image is made; the pool writes a batch straight into its slot (into_slot)."""
    host_checksum = True  # --verify: the workers' checksum of what they wrote is the host's

    def __init__(self, img_size: int, uint8: bool, inject_fault: str | None = None):
        self.shape, self.uint8, self.inject_fault = (3, img_size, img_size), uint8, inject_fault

    def label(self, i: int) -> int:
        return i % 10

    def fault_hook(self) -> None:
        if self.inject_fault == "worker-crash" and get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGKILL)  # test hook: a worker dying as under the OOM killer

    def fill(self, images: torch.Tensor, indices: list[int], batched: bool) -> None:
        """Make the images of `indices` in place, in `images` (k, 3, H, W): at once, or one at a time."""
        raise NotImplementedError

    def into_slot(self, pool, slot: int, indices: list[int], batched: bool) -> list[int]:
        """--pool: the batch written where it lives, in the pool's slot: no collate copy. Returns its samples in
        the order written, which the labels follow (--gpu-decode's puts the workers' images first)."""
        self.fill(pool.images[slot], indices, batched)
        return indices

    def empty(self, k: int) -> torch.Tensor:
        return torch.empty((k, *self.shape), dtype=torch.uint8 if self.uint8 else torch.float32)

    def __getitem__(self, index: int):
        images = self.empty(1)
        self.fill(images, [index], batched=False)
        return images[0], torch.tensor(self.label(index))


class BatchedImages:
    """--batched-fetch, mixed into an Images source: one call makes the whole batch, no per-sample tensors
    and no collate copy (the DataLoader's collate_fn is as_is)."""

    def __getitems__(self, indices: list[int]):
        images = self.empty(len(indices))
        self.fill(images, indices, batched=True)
        return images, torch.tensor([self.label(i) for i in indices])


class Endless(Sampler):
    """Indices rank, rank + world_size, rank + 2 x world_size, ... without end (under torchrun each rank its
    own shard, as DistributedSampler deals them): the measurement decides when the loop stops, so no run adds
    up the batches its warm-up, window, slides and drain will take."""

    def __init__(self, rank: int = 0, world_size: int = 1):
        self.rank, self.world_size = rank, world_size

    def __iter__(self):
        return itertools.count(self.rank, self.world_size)


def as_is(batch):
    return batch  # module level so that worker processes can pickle it


class Loader:
    """The DataLoader's batches, and the time the main process is blocked waiting for them."""

    def __init__(self, loader, queued: int, verify: bool, encoded: bool):
        self.queued, self.verify, self.encoded, self.waited = queued, verify, encoded, 0.0
        self.it = iter(loader)

    def fetch(self) -> Batch:
        if self.encoded:  # --gpu-decode, the files' bytes: the device decodes them, and --verify checks what it made
            rows, labels, lengths, decoded = next(self.it)
            return Batch(rows, labels, lengths=lengths, decoded=decoded)
        images, labels = next(self.it)
        return Batch(images, labels, checksum(images) if self.verify else None)

    def __next__(self) -> Batch:
        t0 = time.perf_counter()
        try:
            return self.fetch()
        finally:
            self.waited += time.perf_counter() - t0

    def copy_issued(self, host: Batch, done) -> None:
        """The copy of `host` is issued; `done` (an event, or None) completes when it has finished."""

    def thread_figures(self, t0: float, t1: float) -> dict | None:
        """A stage's own thread between the loader and the loop (--gpu-decode's decode): its time in the
        window t0..t1 (perf_counter); None where there is none."""
        return None

    def drain(self) -> None:
        """Take, and drop, the batches the workers queued ahead, so that the clock starts on what the
        pipeline makes, not on what it stored while the loop warmed up."""
        for _ in range(self.queued):
            self.copy_issued(next(self), None)

    def close(self) -> None:
        # the workers, shut down now and in order: left to the interpreter's exit they are killed, and the
        # DataLoader's SIGCHLD handler prints that as a traceback after the run's last line
        shutdown = getattr(self.it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


class CeilingFeeder:
    """The ceiling (--data-on-gpu): one batch made on the device once and reused; no loader, no copy."""
    source = None

    def __init__(self, batch_size: int, img_size: int, uint8: bool, seed: int, device: torch.device):
        g = torch.Generator(device=device).manual_seed(seed + DIST.rank)
        shape = (batch_size, 3, img_size, img_size)
        images = (torch.randint(0, 256, shape, dtype=torch.uint8, device=device, generator=g) if uint8
                  else torch.randn(shape, device=device, generator=g))
        self.batch = Batch(images, torch.arange(batch_size, device=device) % 10)
        self.compute_stream = current_stream(device)

    def __next__(self) -> Batch:
        return self.batch


# ImageNet statistics: what the uint8 path normalizes with, on the device
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class Normalize:
    """uint8 NCHW -> float32 normalized, on the device after the copy: 4x fewer bytes moved. The
    constants are made on the device once, not copied from host lists every step."""

    def __init__(self, device: torch.device):
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return (images.float() / 255.0 - self.mean) / self.std
