"""
The case study's sequel: device-to-host transfer in batched inference. A DeepLabV3 segmentation model
runs on batches of random high-resolution images; each batch's per-pixel class scores (classes x H x W
floats a image) come back to the host, where output processing makes each image's class map and
class histogram. One preset per step of part 2, each a small change on top of the one before:

    python infer.py --variant baseline         # copy to pageable memory, process on the main thread
    python infer.py --variant streams          # workers, a reused pinned pool, copies on a side stream
    python infer.py --variant streams --outputs-on-gpu   # the ceiling: the same forward, outputs left on the GPU
    python infer.py --list-variants

The measurement is train.py's (starvation/measure.py: Steps owns warm-up, clock, capture, progress and
figures), with part 2's window: a Completions window counts batches processed on the host, from the
warm-up's last on, so that it opens and closes with the output path full, in whole rounds of the
workers; it closes after --window-s seconds once it holds --min-steps batches. --repeat N takes N
windows one after the other, which do not slide (their halves are judged all the same). The ceiling's
window counts forwards, the device synchronized at its start and end. The images are made on the device
once: the subject here is what comes back. NVTX ranges: "Batch i" (blue) holds "Compute" (green) and
"copy output" (yellow); "process output" (red) is on the thread or process that does it. --verify checks
that what the host processed is, to the bit, what the model produced: a checksum taken on the device, on
the stream that produced the output, against one taken by the consumer of what it read.
"""
import os
import queue
import sys
import time
from collections import deque
from dataclasses import replace

import starvation.runtime  # noqa: F401  (first: without torch it says in one line how to get it)
import torch
import torch.multiprocessing as mp
import torchvision

from starvation.cli import (check_launcher, check_measurement, check_workers, fit_to_machine, parse_preset_args,
                            preset_parser, preset_table, resolve_window)
from starvation.measure import Completions, Steps, Window, finish, halves_agree, rate_line, run_head, timed, window_record
from starvation.pool import SharedPool
from starvation.profiling import Marker, nvtx_backend
from starvation.runtime import (checksum, die_with_parent, guarded, log, pick_device, run_or_exit,
                                share_cpus, size, warn)
from starvation.settings import INFER_DEFAULTS, InferConfig, check_infer

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
# run_all.sh --study infer --variants: this group; "ceiling" is the baseline's forward with its outputs left on
# the device, "ceiling-X" variant X's
GROUPS = {"study": "baseline,workers,pool,pinned,streams,uint8,ceiling,ceiling-uint8"}
GROUPS["all"] = GROUPS["study"]



# -----------------------------------------------------------------------------
# the host side: what the consumer does with each batch's output


def class_map(scores: torch.Tensor) -> torch.Tensor:
    """argmax over the classes of scores (B, C, H, W), as a uint8 map (B, H, W), the first maximum winning
    as argmax's does. A running maximum, class by class, reads the scores in memory order: on the CPU it
    is about 4x faster than argmax(dim=1), whose strided reduction would make processing, not the output
    path, the subject."""
    best = scores[:, 0].clone()
    maps = torch.zeros(best.shape, dtype=torch.uint8)
    for c in range(1, scores.shape[1]):
        higher = scores[:, c] > best
        torch.maximum(best, scores[:, c], out=best)
        maps.masked_fill_(higher, c)
    return maps


def process(out: torch.Tensor, classes: int, verify: bool) -> torch.Tensor | None:
    """Each image's class map and histogram, from scores (B, C, H, W) or a class map (B, H, W). Returns
    the checksum of what was read, for --verify."""
    read = checksum(out) if verify else None
    maps = out if out.dtype == torch.uint8 else class_map(out)
    torch.stack([torch.bincount(m.flatten(), minlength=classes) for m in maps])
    return read


def consume(tasks, results, slots, cfg: InferConfig, backend: str) -> None:
    """An output worker: takes (batch, slot, tensor) tasks until None; hands back (batch, slot, checksum, when)."""
    die_with_parent()
    torch.set_num_threads(1)
    mark = Marker(backend, False)
    while (task := tasks.get()) is not None:
        i, slot, out = task
        if cfg.inject_fault == "worker-crash":
            os._exit(9)  # test hook: a worker dying as under the out-of-memory killer
        with mark("process output"):
            read = process(slots[slot] if slot is not None else out, cfg.classes, cfg.verify)
        results.put((i, slot, read, time.perf_counter()))


