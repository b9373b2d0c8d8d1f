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
    pool       --pool (beyond the study)    make_feeder (starvation/pool.py: training_pool, PoolDataset, PoolLoader)
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
import functools
import os
import signal
import sys
import time
import warnings
from collections import deque
from dataclasses import replace

import starvation.runtime  # noqa: F401  (first: without torch it says in one line how to get it)
import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import BatchSampler, DataLoader

from starvation.cli import check_launcher, check_measurement, fit_to_machine, parse_preset_args, preset_parser, \
    preset_table, refuse, resolve_window
from starvation.data import Batch, BatchedImages, CeilingFeeder, Endless, Images, Loader, Normalize, as_is, moved
from starvation.ddp import check_in, combine, init_distributed, rank_fault, rank_lines
from starvation.folder import BadImage
from starvation.measure import (Steps, Window, alone_after, drain_at, finish, loader_rates, rate_line, run_head,
                                schedule, sustained, window_note)
from starvation.pool import PoolDataset, PoolLoader, SharedPool, TaggedBatches, training_pool
from starvation.profiling import Marker, nvtx_backend
from starvation.runtime import (DIST, checksum, current_stream, device_sync, die_with_parent, guarded, log, new_stream,
                                pick_device, process_age_s, run_or_exit, share_cpus, warn)
from starvation.settings import AMP_DTYPES, TRAIN_DEFAULTS, TrainConfig, check_train, drop_pipeline_flags
from starvation.sources import RandomImages, open_photos, photo_source
from starvation.survey import auto_cpu_decoded, survey
from starvation.thresholds import THREAD_BUSY

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


def start_worker(nice: int, worker_id: int) -> None:
    """A worker's first act: it dies with the run (die_with_parent); with --worker-nice it yields the cores
    to the loop's threads, whose late kernel launches would leave the GPU idle."""
    die_with_parent()
    if nice:
        os.nice(nice)


def random_images(cfg: TrainConfig):
    """The study's source (starvation/sources.py has the photos'): n random images a dataset."""
    cls = BatchedFakeDataset if cfg.batched_fetch else FakeDataset
    return RandomImages(cfg, lambda: cls(cfg.img_size, cfg.uint8, cfg.inject_fault))


def make_loader(cfg: TrainConfig, source: RandomImages, pool: SharedPool | None = None) -> DataLoader:
    """Batches without end (Endless: the measurement says when the loop stops); under torchrun each rank takes
    its own shard, as DistributedSampler would deal it."""
    dataset = source.dataset()
    if pool is not None:
        dataset = PoolDataset(dataset, pool, cfg.batched_fetch, cfg.verify)
    # note: the seed differs per rank, or every rank's workers would draw the same images
    kwargs = dict(generator=torch.Generator().manual_seed(cfg.seed + DIST.rank))
    batches = BatchSampler(Endless(DIST.rank, DIST.world_size), cfg.batch_size, drop_last=True)
    kwargs["batch_sampler"] = TaggedBatches(batches) if pool is not None else batches
    kwargs["num_workers"] = cfg.workers
    if cfg.workers:
        kwargs["worker_init_fn"] = functools.partial(start_worker, cfg.worker_nice)
    if cfg.pin_memory:
        kwargs["pin_memory"] = True
    if cfg.batched_fetch or pool is not None or source.encoded:
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


def issue_copy(cfg: TrainConfig, device: torch.device, mark: Marker, stream, host: Batch, source: Loader) -> Batch:
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

    def __init__(self, cfg: TrainConfig, device: torch.device, mark: Marker, source: Loader):
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

    def __init__(self, cfg: TrainConfig, device: torch.device, mark: Marker, source: Loader):
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
# into page-locked shared memory, so no pin-memory thread copies it once more), the photos (--jpeg, a source
# of starvation/sources.py: its dataset, its slots, its stage before the copy) and the ceiling
# (--data-on-gpu) plug in here; their code is the package's


def make_feeder(cfg: TrainConfig, source: RandomImages, device: torch.device,
                mark: Marker) -> Feeder | Prefetcher | CeilingFeeder:
    if cfg.data_on_gpu:
        return CeilingFeeder(cfg.batch_size, cfg.img_size, cfg.uint8, cfg.seed, device)
    pool = training_pool(cfg, device, source) if cfg.pool else None
    loader = None
    try:
        batches = make_loader(cfg, source, pool)
        loader = (PoolLoader(pool, batches, cfg.queued, cfg.verify, source.encoded, device) if pool is not None
                  else Loader(batches, cfg.queued, cfg.verify, source.encoded))
        loader = source.before_copy(loader, device)
        cls = Streams if cfg.streams else Prefetcher if cfg.prefetcher else Feeder
        return cls(cfg, device, mark, loader)
    except BaseException:
        if loader is not None:
            loader.close()  # its workers, and the pool with them
        elif pool is not None:
            pool.close()
        raise

