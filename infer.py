"""
The case study's sequel: device-to-host transfer in batched inference. A DeepLabV3 segmentation model
runs on batches of random high-resolution images; each batch's per-pixel class scores (classes x H x W
floats a image) come back to the host, where output processing makes each image's class map and
class histogram. One preset per step of part 2, each a small change on top of the one before:

    python infer.py --variant baseline         # copy to pageable memory, process on the main thread
    python infer.py --variant streams          # workers, a reused pinned pool, copies on a side stream
    python infer.py --variant streams --outputs-on-gpu   # the ceiling: the same forward, outputs left on the GPU
    python infer.py --list-variants

The measurement is train.py's: warm-up batches first, then the window, which starts with the output
path empty and the device synchronized, and ends when the last measured batch has been processed on
the host. The images are made on the device once: the subject here is what comes back. NVTX ranges:
"Batch i" (blue) holds "Compute" (green) and "copy output" (yellow); "process output" (red) is on the
thread or process that does it. --verify checks that what the host processed is, to the bit, what the
model produced: a checksum taken on the device, on the stream that produced the output, against one
taken by the consumer of what it read.
"""
import argparse
import contextlib
import os
import queue
import sys
import time
from collections import deque
from dataclasses import dataclass, fields

import torch
import torch.multiprocessing as mp
import torchvision

from harness import (COMPUTE, MEASUREMENT, Marker, Measurement, SharedPool, check_measurement, checksum, device_sync,
                     finish, log, nonneg_int, nvtx_backend, parse_preset_args, pick_device, positive_int, preset_parser,
                     preset_table, rate_line, run_head, run_or_exit, setting, size, torch_profiler, warn,
                     window_figures)

OUTPUT = "output path (default: the preset's value)"
_WORKERS = dict(workers=4)
_POOL = dict(_WORKERS, pool=True)
_PINNED = dict(_POOL, pinned=True)
_STREAMS = dict(_PINNED, streams=True)
PRESETS = {
    "baseline": ({}, "copy to pageable memory (.cpu()), process on the main thread, then the next batch"),
    "workers": (_WORKERS, "+ output processing in worker processes (producer/consumer)"),
    "pool": (_POOL, "+ pre-allocated shared-memory output buffers, reused: no allocation or pickling a batch"),
    "pinned": (_PINNED, "+ page-locked buffers, non_blocking copies, handed over when their CUDA event completes"),
    "streams": (_STREAMS, "+ copies on a side stream, overlapping the next batch's forward"),
    "uint8": (dict(_STREAMS, uint8_out=True), "+ class map made on the GPU: 1 byte a pixel comes back (ours)"),
}


@dataclass
class Config(Measurement):
    variant: str = "baseline"
    workers: int = setting(0, OUTPUT, "output-processing worker processes; 0: the main thread (baseline: 0)",
                           True, True, True, type=nonneg_int)
    pool: bool = setting(False, OUTPUT, "copy into pre-allocated shared-memory buffers, reused (baseline: off)",
                         True, True, True)
    pinned: bool = setting(False, OUTPUT, "page-locked pool, non_blocking copies handed over on a CUDA event; "
                           "needs --pool (baseline: off)", True, True, True)
    streams: bool = setting(False, OUTPUT, "copies on a side stream, overlapping the next batch's forward; needs "
                            "--pinned (baseline: off)", True, True, True)
    uint8_out: bool = setting(False, OUTPUT, "argmax on the device: a uint8 class map comes back, not the class "
                              "scores (baseline: off)", True, column=True)
    outputs_on_gpu: bool = setting(False, OUTPUT, "the ceiling: the variant's forward (its --uint8-out), outputs "
                                   "left on the device: no copy, no processing")
    classes: int = setting(21, COMPUTE, "segmentation classes (default: 21)", type=positive_int)
    batch_size: int = setting(16, COMPUTE, "images per batch (default: 16)", type=positive_int)
    img_size: int = setting(512, COMPUTE, "image height and width (default: 512)", type=positive_int)
    warmup: int = setting(10, COMPUTE, "batches before the clock starts (default: 10)", type=nonneg_int)
    steps: int = setting(100, COMPUTE, "measured batches (default: 100)", type=positive_int)
    verify: bool = setting(False, MEASUREMENT, "check every batch: the checksum of what the host processed == the "
                           "checksum of the output on the device; a mismatch exits 1")
    # the classic bug, kept to show that --verify catches it: hand a buffer over before its copy is done
    unsafe_no_wait: bool = setting(False, MEASUREMENT, argparse.SUPPRESS)
    inject_fault: str | None = setting(None, MEASUREMENT, argparse.SUPPRESS, choices=("worker-crash",))

    @property
    def compute_key(self) -> str:
        return "segmentation, " + ("uint8 class map" if self.uint8_out else "fp32 scores") + " out"


