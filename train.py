"""
GPU starvation, reproduced and fixed in steps: a torchvision ResNet-18 trained on random
3x512x512 images whose input pipeline starves the GPU, one preset per step of the case study.

    python train.py --variant baseline            # single-process DataLoader, blocking .to(device)
    python train.py --streams --workers 8         # the study's streams step (pinned, non_blocking, side stream)
    python train.py --pool --workers 8            # beyond it: workers write into page-locked shared memory
    python train.py --variant prefetch --data-on-gpu   # the ceiling: same step, batch already resident
    python train.py --variant prefetch --loader-only   # the input pipeline alone: batches/s to the device
    python train.py --list-variants
    torchrun --standalone --nproc-per-node 2 train.py --variant streams --workers 8   # DDP, one GPU per rank

The study's steps, and where this file makes them (its sections follow this order):

    step       flags                        made by
    baseline   (the defaults)               make_loader (one process), Loader, Feeder: get batch, then copy it
    workers    --workers 8                  make_loader: num_workers
    async      --pin-memory --non-blocking  make_loader: pin_memory; to_device: non_blocking
    streams    --streams                    Streams: batch N+1 copied on a copy stream; hand_over
    prefetch   --prefetcher                 Prefetcher, after apex's data_prefetcher; hand_over
    pool       --pool (beyond the study)    make_pool, make_feeder (starvation/pool.py: PoolDataset, PoolLoader)
    ceiling    --data-on-gpu                make_feeder (starvation/data.py: CeilingFeeder, the batch made once)
    the loop   "Batch i" holds "get batch", "copy batch" and "Compute": train, which measure.Steps times

Presets and flags: --variant picks a preset; without it, the furthest step of the study named by a
flag picks it (--pool, then --prefetcher, --streams, --pin-memory or --non-blocking, --workers), since
the steps are cumulative: --streams alone is the study's streams step, pinned and non_blocking. Any
flag given explicitly then overrides the preset's value (--streams --no-pin-memory).

Throughput is what the pipeline sustains: before the clock starts, the warm-up drops the batches the
workers queued ahead; the window closes after --window-s seconds once it holds --min-steps, or at
--steps; while its halves disagree, it slides later (--settle). With --profile nsys,
`nsys profile --capture-range=cudaProfilerApi` captures the measured steps (or, with --profile-steps N,
the last N). docs/measuring.md says more.

Under torchrun each rank trains on its own GPU (LOCAL_RANK) with DistributedDataParallel and its own
shard of the data; --workers is per rank. Rank 0 writes the JSON for the whole job.
"""
from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
import time
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from collections import deque

import starvation.runtime  # noqa: F401  (first: without torch it says in one line how to get it)
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler
from torch.utils.data.distributed import DistributedSampler

from starvation import photos
from starvation.cli import (COMPUTE, MEASUREMENT, Measurement, check_launcher, check_measurement, check_workers,
                            fit_to_machine, nonneg_int, parse_preset_args, positive_int, preset_parser, preset_table,
                            resolve_window, setting)
from starvation.data import Batch, BatchedImages, CeilingFeeder, Images, Loader, as_is, moved
from starvation.ddp import check_in, check_ranks, combine, init_distributed, rank_fault, rank_lines
from starvation.measure import (FELL_BEHIND, Steps, Window, alone_batches, finish, rate_line, rate_of, run_head,
                                settle_max, timed)
from starvation.photos import Photos
from starvation.plan import alone_steps
from starvation.pool import PoolDataset, PoolLoader, SharedPool, TaggedBatches
from starvation.profiling import Marker, nvtx_backend
from starvation.runtime import (DIST, checksum, current_stream, device_sync, die_with_parent, guarded, log, new_stream,
                                pick_device, process_age_s, run_or_exit, share_cpus, size, usable_cpus, warn)
from starvation.verdict import SETTLE_TOLERANCE

# -----------------------------------------------------------------------------
# presets: the case study's steps, then the steps beyond it. Each one changes little on top of
# the one before it, so that the results table reads as a list of one-line diffs.


_ASYNC = dict(workers=8, pin_memory=True, non_blocking=True)


_PREFETCH = dict(_ASYNC, prefetcher=True)


_FAST_COMPUTE = dict(_PREFETCH, amp="bf16", channels_last=True)


_FAST = dict(_FAST_COMPUTE, uint8=True, batched_fetch=True, persistent_workers=True, prefetch_factor=4)


_IN_POOL = dict(pin_memory=False, pool=True)  # the pool's slots are page-locked: no pin-memory thread


PRESETS = {
    "baseline": ({}, "single-process DataLoader, blocking copy from pageable memory"),
    "workers": (dict(workers=8), "8 DataLoader worker processes"),
    "async": (_ASYNC, "+ pinned memory and non_blocking copies"),
    "streams": (dict(_ASYNC, streams=True), "+ copy batch N+1 on a copy stream while batch N computes"),
    "prefetch": (_PREFETCH, "a CUDA prefetching iterator instead of explicit streams"),
    "pool": (dict(_PREFETCH, **_IN_POOL), "prefetch, + workers write into page-locked shared-memory slots"),
    "bf16": (dict(_PREFETCH, amp="bf16"), "prefetch + bf16 autocast"),
    "channels-last": (_FAST_COMPUTE, "+ channels_last memory format"),
    "uint8": (dict(_FAST_COMPUTE, uint8=True), "+ uint8 images, converted and normalized on the GPU"),
    "batched": (dict(_FAST_COMPUTE, uint8=True, batched_fetch=True), "+ whole batch per dataset call, no collate"),
    "fast": (_FAST, "+ persistent workers, 4 batches queued per worker"),
    "fast-pool": (dict(_FAST, **_IN_POOL), "fast, its batches in the page-locked pool"),
    "compiled": (dict(_FAST, **_IN_POOL, compile=True), "fast-pool, its step under torch.compile, fused Adam"),
    "jpeg": (dict(_FAST, jpeg=True), "fast, on real photos: the workers decode JPEG files on the CPU"),
    "jpeg-pool": (dict(_FAST, **_IN_POOL, jpeg=True), "jpeg, decoded straight into the page-locked pool"),
    "jpeg-compiled": (dict(_FAST, **_IN_POOL, jpeg=True, compile=True), "jpeg-pool, its step compiled"),
    "jpeg-gpu": (dict(_FAST, **_IN_POOL, jpeg=True, gpu_decode=True, compile=True),
                 "jpeg-compiled, the files' bytes through the pool, decoded on the GPU"),
}