# -----------------------------------------------------------------------------
# the model and the step


def make_model(cfg: TrainConfig, device: torch.device, compute_stream) -> torch.nn.Module:
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


def make_step(cfg: TrainConfig, model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device):
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


def compile_step(cfg: TrainConfig, step, device: torch.device, compute_stream) -> float | None:
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


# the loop: "Batch i" holds "get batch", "copy batch" and "Compute"; nothing in it waits for the device,
# so the CPU runs ahead. Warm-up, the drop of the queued batches, the clock, the capture and the window's
# slide are the measurement's (Steps)


def train(cfg: TrainConfig, feeder, step, mark: Marker, steps: Steps) -> list:
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


def run(cfg: TrainConfig, device: torch.device, source: RandomImages) -> list[tuple[str, dict]]:
    """The window's record (run1), then with --then-alone the loader's (loader), each as (name, record)."""
    torch.manual_seed(cfg.seed)
    backend = nvtx_backend(cfg.nvtx)
    mark = Marker(backend, cfg.profile == "torch", f" (rank {DIST.rank})" if DIST.launched else "")
    feeder = make_feeder(cfg, source, device, mark)
    alone = None
    if DIST.launched:  # when torchrun stops a rank that hangs, it prints where (after the workers forked)
        faulthandler.register(signal.SIGTERM, chain=True)
    try:
        model = make_model(cfg, device, feeder.compute_stream)
        # fused Adam, one kernel for every parameter, goes with --compile only: the eager presets stay as measured
        fused = True if cfg.compile and device.type == "cuda" else None
        step = make_step(cfg, model, torch.optim.Adam(model.parameters(), fused=fused), device)
        compile_s = compile_step(cfg, step, device, feeder.compute_stream)
        loader = feeder.source
        steps = Steps(cfg, device, feeder.compute_stream, drain_at=drain_at(cfg),
                      waited=(lambda: loader.waited) if loader else (lambda: 0.0), drain=loader and loader.drain)
        window = steps.window
        setup_s, t0 = process_age_s(), time.perf_counter()
        checks = train(cfg, feeder, step, mark, steps)
        t1 = time.perf_counter()
        if cfg.then_alone:  # the same pipeline goes on, its queue dropped, with no step to feed
            log("the loader alone: the same pipeline (its workers, if any), feeding no step")
            alone = alone_after(cfg, window)
            rate = sustained(alone, feeder.source, lambda: next(feeder), device)
    finally:
        if feeder.source is not None:
            feeder.source.close()
    # where the process's time went: start-up (imports, device, model, workers, compile), warm-up, the
    # measured steps (every window it slid through), then the loader alone and the workers' shutdown
    seconds = dict(setup=setup_s, warmup=window.t0 - t0, measured=t1 - window.t0, after=time.perf_counter() - t1)
    record = dict(make_record(cfg, source, device, backend, window, checks), compile_s=compile_s, process_s=seconds,
                  decode_thread=loader.thread_figures(window.t0, t1) if loader else None)
    if alone is not None:  # the workers alone need the cores: after the run's workers have gone
        return [("run1", record), loader_alone(alone, device, source, backend, rate)]
    if not DIST.launched:
        return [("run1", record)]
    records = [None] * DIST.world_size
    dist.all_gather_object(records, record)  # note: a collective, so every rank has finished its steps
    return [("run1", combine(records))]


def make_record(cfg: TrainConfig, source: RandomImages, device: torch.device, backend: str, window: Window,
                checks: list) -> dict:
    mismatches = [(i, int((h != d).sum())) for i, h, d in ((i, h.cpu(), d.cpu()) for i, h, d in checks)
                  if not torch.equal(h, d)]  # (--gpu-decode's "host" sums are the decoder's, on the device)
    return dict(
        describe(cfg, source, device, backend), **window.figures(cfg),
        peak_mem_bytes=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        verified_batches=len(checks) if cfg.verify else None,
        verify_mismatches=[dict(step=i, samples=n, rank=DIST.rank) for i, n in mismatches] if cfg.verify else None,
    )