class WorkerDied(RuntimeError):
    pass


class Consumers:
    """Output processing: on the loop's thread, or by worker processes fed through a queue. Each batch
    handed over is processed once; a pool slot goes back to `free` when its batch has been."""

    def __init__(self, cfg: InferConfig, mark: Marker, slots, free: deque):
        self.cfg, self.mark, self.slots, self.free, self.outstanding = cfg, mark, slots, free, 0
        self.done: dict[int, tuple] = {}  # batch -> (checksum read, when processed)
        self.procs = []
        if cfg.workers:
            ctx = mp.get_context("fork")  # the workers never touch CUDA, so forking after it is up is safe
            self.tasks, self.results = ctx.Queue(maxsize=cfg.workers * 2), ctx.Queue()
            self.procs = [ctx.Process(target=consume, daemon=True, args=(
                self.tasks, self.results, slots, cfg, mark.backend)) for _ in range(cfg.workers)]
            try:
                for p in self.procs:
                    p.start()
            except BaseException:  # Ctrl-C, or a fork that failed, while they start: none is left behind
                self.close()
                raise

    def hand(self, i: int, slot: int | None, out: torch.Tensor | None) -> None:
        """Batch i's output (in a slot, or a tensor) to its consumer."""
        self.outstanding += 1
        if not self.procs:
            with self.mark("process output"):
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

    def wait_all(self) -> None:
        while self.outstanding:
            self.collect(block=True)

    def ends(self) -> list[float]:
        """When each batch handed over so far was processed, in order (workers finish out of order)."""
        return sorted(when for _, when in self.done.values())

    def check_workers(self) -> None:
        dead = [p for p in self.procs if not p.is_alive()]
        if dead:
            raise WorkerDied(f"an output worker died (exit code {dead[0].exitcode}): the out-of-memory killer is "
                             f"the usual cause; use fewer --workers ({self.cfg.workers}) or a smaller --batch-size")

    def close(self) -> None:
        for p in self.procs:
            if p.is_alive():
                p.kill()
        if self.procs:
            # note: a Ctrl-C that lands inside the tasks queue's put can lose the wake-up that ends its feeder
            # thread, which the interpreter then joins at exit forever; the consumers are gone, so is the need
            self.tasks.cancel_join_thread()


class Sink:
    """The study's output path: each output copied to the host (pageable; or a slot of the pool, pinned
    or not, on the compute stream or a side one), then handed to the consumers once its copy is done."""

    def __init__(self, cfg: InferConfig, shape: tuple, dtype: torch.dtype, mark: Marker, device: torch.device):
        self.cfg, self.pool, self.slots, self.free = cfg, None, None, deque()
        self.pending: deque = deque()  # (event, batch, slot): copies not yet known to be done
        n = cfg.workers * 2 + 2  # each worker's task and the next, the one copying, the one handed over
        if cfg.pool:
            # note: made before the workers fork, so that they inherit the mapping
            self.pool = SharedPool("output pool", n, dict(slots=(shape, dtype)), device, pin=cfg.pinned,
                                   shrink=f"--workers shrinks it ({n} buffers = 2 x {cfg.workers} workers + 2)")
            self.slots, self.free = self.pool.slots, deque(range(n))
            log(f"output pool: {n} buffers, {size(self.pool.nbytes)}"
                + (", page-locked" if self.pool.pinned else ""))
        self.async_copies = self.pool is not None and self.pool.pinned  # pinned: asked for, and on a GPU
        self.consumers = None
        try:
            self.consumers = Consumers(cfg, mark, self.slots, self.free)
        except BaseException:
            self.close()  # the pool's shared memory, unlinked
            raise

    @property
    def done(self) -> dict[int, tuple]:
        """The consumers' record of each batch processed: what the window counts."""
        return self.consumers.done

    def put(self, i: int, out: torch.Tensor, copy_stream, compute_stream) -> None:
        """Copy batch i's output to the host and hand it to its consumer."""
        cfg = self.cfg
        if not cfg.pool:
            self.consumers.hand(i, None, out.cpu())  # note: pageable, so a synchronous copy: the CPU waits for the GPU
            return
        slot = self.take_slot()
        if not self.async_copies:  # pageable shared memory (or no accelerator): a synchronous copy too
            self.slots[slot].copy_(out)
            self.consumers.hand(i, slot, None)
            return
        stream = copy_stream if cfg.streams else compute_stream
        if cfg.streams:
            stream.wait_stream(compute_stream)  # the copy reads the output the forward wrote
        with torch.cuda.stream(stream):
            self.slots[slot].copy_(out, non_blocking=True)
        if cfg.streams:
            out.record_stream(stream)  # the allocator must not reuse the output before its copy is done
        if cfg.unsafe_no_wait:
            self.consumers.hand(i, slot, None)  # the bug: the consumer may read the buffer before the copy lands
            return
        self.pending.append((stream.record_event(), i, slot))
        while self.pending and self.pending[0][0].query():
            self.hand_oldest()

    def hand_oldest(self) -> None:
        event, i, slot = self.pending.popleft()
        event.synchronize()
        self.consumers.hand(i, slot, None)

    def take_slot(self) -> int:
        while not self.free:
            if self.pending:
                self.hand_oldest()  # its copy must land before a worker can give its buffer back
            else:
                self.consumers.collect(block=True)
        return self.free.popleft()

    def flush(self) -> None:
        """Every batch handed over and processed."""
        while self.pending:
            self.hand_oldest()
        self.consumers.wait_all()

    def close(self) -> None:
        if self.consumers is not None:
            self.consumers.close()
        if self.pool is not None:
            self.pool.close()