# run_all.sh --variants: these groups, in this order; "ceiling" is the study's step on a batch already on
# the device, "ceiling-X" variant X's
GROUPS = {"study": "baseline,workers,async,streams,prefetch,pool,ceiling",
          "beyond": "bf16,ceiling-bf16,channels-last,ceiling-channels-last,uint8,ceiling-uint8,batched,fast,"
                    "fast-pool,compiled,ceiling-compiled",
          "photos": "jpeg,jpeg-pool,ceiling-jpeg,jpeg-compiled,jpeg-gpu,ceiling-jpeg-compiled"}


GROUPS["all"] = ",".join(GROUPS.values())


# without --variant, the furthest step of the study that a flag names picks the preset
STEP_OF_FLAG = (("pool", "pool"), ("prefetcher", "prefetch"), ("streams", "streams"), ("pin_memory", "async"),
                ("non_blocking", "async"), ("workers", "workers"))


# torch's own advice on the worker count says twice a run what check_workers has judged already
warnings.filterwarnings("ignore", message=r"This DataLoader will create \d+ worker processes")

# -----------------------------------------------------------------------------
# step 1, the baseline: "get batch" from a DataLoader over random images made on the CPU (making them is
# the loading work), its keywords a dict that each step changes (--workers: workers; --pin-memory: async)


class FakeDataset(Images):
    """The study's data: random 3 x img_size x img_size images (--uint8: bytes), sample i labelled i % 10."""

    def fill(self, images: torch.Tensor, indices: list[int], batched: bool) -> None:
        self.fault_hook()
        make = (lambda t: t.random_(0, 256)) if self.uint8 else (lambda t: t.normal_())
        for t in [images] if batched else images:
            make(t)


class BatchedFakeDataset(BatchedImages, FakeDataset):
    """--batched-fetch: one call makes the whole batch, no collate copy."""


def make_loader(cfg: Config, n_batches: int, pool: SharedPool | None = None) -> DataLoader:
    """n_batches for this rank; under torchrun the dataset is world_size times larger, one shard a rank."""
    n = n_batches * cfg.batch_size * DIST.world_size
    if cfg.gpu_decode:
        dataset = photos.EncodedDataset(n, cfg.img_size, cfg.photos, cfg.inject_fault)
    elif cfg.jpeg:
        dataset = (photos.BatchedJpegDataset if cfg.batched_fetch else photos.JpegDataset)(
            n, cfg.img_size, cfg.photos, cfg.inject_fault)
    else:
        dataset = (BatchedFakeDataset if cfg.batched_fetch else FakeDataset)(n, cfg.img_size, cfg.uint8,
                                                                            cfg.inject_fault)
    if pool is not None:
        dataset = PoolDataset(dataset, pool, cfg.batched_fetch, cfg.verify)
    # note: the seed differs per rank, or every rank's workers would draw the same images
    kwargs = dict(generator=torch.Generator().manual_seed(cfg.seed + DIST.rank))
    sampler = (DistributedSampler(dataset, num_replicas=DIST.world_size, rank=DIST.rank, shuffle=False)
               if DIST.launched else SequentialSampler(dataset))
    batches = BatchSampler(sampler, cfg.batch_size, drop_last=True)
    kwargs["batch_sampler"] = TaggedBatches(batches) if pool is not None else batches
    kwargs["num_workers"] = cfg.workers
    if cfg.workers:
        kwargs["worker_init_fn"] = die_with_parent  # no worker outlives the run, a SIGKILL included
    if cfg.pin_memory:
        kwargs["pin_memory"] = True
    if cfg.batched_fetch or pool is not None or cfg.gpu_decode:
        kwargs["collate_fn"] = as_is
    if cfg.persistent_workers:
        kwargs["persistent_workers"] = True
    if cfg.prefetch_factor is not None:
        kwargs["prefetch_factor"] = cfg.prefetch_factor
    return DataLoader(dataset, **kwargs)

# -----------------------------------------------------------------------------
# steps 2 to 5: "copy batch", then the overlap. Each feeder hands out device batches ready for the
# stream that computes (--non-blocking: async; --streams: streams; --prefetcher: prefetch)


def to_device(host: Batch, device: torch.device, non_blocking: bool) -> Batch:
    return Batch(moved(host.images, host, device, non_blocking), moved(host.labels, host, device, non_blocking),
                 host.host_sum)


def hand_over(batch: Batch, compute_stream) -> Batch:
    """Make the compute stream wait for the copy, and tell the caching allocator that the compute
    stream uses the batch: without record_stream it may hand this memory to the next copy while
    the step still reads it (the bug of prefetchers that skip it)."""
    if batch.ready is not None:
        compute_stream.wait_event(batch.ready)
    for t in (batch.images, batch.labels):
        if t.device.type != "cpu":
            t.record_stream(compute_stream)
    return batch


def issue_copy(cfg: Config, device: torch.device, mark: Marker, stream, host: Batch, source: Loader) -> Batch:
    """The study's "copy batch": host to device issued on `stream` (--gpu-decode: the wait for the decode,
    done ahead), with the event that says when it has finished; the source hears of it, so that a pool slot
    waits for it."""
    with torch.get_device_module(device.type).stream(stream), mark("copy batch"):
        if host.ready is not None:  # --gpu-decode: decoded on the device already, by the thread ahead
            stream.wait_event(host.ready)
        batch = to_device(host, device, cfg.non_blocking)
        batch.ready = stream.record_event()  # None on the CPU, whose streams are no-ops
    source.copy_issued(host, batch.ready)
    return batch