def describe(cfg: TrainConfig, source: RandomImages, device: torch.device, backend: str) -> dict:
    """What ran, where: the head of every record."""
    return dict(
        variant=cfg.variant + (" (data on device)" if cfg.data_on_gpu else ""),
        preset=cfg.variant, data_on_gpu=cfg.data_on_gpu, loader_only=cfg.loader_only, compute_key=cfg.compute_key,
        requested=cfg.requested,  # the pipeline as asked, before the device had its say (no pinning on a CPU)
        **source.record(), drained=0 if cfg.data_on_gpu else cfg.ahead, **run_head(cfg, device, backend))

def loader_alone(cfg: TrainConfig, device: torch.device, source: RandomImages, backend: str,
                 rate: tuple[float, float] | None = None) -> tuple[str, dict]:
    """--loader-only (or --then-alone's second record, its rate measured after the window): the input
    pipeline's batches/s to the device, and the workers' alone (measure.loader_rates, which owns the loop)."""
    mark = Marker(backend, False, "")

    def feed(c: TrainConfig, copy: bool) -> tuple[Loader, object]:
        """With copy, the feeder's device batches; without, the workers' host batches."""
        if copy:
            feeder = make_feeder(c, source, device, mark)
            return feeder.source, lambda: next(feeder)
        loader = Loader(make_loader(c, source), c.queued, c.verify, source.encoded)
        return loader, lambda: next(loader)
    return "loader", dict(describe(cfg, source, device, backend), **loader_rates(cfg, device, feed, rate))

# -----------------------------------------------------------------------------
# the command line: each flag is a field of TrainConfig (starvation/settings.py), which the presets fill


def list_variants() -> str:
    return "\n".join(preset_table(TrainConfig, PRESETS, TRAIN_DEFAULTS) + [
        "",
        "--pool goes with any preset that has workers (async and after, the beyond-the-study ones included);",
        "pool and fast-pool are prefetch and fast with it. Each preset's ceiling: --variant NAME --data-on-gpu.",
        "", "run_all.sh --variants takes these groups (ceiling-X: X with --data-on-gpu; ceiling: prefetch's):"]
        + [f"  {name}: {names}" for name, names in GROUPS.items()])