DEFAULTS = {f.name: f.default for f in fields(Config) if f.metadata.get("preset")}

# -----------------------------------------------------------------------------
# the host side: what the consumer does with each batch's output


def process(out: torch.Tensor, classes: int, verify: bool) -> torch.Tensor | None:
    """Each image's class map and histogram, from scores (B, C, H, W) or a class map (B, H, W). Returns
    the checksum of what was read, for --verify."""
    read = checksum(out) if verify else None
    maps = out if out.dtype == torch.uint8 else out.argmax(dim=1).to(torch.uint8)
    torch.stack([torch.bincount(m.flatten(), minlength=classes) for m in maps])
    return read


def consume(tasks, results, slots, cfg: Config, backend: str) -> None:
    """An output worker: takes (batch, slot, tensor) tasks until None; hands back (batch, slot, checksum, when)."""
    torch.set_num_threads(1)
    mark = Marker(backend, False)
    while (task := tasks.get()) is not None:
        i, slot, out = task
        if cfg.inject_fault == "worker-crash":
            os._exit(9)  # test hook: a worker dying as under the out-of-memory killer
        with mark("process output", "red"):
            read = process(slots[slot] if slot is not None else out, cfg.classes, cfg.verify)
        results.put((i, slot, read, time.perf_counter()))


class WorkerDied(RuntimeError):
    pass


class Sink:
    """Where outputs go: copied to the host (pageable, or a slot of the pool, pinned or not, on the
    compute stream or a side one) and processed (on this thread, or by workers)."""

    def __init__(self, cfg: Config, shape: tuple, dtype: torch.dtype, mark: Marker, device: torch.device):
        self.cfg, self.mark, self.outstanding = cfg, mark, 0
        self.done: dict[int, tuple] = {}  # batch -> (checksum read, when processed)
        self.pending: deque = deque()     # (event, batch, slot): copies not yet known to be done
        self.pool = self.slots = None
        n = cfg.workers * 2 + 2  # each worker's task and the next, the one copying, the one handed over
        if cfg.pool:
            # note: made before the workers fork, so that they inherit the mapping
            self.pool = SharedPool("output pool", n, dict(slots=(shape, dtype)), device, pin=cfg.pinned,
                                   shrink=f"--workers shrinks it ({n} buffers = 2 x {cfg.workers} workers + 2)")
            self.slots, self.free = self.pool.slots, deque(range(n))
            log(f"output pool: {n} buffers, {size(self.pool.nbytes)}"
                + (", page-locked" if self.pool.pinned else ""))
        self.async_copies = self.pool is not None and self.pool.pinned  # pinned: asked for, and on a GPU
        self.procs = []
        if cfg.workers:
            ctx = mp.get_context("fork")  # the workers never touch CUDA, so forking after it is up is safe
            self.tasks, self.results = ctx.Queue(maxsize=cfg.workers * 2), ctx.Queue()
            self.procs = [ctx.Process(target=consume, daemon=True, args=(
                self.tasks, self.results, self.slots, cfg, mark.backend)) for _ in range(cfg.workers)]
            for p in self.procs:
                p.start()

    def put(self, i: int, out: torch.Tensor, copy_stream, compute_stream) -> None:
        """Copy batch i's output to the host and hand it to its consumer."""
        cfg = self.cfg
        if not cfg.pool:
            self.hand(i, None, out.cpu())  # note: pageable, so a synchronous copy: the CPU waits for the GPU
            return
        slot = self.take_slot()
        if not self.async_copies:  # pageable shared memory (or no accelerator): a synchronous copy too
            self.slots[slot].copy_(out)
            self.hand(i, slot, None)
            return
        stream = copy_stream if cfg.streams else compute_stream
        if cfg.streams:
            stream.wait_stream(compute_stream)  # the copy reads the output the forward wrote
        with torch.cuda.stream(stream):
            self.slots[slot].copy_(out, non_blocking=True)
        if cfg.streams:
            out.record_stream(stream)  # the allocator must not reuse the output before its copy is done
        if cfg.unsafe_no_wait:
            self.hand(i, slot, None)  # the bug: the consumer may read the buffer before the copy lands
            return
        self.pending.append((stream.record_event(), i, slot))
        while self.pending and self.pending[0][0].query():
            self.hand_oldest()

    def hand_oldest(self) -> None:
        event, i, slot = self.pending.popleft()
        event.synchronize()
        self.hand(i, slot, None)

    def hand(self, i: int, slot: int | None, out: torch.Tensor | None) -> None:
        self.outstanding += 1
        if not self.procs:
            with self.mark("process output", "red"):
                read = process(self.slots[slot] if slot is not None else out, self.cfg.classes, self.cfg.verify)
            self.finished(i, slot, read, time.perf_counter())
            return
        while True:
            try:
                self.tasks.put((i, slot, out), timeout=1.0)  # note: a tensor is moved to shared memory here
                break
            except queue.Full:
                self.check_workers()
                self.collect()
        self.collect()

    def finished(self, i: int, slot: int | None, read, when: float) -> None:
        self.done[i] = (read, when)
        self.outstanding -= 1
        if slot is not None:
            self.free.append(slot)

    def collect(self, block: bool = False) -> None:
        """Take what the workers finished; with block, wait for one."""
        while self.procs:
            try:
                self.finished(*self.results.get(timeout=1.0) if block else self.results.get_nowait())
                block = False
            except queue.Empty:
                if not block:
                    return
                self.check_workers()

    def take_slot(self) -> int:
        while not self.free:
            if self.pending:
                self.hand_oldest()  # its copy must land before a worker can give its buffer back
            else:
                self.collect(block=True)
        return self.free.popleft()

    def flush(self) -> None:
        """Every batch handed over and processed."""
        while self.pending:
            self.hand_oldest()
        while self.outstanding:
            self.collect(block=True)

    def check_workers(self) -> None:
        dead = [p for p in self.procs if not p.is_alive()]
        if dead:
            raise WorkerDied(f"an output worker died (exit code {dead[0].exitcode}): the out-of-memory killer is "
                             f"the usual cause; use fewer --workers ({self.cfg.workers}) or a smaller --batch-size")

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        if self.pool is not None:
            self.pool.close()