class Feeder:
    """The study's first steps: get batch, then copy it on the stream that computes."""

    def __init__(self, cfg: Config, device: torch.device, mark: Marker, source: Loader):
        self.cfg, self.device, self.mark, self.source = cfg, device, mark, source
        self.compute_stream = self.copy_stream = current_stream(device)

    def get(self) -> Batch:
        with self.mark("get batch"):
            return next(self.source)

    def copy(self, host: Batch) -> Batch:
        return issue_copy(self.cfg, self.device, self.mark, self.copy_stream, host, self.source)

    def __next__(self) -> Batch:
        return self.copy(self.get())


class Streams(Feeder):
    """The study's streams: batch N+1 is copied on a copy stream while batch N computes on a
    compute stream."""

    def __init__(self, cfg, device, mark, source):
        super().__init__(cfg, device, mark, source)
        self.compute_stream, self.copy_stream = new_stream(device), new_stream(device)
        self.next_batch = self.copy(self.get())

    def __next__(self) -> Batch:
        batch = hand_over(self.next_batch, self.compute_stream)
        self.next_batch = self.copy(self.get())  # runs on the copy stream while `batch` computes
        return batch


class Prefetcher:
    """A CUDA prefetching iterator, after apex's data_prefetcher: it keeps --prefetch-depth batches copied
    ahead on a side stream, and each next() hands the oldest to the stream the loop computes on (its
    own, as in apex). As in the study, the loop's "get batch" holds the whole of it, copy included."""

    def __init__(self, cfg: Config, device: torch.device, mark: Marker, source: Loader):
        self.cfg, self.device, self.mark, self.source = cfg, device, mark, source
        self.compute_stream, self.copy_stream = current_stream(device), new_stream(device)
        self.ahead: deque = deque()
        for _ in range(cfg.prefetch_depth):
            self.preload()

    def preload(self) -> None:
        host = next(self.source)
        self.ahead.append(issue_copy(self.cfg, self.device, self.mark, self.copy_stream, host, self.source))

    def __next__(self) -> Batch:
        with self.mark("get batch"):
            batch = hand_over(self.ahead.popleft(), self.compute_stream)
            self.preload()
            return batch

# -----------------------------------------------------------------------------
# the seam: the feeder a run gets. Beyond the study, the pinned pool (--pool: the workers write each batch
# into page-locked shared memory, so no pin-memory thread copies it once more), the photos (--jpeg) and the
# ceiling (--data-on-gpu) plug in here; their code is the package's


def make_pool(cfg: Config, device: torch.device) -> SharedPool:
    """One slot for every batch that can be live: those queued, the prefetcher's, the one computing
    and the one being taken."""
    n = cfg.queued + cfg.prefetch_depth + 2
    batch = (cfg.batch_size, 3, cfg.img_size, cfg.img_size)
    parts = dict(images=(batch, torch.uint8 if cfg.uint8 else torch.float32), labels=((cfg.batch_size,), torch.int64))
    if cfg.gpu_decode:  # a slot holds the files' bytes, a row each, and each row's length
        parts.update(images=((cfg.batch_size, cfg.photos.largest), torch.uint8),
                     lengths=((cfg.batch_size,), torch.int64))
    pool = SharedPool("pinned pool", n, parts, device, pin=True,
                      shrink=f"--workers or --prefetch-factor shrink it ({n} slots = {cfg.workers} workers x "
                             f"{cfg.prefetch_factor or 2} queued + {cfg.prefetch_depth + 2} in flight)")
    if DIST.rank == 0:
        log(f"pinned pool: {pool.n} slots, {size(pool.nbytes)}" + (" per rank" if DIST.launched else "")
            + ("" if device.type == "cuda" else " of plain shared memory (no accelerator)"))
    return pool


def make_feeder(cfg: Config, device: torch.device, mark: Marker, n_batches: int) -> Feeder | Prefetcher | CeilingFeeder:
    if cfg.data_on_gpu:
        return CeilingFeeder(cfg.batch_size, cfg.img_size, cfg.uint8, cfg.seed, device)
    # enough batches for every step, the drained queue, and those still in flight when the loop ends
    n_batches += cfg.ahead + cfg.prefetch_depth + 1
    pool = make_pool(cfg, device) if cfg.pool else None
    source = None
    try:
        loader = make_loader(cfg, n_batches, pool)
        source = (PoolLoader(pool, loader, cfg.queued, cfg.verify, cfg.gpu_decode, device) if pool is not None
                  else Loader(loader, cfg.queued, cfg.verify, cfg.gpu_decode))
        if cfg.gpu_decode:  # the batch decoded on the device by a thread of its own, ahead of the loop
            source = photos.DecodeAhead(source, device, cfg.non_blocking, cfg.verify, cfg.img_size)
        cls = Streams if cfg.streams else Prefetcher if cfg.prefetcher else Feeder
        return cls(cfg, device, mark, source)
    except BaseException:
        if source is not None:
            source.close()  # its workers, and the pool with them
        elif pool is not None:
            pool.close()
        raise

# -----------------------------------------------------------------------------
# the model and the step


# ImageNet statistics: what the uint8 path normalizes with, on the device
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_model(cfg: Config, device: torch.device, compute_stream) -> torch.nn.Module:
    """ResNet-18 in training mode; under torchrun wrapped in DDP; with --compile, compiled."""
    with torch.get_device_module(device.type).stream(compute_stream):
        model = torchvision.models.resnet18().to(device).train()
        if cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if DIST.launched:
            # gradients are all-reduced during backward, bucket by bucket, on NCCL's own stream. DDP keeps
            # autograd nodes made here: made on the stream that trains, or backward syncs across streams
            model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if cfg.compile:  # the model, its backward with it; under DDP the wrapped one, as torch documents
            model = torch.compile(model)
    return model


def make_step(cfg: Config, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device):
    amp_dtype = AMP_DTYPES[cfg.amp]
    normalize = Normalize(device) if cfg.uint8 else None

    def step(batch: Batch) -> torch.Tensor:
        images = normalize(batch.images) if normalize else batch.images
        if cfg.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(images), batch.labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss
    return step