# -----------------------------------------------------------------------------
# the loop


def make_model(cfg: InferConfig, device: torch.device) -> torch.nn.Module:
    model = torchvision.models.segmentation.deeplabv3_resnet50(weights=None, weights_backbone=None,
                                                               num_classes=cfg.classes, aux_loss=False)
    return model.to(device).eval()


def output_shape(cfg: InferConfig) -> tuple[tuple, torch.dtype]:
    if cfg.uint8_out:
        return (cfg.batch_size, cfg.img_size, cfg.img_size), torch.uint8
    return (cfg.batch_size, cfg.classes, cfg.img_size, cfg.img_size), torch.float32


def model_and_images(cfg: InferConfig, device: torch.device) -> tuple[torch.nn.Module, torch.Tensor]:
    """The model, and the one batch of images it runs on, made on the device: what comes back is the subject."""
    g = torch.Generator(device=device).manual_seed(cfg.seed)
    return make_model(cfg, device), torch.randn((cfg.batch_size, 3, cfg.img_size, cfg.img_size), device=device,
                                                generator=g)


def forward(cfg: InferConfig, model: torch.nn.Module, images: torch.Tensor, sink: "Sink | None", mark: Marker):
    """The study's batch: the forward on the device, then its output onto the output path (none for the
    ceiling). Returns produce(i) and --verify's device checksums, (batch, checksum) in order."""
    cuda = images.device.type == "cuda"
    compute_stream = torch.cuda.current_stream(images.device) if cuda else None
    copy_stream = torch.cuda.Stream(images.device) if cuda and cfg.streams else None
    device_checks = []

    def produce(i: int) -> float:
        """Batch i; returns the loop's time on the output path."""
        with mark("Compute"):
            out = model(images)["out"]
            if cfg.uint8_out:
                out = out.argmax(dim=1).to(torch.uint8)
            if cfg.verify:
                device_checks.append((i, checksum(out)))  # on the stream that produced it
        if sink is None:
            return 0.0
        t = time.perf_counter()
        with mark("copy output"):
            sink.put(i, out, copy_stream, compute_stream)
        return time.perf_counter() - t
    return produce, device_checks


def host_outputs(cfg: InferConfig, model: torch.nn.Module, images: torch.Tensor, sink: "Sink"):
    """Output processing alone: outputs already on the host, as the copy would leave them, handed over as
    fast as the output path takes them: what the workers (or the loop's thread) process with no model in
    front. The output is the model's own, made once: processing time depends on the data (with argmax,
    random scores took 1.5x as long as a model's)."""
    with torch.inference_mode():
        made = model(images)["out"]
        made = (made.argmax(dim=1).to(torch.uint8) if cfg.uint8_out else made).cpu()
    if sink.pool is not None:
        sink.slots.copy_(made.expand_as(sink.slots))  # every buffer holds an output once; they are only read

    def produce(i: int) -> float:
        t = time.perf_counter()
        if sink.pool is not None:
            sink.consumers.hand(i, sink.take_slot(), None)
        else:
            sink.consumers.hand(i, None, made.clone())  # as .cpu() makes a new tensor for every batch
        return time.perf_counter() - t
    return produce