# -----------------------------------------------------------------------------
# the loop


def make_model(cfg: Config, device: torch.device) -> torch.nn.Module:
    model = torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None,
                                                               num_classes=cfg.classes, aux_loss=False)
    return model.to(device).eval()


def run(cfg: Config, device: torch.device) -> dict:
    torch.manual_seed(cfg.seed)
    backend = nvtx_backend(cfg.nvtx)
    mark = Marker(backend, cfg.profile == "torch")
    out_shape = (cfg.batch_size, cfg.img_size, cfg.img_size) if cfg.uint8_out else \
        (cfg.batch_size, cfg.classes, cfg.img_size, cfg.img_size)
    # note: the pool and the workers first, so that the workers fork with the pool mapped
    sink = None if cfg.outputs_on_gpu else Sink(cfg, out_shape, torch.uint8 if cfg.uint8_out else torch.float32,
                                                mark, device)
    try:
        model = make_model(cfg, device)
        g = torch.Generator(device=device).manual_seed(cfg.seed)
        images = torch.randn((cfg.batch_size, 3, cfg.img_size, cfg.img_size), device=device, generator=g)
        cuda = device.type == "cuda"
        compute_stream = torch.cuda.current_stream(device) if cuda else None
        copy_stream = torch.cuda.Stream(device) if cuda and cfg.streams else None
        total = cfg.warmup + cfg.steps
        capture_from = total - (cfg.profile_steps or cfg.steps)
        prof = torch_profiler(cfg, device, total, capture_from)
        device_checks, put_s = [], []  # put_s: the loop's time on the output path, each measured batch
        with torch.inference_mode(), prof if prof is not None else contextlib.nullcontext():
            for i in range(total):
                if i == cfg.warmup:
                    if sink is not None:
                        sink.flush()  # the window starts with the output path empty...
                    device_sync(device)  # ...and the device idle
                    t0 = time.perf_counter()
                if i == capture_from and cfg.profile == "nsys":
                    torch.cuda.profiler.start()
                with mark(f"Batch {i}", "blue"):
                    with mark("Compute", "green"):
                        out = model(images)["out"]
                        if cfg.uint8_out:
                            out = out.argmax(dim=1).to(torch.uint8)
                        if cfg.verify:
                            device_checks.append((i, checksum(out)))  # on the stream that produced it
                    if sink is not None:
                        t = time.perf_counter()
                        with mark("copy output", "yellow"):
                            sink.put(i, out, copy_stream, compute_stream)
                        if i >= cfg.warmup:
                            put_s.append(time.perf_counter() - t)
                del out
                if prof is not None:
                    prof.step()
            if sink is not None:
                sink.flush()
            device_sync(device)
            t1 = time.perf_counter()
        if cfg.profile == "nsys":
            torch.cuda.profiler.stop()
    finally:
        if sink is not None:
            sink.close()
    # when each measured batch's processing ended (workers finish out of order)
    ends = sorted(sink.done[i][1] for i in range(cfg.warmup, total)) if sink else None
    mismatches = [i for i, d in device_checks if not torch.equal(d.cpu(), sink.done[i][0])]
    return make_record(cfg, device, backend, t1 - t0, t0, ends, put_s or [0.0] * cfg.steps,
                       len(device_checks), mismatches, out_shape)