def compile_step(cfg: Config, step, device: torch.device, compute_stream) -> float | None:
    """--compile: the step compiled before the warm-up, on a batch like the loop's (zeros: no loader batch
    is taken), so that compiling costs no measured step and no drained batch. Returns its seconds."""
    if not cfg.compile:
        return None
    shape = (cfg.batch_size, 3, cfg.img_size, cfg.img_size)
    dm = torch.get_device_module(device.type)
    with dm.stream(compute_stream):
        batch = Batch(torch.zeros(shape, dtype=torch.uint8 if cfg.uint8 else torch.float32, device=device),
                      torch.zeros(cfg.batch_size, dtype=torch.long, device=device))
        t0 = time.perf_counter()
        step(batch)
        device_sync(device)
        took = time.perf_counter() - t0
    if DIST.rank == 0:
        log(f"compiled the step in {took:.1f} s")
    return took


class Normalize:
    """uint8 NCHW -> float32 normalized, on the device after the copy: 4x fewer bytes moved. The
    constants are made on the device once, not copied from host lists every step."""

    def __init__(self, device: torch.device):
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return (images.float() / 255.0 - self.mean) / self.std


# the loop: "Batch i" holds "get batch", "copy batch" and "Compute"; nothing in it waits for the device,
# so the CPU runs ahead. Warm-up, the drop of the queued batches, the clock, the capture and the window's
# slide are the measurement's (Steps)


def train(cfg: Config, feeder, step, mark: Marker, steps: Steps) -> list:
    """The study's loop. Returns --verify's checks: (step, host checksum, device checksum)."""
    checks = []
    for i in steps:
        if cfg.inject_fault in ("rank-exit", "rank-hang") and i == 2:
            rank_fault(cfg.inject_fault, mark("get batch"))  # a test's hook
        with mark(f"Batch {i}"):
            batch = next(feeder)
            if DIST.launched:
                check_in(cfg.dist_timeout)  # names a rank that died or hangs before its compute
            with torch.get_device_module(batch.images.device.type).stream(feeder.compute_stream), mark("Compute"):
                if cfg.verify and batch.host_sum is not None:
                    # checked as the step reads it: on the compute stream, after the hand-over
                    checks.append((i, batch.host_sum, checksum(batch.images)))
                step(batch)
        del batch  # drop our reference now, so the allocator may recycle it once the stream is done
    return checks


def drain_at(cfg: Config) -> int | None:
    """The warm-up step before which the queued batches are dropped: `queued` steps before the clock
    starts, so that the workers, which all restart at once after the drain, have fallen out of step
    again, and the burst of their first round has been trained on, when it starts."""
    return max(0, cfg.warmup - cfg.ahead) if cfg.ahead and not cfg.data_on_gpu else None


def run(cfg: Config, device: torch.device) -> list[tuple[str, dict]]:
    """The window's record (run1), then with --then-alone the loader's (loader), each as (name, record)."""
    torch.manual_seed(cfg.seed)
    backend = nvtx_backend(cfg.nvtx)
    mark = Marker(backend, cfg.profile == "torch", f" (rank {DIST.rank})" if DIST.launched else "")
    if cfg.loader_only:
        return [("loader", loader_alone(cfg, device, mark, backend))]
    total = cfg.warmup + cfg.steps
    # --then-alone: the loader goes on after the window, its queue dropped, then half as many batches as it held
    after = cfg.ahead + alone_batches(cfg.workers, alone_steps(cfg.steps)) + 2 if cfg.then_alone else 0
    feeder = make_feeder(cfg, device, mark, total + settle_max(cfg) + after)
    loader = None
    if DIST.launched:  # when torchrun stops a rank that hangs, it prints where (after the workers forked)
        faulthandler.register(signal.SIGTERM, chain=True)
    try:
        model = make_model(cfg, device, feeder.compute_stream)
        # fused Adam, one kernel for every parameter, goes with --compile only: the eager presets stay as measured
        fused = True if cfg.compile and device.type == "cuda" else None
        step = make_step(cfg, model, torch.optim.Adam(model.parameters(), fused=fused), device)
        compile_s = compile_step(cfg, step, device, feeder.compute_stream)
        source = feeder.source
        steps = Steps(cfg, device, feeder.compute_stream, drain_at=drain_at(cfg),
                      waited=(lambda: source.waited) if source else (lambda: 0.0), drain=source and source.drain)
        window = steps.window
        setup_s, t0 = process_age_s(), time.perf_counter()
        checks = train(cfg, feeder, step, mark, steps)
        t1 = time.perf_counter()
        if cfg.then_alone:
            log("the loader alone: the same pipeline (its workers, if any), feeding no step")
            loader = replace(cfg, steps=alone_steps(window.steps), loader_only=True, verify=False)
            rate = sustained(loader, feeder.source, lambda: next(feeder), device)
    finally:
        if feeder.source is not None:
            feeder.source.close()
    # where the process's time went: start-up (imports, device, model, workers, compile), warm-up, the
    # measured steps (every window it slid through), then the loader alone and the workers' shutdown
    seconds = dict(setup=setup_s, warmup=window.t0 - t0, measured=t1 - window.t0, after=time.perf_counter() - t1)
    record = dict(make_record(cfg, device, backend, window, checks), compile_s=compile_s, process_s=seconds)
    if loader is not None:  # the workers alone need the cores: after the run's workers have gone
        return [("run1", record), ("loader", loader_alone(loader, device, mark, backend, rate))]
    if not DIST.launched:
        return [("run1", record)]
    records = [None] * DIST.world_size
    dist.all_gather_object(records, record)  # note: a collective, so every rank has finished its steps
    return [("run1", combine(records))]


def make_record(cfg: Config, device: torch.device, backend: str, window: Window, checks: list) -> dict:
    mismatches = [(i, int((h != d).sum())) for i, h, d in ((i, h.cpu(), d.cpu()) for i, h, d in checks)
                  if not torch.equal(h, d)]  # (--gpu-decode's "host" sums are the decoder's, on the device)
    return dict(
        describe(cfg, device, backend), **window.figures(cfg),
        peak_mem_bytes=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        verified_batches=len(checks) if cfg.verify else None,
        verify_mismatches=[dict(step=i, samples=n, rank=DIST.rank) for i, n in mismatches] if cfg.verify else None,
    )