def measure(cfg: InferConfig, device: torch.device, sink: "Sink | None", produce, mark: Marker,
            windows: int = 1) -> list[tuple[list, list]]:
    """Warm-up batches fill the output path; then `windows` windows, one after the other, each measured by
    the package's Steps: with an output path, a Completions window over the batches processed on the host
    (from the warm-up's last on, in whole rounds of the workers); for the ceiling, a Window over the forwards.
    Returns each window's marks (its start, then each measured batch's end) and the loop's time on the
    output path for each batch issued in it."""
    stream = torch.cuda.current_stream(device) if device.type == "cuda" else None
    on_path, closed, i, first = [0.0], [], 0, cfg.warmup - 1
    with torch.inference_mode():
        for k in range(windows):
            c = cfg if k == 0 else replace(cfg, warmup=0)  # the next window opens where this one closed
            window = (Window(c.steps, 0, device, stream, c if timed(c) else None) if sink is None else
                      Completions(c.steps, device, sink.consumers.ends, lambda: len(sink.done), first,
                                  2 * max(1, cfg.workers), c if timed(c) else None))
            for _ in Steps(c, device, stream, waited=lambda: on_path[0], window=window, unit="batch"):
                with mark(f"Batch {i}"):
                    on_path[0] += produce(i)
                i += 1
            first += window.steps
            closed.append(window)
        if sink is not None:
            sink.flush()
    return [window.span() for window in closed]


def run(cfg: InferConfig, device: torch.device) -> list[tuple[str, dict]]:
    """The variant's windows (run1, run2, ...), then with --then-alone its output processing alone
    (output), each as (name, record)."""
    torch.manual_seed(cfg.seed)
    backend = nvtx_backend(cfg.nvtx)
    mark = Marker(backend, cfg.profile == "torch")
    shape, dtype = output_shape(cfg)
    # note: the pool and the workers first, so that the workers fork with the pool mapped
    sink = None if cfg.outputs_on_gpu else Sink(cfg, shape, dtype, mark, device)
    records = []

    def add(windows: list, output_only: bool, checks: list) -> None:
        mismatches = [i for i, d in checks if not torch.equal(d.cpu(), sink.done[i][0])]
        for marks, put_s in windows:
            name = "output" if output_only and cfg.then_alone else f"run{len(records) + 1}"
            records.append((name, make_record(cfg, device, backend, marks, put_s, len(checks), mismatches, shape,
                                              output_only)))
    try:
        model, images = model_and_images(cfg, device)
        if cfg.output_only:
            add(measure(cfg, device, sink, host_outputs(cfg, model, images, sink), mark, cfg.repeat), True, [])
            return records
        produce, device_checks = forward(cfg, model, images, sink, mark)
        add(measure(cfg, device, sink, produce, mark, cfg.repeat), False, device_checks)
        if cfg.then_alone:
            sink.done.clear()  # the same workers and pool, emptied by measure()'s flush
            log("output processing alone: the same workers and buffers, no model")
            add(measure(cfg, device, sink, host_outputs(cfg, model, images, sink), mark), True, [])
    finally:
        if sink is not None:
            sink.close()
    return records


def make_record(cfg: InferConfig, device: torch.device, backend: str, marks: list, put_s: list[float], verified: int,
                mismatches: list[int], out_shape: tuple, output_only: bool) -> dict:
    # the loop's time on the output path (copy, hand-over, waiting for a free buffer or room in the workers'
    # queue, and processing when there are no workers): what train.py calls its data wait
    waits = put_s or [0.0] * (len(marks) - 1)  # the ceiling has no output path
    # a window that does not slide, judged on its halves all the same
    figures = window_record(cfg, marks, waits, slid=0, settled=halves_agree(marks, len(marks) - 1))
    record = dict(
        study="infer", variant=cfg.variant + (" (outputs on device)" if cfg.outputs_on_gpu else "")
        + (", output processing alone" if output_only else ""),
        preset=cfg.variant, data_on_gpu=cfg.outputs_on_gpu, output_only=output_only,
        compute_key=cfg.compute_key, **run_head(cfg, device, backend))
    record.update(figures, output_bytes_per_batch=0 if cfg.outputs_on_gpu else
                  int(torch.Size(out_shape).numel()) * (1 if cfg.uint8_out else 4),
                  verified_batches=verified if cfg.verify and not output_only else None,
                  verify_mismatches=[dict(step=i) for i in mismatches] if cfg.verify and not output_only else None)
    record["data_wait_share"] = min(1.0, record["data_wait_share"])
    if output_only:
        record["output_batches_per_s"] = record["steps_per_s"]
    return record