def make_record(cfg: Config, device: torch.device, backend: str, window: float, t0: float, ends: list | None,
                put_s: list[float], verified: int, mismatches: list[int], out_shape: tuple) -> dict:
    # the ceiling has no per-batch end on the host: the window shared out evenly
    ends = ends or [t0 + window * (k + 1) / cfg.steps for k in range(cfg.steps)]
    step_ms = [(b - a) * 1e3 for a, b in zip([t0] + ends[:-1], ends)]
    return dict(
        study="infer", variant=cfg.variant + (" (outputs on device)" if cfg.outputs_on_gpu else ""),
        preset=cfg.variant, data_on_gpu=cfg.outputs_on_gpu, loader_only=False, compute_key=cfg.compute_key,
        **run_head(cfg, device, backend),
        output_bytes_per_batch=0 if cfg.outputs_on_gpu else
        int(torch.Size(out_shape).numel()) * (1 if cfg.uint8_out else 4),
        # the loop's time on the output path (copy, hand-over, waiting for a free buffer or room in the workers'
        # queue, and processing when there are no workers): what train.py calls its data wait
        **window_figures(cfg, step_ms, put_s, window),
        verified_batches=verified if cfg.verify else None,
        verify_mismatches=[dict(step=i) for i in mismatches] if cfg.verify else None,
    )

# -----------------------------------------------------------------------------
# command line


def list_variants() -> str:
    return "\n".join(preset_table(Config, PRESETS, DEFAULTS)
                     + ["", "Each preset's ceiling: --variant NAME --outputs-on-gpu."])


def parse_config(argv: list[str] | None = None) -> Config:
    p = preset_parser(__doc__, Config, PRESETS, "preset for one step of part 2; explicit flags override it "
                      "(default: baseline)", "baseline")
    args, given, others = parse_preset_args(p, DEFAULTS, list_variants, argv)
    cfg = Config(**{**DEFAULTS, **PRESETS[args.variant][0], **given}, **others)
    check_measurement(p, cfg)
    if cfg.pinned and not cfg.pool:
        p.error("--pinned page-locks the pool's buffers: add --pool")
    if cfg.streams and not cfg.pinned:
        p.error("--streams overlaps non_blocking copies, which need page-locked buffers: add --pinned")
    if cfg.unsafe_no_wait and not cfg.pinned:
        p.error("--unsafe-no-wait skips the wait on a non_blocking copy: it needs --pinned")
    if cfg.outputs_on_gpu and (cfg.verify or set(given) - {"uint8_out"}):
        p.error("--outputs-on-gpu copies and processes nothing: drop --verify and the output-path flags "
                "(it keeps what runs on the device: --uint8-out)")
    return cfg


def summary_line(r: dict) -> str:
    out = r["output_bytes_per_batch"]
    return f"{r['variant']}: " + rate_line(r, "batches", "batch", "batch every", "loop on the output path",
                                           f"{size(out)} back per batch, " if out else "")


def main(cfg: Config) -> int:
    device = pick_device(cfg.device)
    log(f"{cfg.variant}{' (outputs on device)' if cfg.outputs_on_gpu else ''}: {cfg.steps} batches after "
        f"{cfg.warmup} warm-up, {cfg.batch_size}x3x{cfg.img_size}x{cfg.img_size} images on {device}")
    if cfg.unsafe_no_wait:
        warn("--unsafe-no-wait: buffers are handed over before their copies are known to be done (a bug, on purpose)")
    record = run_or_exit(run, cfg, device, stops=(WorkerDied,))
    if isinstance(record, int):
        return record
    bad = record["verify_mismatches"]
    return finish(record, cfg, summary_line(record), [
        f"verify: {len(bad)} of {record['verified_batches']} batches processed on the host differ from the output "
        f"on the device (batches {', '.join(str(m['step']) for m in bad[:10])})"] if bad else [],
        f"verify: {record['verified_batches']} batches, every one processed as the device produced it")


if __name__ == "__main__":
    sys.exit(main(parse_config()))