def describe(cfg: Config, device: torch.device, backend: str) -> dict:
    """What ran, where: the head of every record."""
    return dict(
        variant=cfg.variant + (" (data on device)" if cfg.data_on_gpu else ""),
        preset=cfg.variant, data_on_gpu=cfg.data_on_gpu, loader_only=cfg.loader_only, compute_key=cfg.compute_key,
        requested=cfg.requested,  # the pipeline as asked, before the device had its say (no pinning on a CPU)
        data_dir=str(cfg.photos.source) if cfg.photos else None, photos=cfg.photos.summary if cfg.photos else None,
        resized_cache=cfg.photos.resized if cfg.photos else None,
        bad_images_skipped=len(cfg.photos.bad_files()) if cfg.photos and cfg.photos.skipped else None,
        drained=0 if cfg.data_on_gpu else cfg.ahead, **run_head(cfg, device, backend))

# -----------------------------------------------------------------------------
# the loader alone: what the input pipeline delivers with no training step to feed


def sustained(cfg: Config, source: Loader, take, device: torch.device) -> tuple[float, float]:
    """Batches/s that `take` hands the loop, over the window and its second half: the queued batches
    dropped first, and the clock started as the first round after them lands."""
    source.drain()
    take()
    return rate_of(take, alone_batches(cfg.workers, cfg.steps), device)


def feed_rate(cfg: Config, device: torch.device, mark: Marker, copy: bool) -> tuple[float, float]:
    """Batches/s handed to the loop after a warm-up, sustained (see sustained): with copy, the feeder's
    device batches; without, the workers' host batches."""
    n = alone_batches(cfg.workers, cfg.steps)
    if copy:  # make_feeder adds the batches queued and in flight
        feeder = make_feeder(cfg, device, mark, cfg.warmup + n + 1)
        source, take = feeder.source, lambda: next(feeder)
    else:
        source = Loader(make_loader(cfg, cfg.warmup + cfg.queued + n + 2), cfg.queued, cfg.verify,
                        cfg.gpu_decode)
        take = lambda: next(source)  # noqa: E731
    try:
        at = drain_at(cfg)
        for _ in range(cfg.warmup if at is None else at):
            take()
        return sustained(cfg, source, take, device)
    finally:
        source.close()


def loader_alone(cfg: Config, device: torch.device, mark: Marker, backend: str,
                 rate: tuple[float, float] | None = None) -> dict:
    """--loader-only: the pipeline's batches/s to the device, copies included (`rate`, when --then-alone
    measured it after the window). When it pins (the pin-memory thread or the pool), also the workers
    alone, with no pinning and no copy: the two rates side by side say which stage caps the pipeline."""
    rate, second_half = rate or feed_rate(cfg, device, mark, copy=True)
    workers = None
    if cfg.pin_memory or cfg.pool:
        workers = feed_rate(replace(cfg, pin_memory=False, pool=False, verify=False), device, mark, copy=False)[0]
    return dict(describe(cfg, device, backend), loader_batches_per_s=rate, after_window=cfg.then_alone,
                loader_batches_per_s_second_half=second_half, workers_batches_per_s=workers)

# -----------------------------------------------------------------------------
# the command line: each setting a field and its flag (starvation.cli.setting)


AMP_DTYPES = {"none": None, "bf16": torch.bfloat16}  # --amp's choices


PIPELINE = "input pipeline (default: the preset's value)"