# -----------------------------------------------------------------------------
# command line


def list_variants() -> str:
    return "\n".join(preset_table(InferConfig, PRESETS, INFER_DEFAULTS)
                     + ["", "Each preset's ceiling: --variant NAME --outputs-on-gpu.", "",
                        f"run_all.sh --study infer --variants takes this group: study: {GROUPS['study']}"])


def parse_config(argv: list[str] | None = None) -> InferConfig:
    p = preset_parser("infer.py", __doc__, InferConfig, PRESETS, "preset for one step of part 2; explicit flags "
                      "override it (default: baseline)", "baseline", GROUPS)
    args, pipeline_given, settings_given = parse_preset_args(p, INFER_DEFAULTS, list_variants, argv)
    check_launcher(p, one_process=True)
    cfg = InferConfig(**{**INFER_DEFAULTS, **PRESETS[args.variant][0], **pipeline_given}, **settings_given)
    cfg, small = fit_to_machine(cfg, settings_given)
    check_workers(p, cfg.workers)
    if cfg.warmup is None:  # each worker's batch, the next two queued, and a few to settle
        cfg = replace(cfg, warmup=5 + 3 * cfg.workers)
    cfg = resolve_window(cfg, settings_given)
    check_measurement(p, cfg, settings_given)
    check_infer(p, cfg, pipeline_given)
    if small:
        log(small)
    return cfg


def summary_line(r: dict) -> str:
    if r["output_only"]:
        return (f"{r['variant']}: {r['output_batches_per_s']:.2f} batches/s processed with no model "
                f"({r['settings']['workers'] or 'no'} workers; {r['steps']} batches)")
    out = r["output_bytes_per_batch"]
    return f"{r['variant']}: " + rate_line(r, "batches", "batch", "batch every", "loop on the output path",
                                           f"{size(out)} back per batch, " if out else "")


def main(cfg: InferConfig) -> int:
    device = pick_device(cfg.device)
    share_cpus(1 + cfg.workers)  # the loop's thread and each output worker's: threads on purpose
    what = " (outputs on device)" if cfg.outputs_on_gpu else ", output processing alone" if cfg.output_only else ""
    windows = f"{cfg.repeat} windows" if cfg.repeat > 1 else "a window"
    log(f"{cfg.variant}{what}: {cfg.warmup} warm-up batches to fill the output path, then {windows} of "
        f"{cfg.window_s:g} s ({cfg.min_steps}-{cfg.steps} batches){', then output processing alone' * cfg.then_alone}, "
        f"{cfg.batch_size}x3x{cfg.img_size}x{cfg.img_size} images on {device}")
    if cfg.unsafe_no_wait:
        warn("--unsafe-no-wait: buffers are handed over before their copies are known to be done (a bug, on purpose)")
    records = run_or_exit(run, cfg, device, stops=(WorkerDied,))
    if isinstance(records, int):
        return records
    status = 0
    for n, (name, record) in enumerate(records):
        bad = record["verify_mismatches"]
        last = n == len(records) - 1 - cfg.then_alone  # --verify's outcome, once: the model's last window
        path = cfg.json.replace("{}", name) if cfg.json else None
        status = max(status, finish(record, cfg, summary_line(record), [
            f"verify: {len(bad)} of {record['verified_batches']} batches processed on the host differ from the output "
            f"on the device (batches {', '.join(str(m['step']) for m in bad[:10])})"] if bad and last else [],
            f"verify: {record['verified_batches']} batches, every one processed as the device produced it",
            path=path, said=not last))
    return status


if __name__ == "__main__":
    sys.exit(guarded(lambda: main(parse_config())))