def build_parser() -> argparse.ArgumentParser:
    p = preset_parser("train.py", __doc__, TrainConfig, PRESETS, "preset for one step of the study; explicit flags "
                      "override it (default: the furthest step of the study that a flag names: --pool, "
                      "--prefetcher, --streams, --pin-memory or --non-blocking, --workers; else baseline)", None,
                      GROUPS)
    # run_all.sh's ceilings: the flags after its -- go to every variant, and a ceiling leaves out, saying so,
    # those that shape an input pipeline it does not have (by hand, --data-on-gpu refuses them)
    p.add_argument("--drop-pipeline-flags", action="store_true", help=argparse.SUPPRESS)
    p.not_settings.add("drop_pipeline_flags")
    return p


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    parser = build_parser()
    args, pipeline_given, settings_given = parse_preset_args(parser, TRAIN_DEFAULTS, list_variants, argv)
    check_launcher(parser)
    asked = pipeline_given.get
    if args.variant is None:  # the study's steps are cumulative: --streams is the streams step, pinned
        settings_given["variant"] = "jpeg-gpu" if settings_given.get("survey") else next(
            (step for flag, step in STEP_OF_FLAG if asked(flag)), "baseline")
    preset = PRESETS[settings_given["variant"]][0]
    if bool(asked("streams")) != bool(asked("prefetcher")):
        preset = dict(preset, streams=False, prefetcher=False)  # one overlap replaces the other
    if asked("pool") and "pin_memory" not in pipeline_given:
        preset = dict(preset, pin_memory=False)  # the pool's slots are already page-locked
    cfg = TrainConfig(**{**TRAIN_DEFAULTS, **preset, **pipeline_given}, **settings_given, given=tuple(pipeline_given))
    # resolved, then checked: each step makes a new config, and none is changed once made
    cfg, small = fit_to_machine(cfg, settings_given)
    cfg = replace(cfg, warmup=10 + (0 if cfg.data_on_gpu else cfg.ahead) if cfg.warmup is None else cfg.warmup,
                  # one slide: a window still moving after it is reported, not chased
                  settle=cfg.steps // 2 if cfg.settle is None else cfg.settle)
    cfg = resolve_window(cfg, settings_given)
    check_measurement(parser, cfg, settings_given)
    check_train(parser, cfg, args, pipeline_given)
    cfg = drop_pipeline_flags(cfg, args)  # (checked as asked: the ceiling's flags, then left out)
    if small:
        log(small)
    return cfg



def summary_line(r: dict) -> str:
    if r["loader_only"]:
        workers = r["workers_batches_per_s"]
        return (f"{r['variant']}, loader alone: {r['loader_batches_per_s']:.2f} batches/s to the device (second half "
                f"{r['loader_batches_per_s_second_half']:.2f})"
                + (f" | workers alone, no pinning or copy: {workers:.2f} batches/s" if workers else ""))
    gpus = f" on {r['world_size']} ranks" if "ranks" in r else ""
    return (f"{r['variant']}{gpus}: " + rate_line(r, "steps", "step", "step", "waiting for data") + window_note(r)
            + (rank_lines(r) if "ranks" in r else ""))


def prepare(cfg: TrainConfig, device: torch.device | None = None) -> RandomImages:
    """What the run reads, opened before it starts (the photos: the default set made on first use, a folder's
    files found, its resized copy made), as the source that make_feeder composes; a folder it cannot read is
    one line, exit 2. --cpu-decoded auto is given its N here, from the decoders' rates timed now on `device`:
    the source's cfg holds it."""
    try:
        found = open_photos(cfg)
    except ValueError as e:
        refuse("train.py", f"--data-dir {e}" if cfg.data_dir else f"--jpeg: {e}")
    except BadImage as e:  # met while making a copy (the resized one is made first, and holds no progressive file)
        refuse("train.py", f"{'--resized-cache' if cfg.resized_cache else '--baseline-copy'}: {e}")
    if found is None:
        return random_images(cfg)
    if cfg.cpu_decoded != "auto":
        return photo_source(cfg, found)
    n, said = auto_cpu_decoded(cfg, found, device or torch.device("cpu"))
    source = photo_source(replace(cfg, cpu_decoded=n), found)
    source.sized = said
    return source


def main(cfg: TrainConfig) -> int:
    device = pick_device(cfg.device)
    # the record keeps the settings as asked, before the device has its say (no pinning on a CPU)
    cfg = replace(cfg, requested={k: getattr(cfg, k) for k in TRAIN_DEFAULTS})
    if device.type == "cpu" and cfg.pin_memory:  # nothing to pin for
        if "pin_memory" in cfg.given:
            warn("--pin-memory without an accelerator: ignored")
        cfg = replace(cfg, pin_memory=False)
    if device.type == "cuda" and cfg.non_blocking and not (cfg.pin_memory or cfg.pool or cfg.data_on_gpu):
        warn("--non-blocking without --pin-memory: copies from pageable memory are synchronous in PyTorch")
    if cfg.survey:  # what the folder holds and each decoder's rate, and no run
        return survey(cfg, prepare(replace(cfg, cpu_decoded=0)).photos, device)
    source = prepare(cfg, device)
    cfg = source.cfg  # (with --cpu-decoded auto's N)
    if DIST.launched:
        init_distributed(device, cfg.workers, cfg.dist_timeout)
    share_cpus(DIST.local_world_size * (1 + cfg.workers))  # threads on purpose: see share_cpus
    log(f"{cfg.variant}{' (data on device)' if cfg.data_on_gpu else ''}{', loader alone' if cfg.loader_only else ''}: "
        f"{schedule(cfg)}{', then the loader alone' * cfg.then_alone}, "
        f"batch {cfg.batch_size}x3x{cfg.img_size}x{cfg.img_size} on {device}"
        + (f", rank {DIST.rank} of {DIST.world_size}" if DIST.launched else ""))
    for line in source.lines() if DIST.rank == 0 else []:
        log(line)
    # (a file that does not decode is a known failure: exit 3)
    records = run_or_exit(lambda c, d: [loader_alone(c, d, source, nvtx_backend(c.nvtx))] if c.loader_only
                          else run(c, d, source), cfg, device)
    if isinstance(records, int):
        return records
    for line in source.end_lines() if DIST.rank == 0 else []:
        log(line)
    if DIST.rank == 0 and (t := records[0][1].get("decode_thread")):
        each = f"the {t['threads']} decoding threads: each" if t["threads"] > 1 else "the decoding thread:"
        calls = (f", of which nvjpeg's calls {t['nvjpeg_ms_median']:.1f} ms (CPU {t['nvjpeg_cpu_ms_median']:.1f})"
                 if "nvjpeg_ms_median" in t else "")
        log(f"{each} busy {t['busy_share']:.0%} of the window, {t['busy_ms_median']:.1f} ms a batch "
            f"(median; CPU {t['cpu_ms_median']:.1f} ms){calls}" + ("; the decode's host work caps the path"
                                                                   if t["busy_share"] >= THREAD_BUSY else ""))
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