@dataclass
class Config(Measurement):
    variant: str = "baseline"
    workers: int = setting(0, PIPELINE, "DataLoader worker processes (baseline: 0)",
                           preset=True, loader=True, column=True, type=nonneg_int)
    pin_memory: bool = setting(False, PIPELINE, "DataLoader pin_memory (baseline: off)",
                               preset=True, loader=True, column=True)
    non_blocking: bool = setting(False, PIPELINE, "non_blocking copies (baseline: off)",
                                 preset=True, loader=True, column=True)
    streams: bool = setting(False, PIPELINE, "copy batch N+1 on a copy stream while batch N computes on a "
                            "compute stream (baseline: off)", preset=True, loader=True, column=True)
    prefetcher: bool = setting(False, PIPELINE, "wrap the DataLoader in a CUDA prefetching iterator (baseline: off)",
                               preset=True, loader=True, column=True)
    pool: bool = setting(False, PIPELINE, "workers write each batch into a slot of a page-locked shared-memory pool "
                         "and the copy reads it there: no pin-memory thread (baseline: off; presets pool, "
                         "fast-pool: on)", preset=True, loader=True, column=True)
    prefetch_depth: int = setting(1, PIPELINE, "batches the prefetcher keeps in flight (default: 1)", loader=True,
                                  type=positive_int)
    uint8: bool = setting(False, PIPELINE, "uint8 images, converted and normalized on the device (baseline: off)",
                          preset=True, column=True)
    batched_fetch: bool = setting(False, PIPELINE, "the dataset makes a whole batch per call, no collate "
                                  "(baseline: off)", preset=True, loader=True, column=True)
    persistent_workers: bool = setting(False, PIPELINE, "DataLoader persistent_workers; needs --workers "
                                       "(baseline: off)", preset=True, loader=True)
    prefetch_factor: int | None = setting(None, PIPELINE, "batches queued per worker; needs --workers (default: "
                                          "DataLoader's, 2)", preset=True, loader=True, type=positive_int)
    jpeg: bool = setting(False, PIPELINE, "real photos: the workers decode JPEG files (--data-dir) to uint8 "
                         "images, instead of making random ones; needs --uint8 (baseline: off)",
                         preset=True, loader=True, column=True)
    data_dir: str | None = setting(None, PIPELINE, "--jpeg's folder of JPEG files, any sizes, resized and cropped "
                                   "to --img-size; nothing is written there (default: made once from "
                                   "scikit-image's sample photos, in ~/.cache/gpu-starvation)", loader=True,
                                   metavar="DIR")
    gpu_decode: bool = setting(False, PIPELINE, "--jpeg: the workers read the files' bytes only, and the batch is "
                               "decoded on the device (nvjpeg), on the copy stream (baseline: off)",
                               preset=True, loader=True, column=True)
    skip_bad_images: bool = setting(False, PIPELINE, "--jpeg: a file that does not decode is counted and the next "
                                    "one taken (default: the run stops on it, naming it, exit 3)", loader=True)
    resized_cache: bool = setting(False, PIPELINE, "--jpeg --data-dir: read a copy of the folder, each photo's "
                                  "shorter side resized to --img-size (JPEG q90), written once under "
                                  "~/.cache/gpu-starvation and reused while the folder's files are unchanged; "
                                  "nothing is written into the folder (default: off)", loader=True)
    max_image_pixels: int | None = setting(None, PIPELINE, "--jpeg: a file whose header claims more pixels is "
                                           f"refused before it is decoded (default: {photos.MAX_PIXELS:,}, PIL's)",
                                           loader=True, type=positive_int, metavar="N")
    data_on_gpu: bool = setting(False, PIPELINE, "the ceiling: the variant's step (its --uint8, --amp, "
                                "--channels-last) on one batch resident on the device, no loader")
    loader_only: bool = setting(False, PIPELINE, "no training step: the input pipeline's batches/s to the device, "
                                "copies included, and, when it pins, the workers' alone (no pinning, no copy); "
                                "compare with the ceiling")
    then_alone: bool = setting(False, PIPELINE, "after the window, the loader alone in the same process, on the same "
                               "workers, as --loader-only measures it; the window's record is named run1 and the "
                               "loader's loader (see --json)")
    amp: str = setting("none", COMPUTE, "autocast dtype (baseline: none)", preset=True, column=True,
                       choices=tuple(AMP_DTYPES))
    channels_last: bool = setting(False, COMPUTE, "channels_last model and input (baseline: off)", preset=True,
                                  column=True)
    compile: bool = setting(False, COMPUTE, "torch.compile the model (its backward compiles with it), fused Adam "
                            "where the device has it; compiled before the warm-up, and the record says how long it "
                            "took (baseline: off)", preset=True, column=True)
    batch_size: int = setting(64, COMPUTE, "images per batch (default: 64; without a GPU: 8)", cpu=8,
                              type=positive_int)
    img_size: int = setting(512, COMPUTE, "image height and width (default: 512; without a GPU: 64)", cpu=64,
                            type=positive_int)
    warmup: int | None = setting(None, COMPUTE, "steps before the clock starts, which drop the batches the workers "
                                 "queued ahead (default: 10 + workers x prefetch factor)", type=nonneg_int)
    steps: int = setting(100, COMPUTE, "measured steps; a warning says when the window's second half ran more "
                         f"than {FELL_BEHIND:.0%}% slower than the whole (default: 100; without a GPU: 5)", cpu=5,
                         type=positive_int)
    settle: int | None = setting(None, COMPUTE, f"while the window's halves differ by more than "
                                 f"{SETTLE_TOLERANCE:.0%}%, slide it half a window later, up to N steps; 0, or a "
                                 "profiler, keeps it fixed (default: half of --steps, one slide)",
                                 type=nonneg_int, metavar="N")
    verify: bool = setting(False, MEASUREMENT, "check every measured batch: host checksum before the copy == "
                           "checksum of what the step reads on the device; a mismatch exits 1")
    dist_timeout: int = setting(120, MEASUREMENT, "under torchrun: a rank that has not checked in for its step's "
                                "compute S seconds after rank 0 is named, and the job exits 4 (default: 120)",
                                type=positive_int, metavar="S")
    inject_fault: str | None = setting(None, MEASUREMENT, argparse.SUPPRESS,
                                       choices=("worker-crash", "rank-exit", "rank-hang"))
    given: tuple = ()  # the pipeline flags given explicitly, so that warnings name only what was asked
    photos: "Photos | None" = None  # --jpeg: the files, found (or made) before the run
    requested: dict = field(default_factory=dict)  # the preset's settings as asked, before main() fits them

    @property
    def compute_key(self) -> str:
        """What the ceiling must share with a variant: everything that runs on the device."""
        parts = ["uint8" if self.uint8 else "fp32", self.amp if self.amp != "none" else None,
                 "channels-last" if self.channels_last else None, "compiled" if self.compile else None]
        return "+".join(p for p in parts if p)

    @property
    def queued(self) -> int:
        """Batches the DataLoader asks its workers for before the loop takes them."""
        return self.workers * (self.prefetch_factor or 2)

    @property
    def ahead(self) -> int:
        """Batches made before the loop takes them, which the drain drops: the workers' queue, and with
        --gpu-decode the batches decoded ahead of the loop."""
        return self.queued + (photos.DECODE_AHEAD if self.gpu_decode else 0)


# what a preset sets: the baseline's values, which each preset changes
DEFAULTS = {f.name: f.default for f in fields(Config) if f.metadata.get("preset")}

def list_variants() -> str:
    return "\n".join(preset_table(Config, PRESETS, DEFAULTS) + [
        "",
        "--pool goes with any preset that has workers (async and after, the beyond-the-study ones included);",
        "pool and fast-pool are prefetch and fast with it. Each preset's ceiling: --variant NAME --data-on-gpu.",
        "", "run_all.sh --variants takes these groups (ceiling-X: X with --data-on-gpu; ceiling: prefetch's):"]
        + [f"  {name}: {names}" for name, names in GROUPS.items()])


def build_parser() -> argparse.ArgumentParser:
    p = preset_parser("train.py", __doc__, Config, PRESETS, "preset for one step of the study; explicit flags "
                      "override it (default: the furthest step of the study that a flag names: --pool, "
                      "--prefetcher, --streams, --pin-memory or --non-blocking, --workers; else baseline)", None,
                      GROUPS)
    # run_all.sh's ceilings: the flags after its -- go to every variant, and a ceiling leaves out, saying so,
    # those that shape an input pipeline it does not have (by hand, --data-on-gpu refuses them)
    p.add_argument("--drop-pipeline-flags", action="store_true", help=argparse.SUPPRESS)
    p.not_settings.add("drop_pipeline_flags")
    return p


def parse_config(argv: list[str] | None = None) -> Config:
    parser = build_parser()
    args, pipeline_given, settings_given = parse_preset_args(parser, DEFAULTS, list_variants, argv)
    check_launcher(parser)
    asked = pipeline_given.get
    if args.variant is None:  # the study's steps are cumulative: --streams is the streams step, pinned
        settings_given["variant"] = next((step for flag, step in STEP_OF_FLAG if asked(flag)), "baseline")
    preset = PRESETS[settings_given["variant"]][0]
    if bool(asked("streams")) != bool(asked("prefetcher")):
        preset = dict(preset, streams=False, prefetcher=False)  # one overlap replaces the other
    if asked("pool") and "pin_memory" not in pipeline_given:
        preset = dict(preset, pin_memory=False)  # the pool's slots are already page-locked
    cfg = Config(**{**DEFAULTS, **preset, **pipeline_given}, **settings_given, given=tuple(pipeline_given))
    small = fit_to_machine(cfg, settings_given)
    if cfg.warmup is None:
        cfg.warmup = 10 + (0 if cfg.data_on_gpu else cfg.ahead)
    if cfg.settle is None:  # one slide: a window still moving after it is reported, not chased
        cfg.settle = cfg.steps // 2
    resolve_window(cfg, settings_given)
    check_measurement(parser, cfg, settings_given)
    check_combinations(parser, cfg, args, pipeline_given)
    if small:
        log(small)
    return cfg


def check_combinations(parser: argparse.ArgumentParser, cfg: Config, args: argparse.Namespace,
                       pipeline_given: dict) -> None:
    """What parses but cannot run (a value, or flags that do not go together): one line, exit 2."""
    if cfg.batch_size < 2:
        parser.error(f"--batch-size {cfg.batch_size}: BatchNorm in training needs 2 or more images per batch")
    if cfg.pool and cfg.pin_memory:
        parser.error("--pool and --pin-memory both pin the batches: the pool's slots are page-locked already, so "
                     "drop --pin-memory (or --no-pool for the pin-memory thread)")
    if cfg.loader_only and (cfg.data_on_gpu or cfg.verify or cfg.profile != "none" or DIST.launched):
        parser.error("--loader-only measures one process's input pipeline with no training step: drop "
                     "--data-on-gpu, --verify and --profile, and run it without torchrun")
    if cfg.then_alone and (cfg.loader_only or cfg.data_on_gpu or cfg.profile != "none" or DIST.launched):
        parser.error("--then-alone measures the loader after a training window, in one process: drop --loader-only, "
                     "--data-on-gpu and --profile, and run it without torchrun")
    if cfg.then_alone and cfg.json is not None and "{}" not in cfg.json:
        parser.error(f"--json {cfg.json}: with --then-alone the run writes two records: put {{}} in the path, which "
                     "becomes run1 (the window) and loader")
    if cfg.loader_only and "compile" in pipeline_given:
        parser.error("--compile compiles the training step, and --loader-only runs none: drop one of them")
    if cfg.streams and cfg.prefetcher:
        parser.error("--streams and --prefetcher are two ways to do the same overlap: pick one "
                     "(--no-prefetcher or --no-streams)")
    if cfg.workers == 0 and (cfg.prefetch_factor is not None or cfg.persistent_workers):
        queue = " and ".join(flag for flag, on in (("--prefetch-factor", cfg.prefetch_factor is not None),
                                                  ("--persistent-workers", cfg.persistent_workers)) if on)
        asked = {"prefetch_factor", "persistent_workers"} & set(pipeline_given)
        parser.error(f"--workers 0: {queue} " + ("need worker processes" if "and" in queue else "needs worker "
                     "processes") + ("" if asked else f" (preset {cfg.variant} sets them)") + ": add --workers N")
    check_ranks(parser, cfg)
    check_workers(parser, cfg.workers)
    if cfg.data_on_gpu and cfg.verify:
        parser.error("--verify checks copies, and --data-on-gpu makes none: drop one of them")
    loader = [f for f in fields(Config) if f.metadata.get("loader") and getattr(args, f.name) not in (None, False)]
    loader_flags = [f"--{f.name.replace('_', '-')}" for f in loader]
    if cfg.data_on_gpu and loader and args.drop_pipeline_flags:
        log(f"{' '.join(loader_flags)} left out: the ceiling (--data-on-gpu) has no input pipeline for them to shape")
        for f in loader:
            setattr(cfg, f.name, f.default)
        loader_flags = []
    check_photos(parser, cfg)
    if cfg.data_on_gpu and loader_flags:
        one = len(loader_flags) == 1
        parser.error(f"{' '.join(loader_flags)} shape{'s' * one} the input pipeline, and --data-on-gpu has none: drop "
                     f"{'it' if one else 'them'} (the ceiling keeps what runs on the device: --uint8, --amp, "
                     "--channels-last)")


def check_photos(parser: argparse.ArgumentParser, cfg: Config) -> None:
    """--jpeg: its folder's files, found before anything runs (the default set made on first use)."""
    if cfg.data_dir is not None and not cfg.jpeg:
        parser.error("--data-dir is the folder --jpeg reads: add --jpeg (or a jpeg preset)")
    if cfg.max_image_pixels is not None and not cfg.jpeg:
        parser.error("--max-image-pixels guards --jpeg's files: add --jpeg (or a jpeg preset)")
    if cfg.jpeg and not cfg.uint8:
        parser.error("--jpeg decodes to uint8 images: add --uint8")
    if cfg.gpu_decode and not cfg.jpeg:
        parser.error("--gpu-decode decodes --jpeg's files: add --jpeg")
    if cfg.gpu_decode and cfg.skip_bad_images:
        parser.error("--skip-bad-images needs decoding on the CPU, in the workers: the GPU decodes a whole batch "
                     "at once (drop --gpu-decode)")
    if not cfg.jpeg or cfg.data_on_gpu:
        return
    if cfg.resized_cache and not cfg.data_dir:
        parser.error("--resized-cache copies --data-dir's photos at --img-size: add --data-dir DIR (the default "
                     "set is made at --img-size already)")
    max_pixels = cfg.max_image_pixels or photos.MAX_PIXELS
    try:
        folder, made = (Path(cfg.data_dir), False) if cfg.data_dir else photos.default_set(cfg.img_size)
        resized = None
        if cfg.resized_cache:  # the first pass decodes and resizes every photo once, on every CPU it may use
            copy, made_now, seconds = photos.resized_copy(folder, photos.find_photos(folder)[0], cfg.img_size,
                                                          max_pixels, cfg.skip_bad_images, usable_cpus())
            resized = dict(source=str(folder), folder=str(copy), made=made_now, seconds=round(seconds, 2))
            folder = copy
        cfg.photos = Photos(folder, made, cfg.skip_bad_images, max_pixels, resized)
    except ValueError as e:
        parser.error(f"--data-dir {e}" if cfg.data_dir else f"--jpeg: {e}")
    except photos.BadImage as e:  # met while making the resized copy
        parser.error(f"--resized-cache: {e}")


def summary_line(r: dict) -> str:
    if r["loader_only"]:
        workers = r["workers_batches_per_s"]
        return (f"{r['variant']}, loader alone: {r['loader_batches_per_s']:.2f} batches/s to the device (second half "
                f"{r['loader_batches_per_s_second_half']:.2f})"
                + (f" | workers alone, no pinning or copy: {workers:.2f} batches/s" if workers else ""))
    gpus = f" on {r['world_size']} ranks" if "ranks" in r else ""
    return (f"{r['variant']}{gpus}: " + rate_line(r, "steps", "step", "step", "waiting for data") + window_note(r)
            + (rank_lines(r) if "ranks" in r else ""))


def window_note(r: dict) -> str:
    """The summary's note on a window that slid while its halves disagreed ("" when it did not)."""
    if not r.get("slid_steps"):
        return ""
    first, second = r["steps_per_s_halves"]
    return (f" | window slid {r['slid_steps']} steps " + ("to settle" if r["settled"] else
            f"and its halves still differ ({first:.2f} vs {second:.2f} steps/s): not a steady state"))


def measured(cfg: Config) -> str:
    """What the window holds, for the run's first line."""
    if cfg.loader_only:
        return f"{cfg.steps} batches"
    if timed(cfg) and cfg.min_steps < cfg.steps:
        return f"a window of {cfg.window_s:g} s ({cfg.min_steps}-{cfg.steps} steps)"
    return f"{cfg.steps} steps"


def warmup_why(cfg: Config) -> str:
    """Why the run takes the steps it takes beyond --steps, for its first line."""
    why = []
    if drain_at(cfg) is not None:
        why.append(f"the {cfg.ahead} batches " + ("queued and decoded" if cfg.gpu_decode else "the workers queue")
                   + " ahead are dropped in it, so the clock starts on what they sustain")
    if settle_max(cfg):
        sooner = ", in proportion if the window closes sooner," * timed(cfg)
        why.append(f"up to {settle_max(cfg)} more{sooner} while the window's halves differ by more than "
                   f"{SETTLE_TOLERANCE:.0%}")
    return "; ".join(why) or "a fixed window"


def main(cfg: Config) -> int:
    cfg.requested = {k: getattr(cfg, k) for k in DEFAULTS}  # before the device has its say (below)
    device = pick_device(cfg.device)
    if device.type == "cpu" and cfg.pin_memory:  # nothing to pin for: the record keeps what was asked
        if "pin_memory" in cfg.given:
            warn("--pin-memory without an accelerator: ignored")
        cfg.pin_memory = False
    if device.type == "cuda" and cfg.non_blocking and not (cfg.pin_memory or cfg.pool or cfg.data_on_gpu):
        warn("--non-blocking without --pin-memory: copies from pageable memory are synchronous in PyTorch")
    if DIST.launched:
        init_distributed(device, cfg.workers, cfg.dist_timeout)
    share_cpus(DIST.local_world_size * (1 + cfg.workers))  # threads on purpose: see share_cpus
    log(f"{cfg.variant}{' (data on device)' if cfg.data_on_gpu else ''}{', loader alone' if cfg.loader_only else ''}: "
        f"{measured(cfg)} measured after {cfg.warmup} warm-up "
        f"({warmup_why(cfg)}){', then the loader alone' * cfg.then_alone}, "
        f"batch {cfg.batch_size}x3x{cfg.img_size}x{cfg.img_size} on {device}"
        + (f", rank {DIST.rank} of {DIST.world_size}" if DIST.launched else ""))
    if cfg.photos is not None:
        log(cfg.photos.line(cfg.img_size))
    records = run_or_exit(run, cfg, device)  # (a file that does not decode is a known failure: exit 3)
    if isinstance(records, int):
        return records
    if cfg.photos is not None and cfg.photos.skipped is not None and DIST.rank == 0:
        bad = cfg.photos.bad_files()
        log(f"--skip-bad-images: skipped {len(bad)} of {len(cfg.photos.files)} files, which do not decode"
            + (": " + ", ".join(photos.shown(f.name) for f in bad[:5]) + (", ..." if len(bad) > 5 else "")
               if bad else ""))
    if DIST.launched:
        dist.destroy_process_group()
    if DIST.rank != 0:  # rank 0 speaks for the job; every rank has the same record, and exit status
        return 1 if records[0][1]["verify_mismatches"] else 0
    where = lambda m: f"rank {m['rank']}, step {m['step']}" if DIST.launched else f"step {m['step']}"  # noqa: E731
    status = 0
    for name, record in records:
        path = cfg.json.replace("{}", name) if cfg.json and cfg.then_alone else None
        status = max(status, finish(record, cfg, summary_line(record), [
            f"verify: {where(m)}: {m['samples']} of {cfg.batch_size} samples on the device differ from the batch "
            "loaded on the host" for m in record.get("verify_mismatches") or []],
            f"verify: {record.get('verified_batches')} batches, every one identical on host and device", path=path,
            said=name != "run1"))
    return status


if __name__ == "__main__":
    sys.exit(guarded(lambda: main(parse_config())))
