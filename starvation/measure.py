"""
The measurement, which both studies' loops hand their batches to: warm-up, the window (its clock on the
stream that computes, its halves, its slide while they disagree), the profilers' capture, progress lines,
and the record with its last line.
"""
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace

import torch
import torch.distributed as dist
import torchvision

from starvation.profiling import torch_profiler
from starvation.runtime import DIST, device_sync, log, usable_cpus, warn
from starvation.thresholds import SETTLE_TOLERANCE, alone_steps, longer_window
from starvation.writes import for_file, write_json


PROGRESS_S = 10  # a long run says where it is this often


class Loop:
    """What wraps both studies' loops, their batches aside: torch.profiler's schedule (the last
    --profile-steps of `total`), nsys's capture range, a progress line every 10 s on a long run, and the
    sync after the last batch that lets the clock see it finish. `with Loop(...) as loop:`, then
    loop.capture() where the nsys capture begins, loop.stepped(i) after each batch, loop.end() after the last."""

    def __init__(self, cfg, device: torch.device, total: int, capture_from: int, unit: str = "step"):
        self.cfg, self.device, self.unit, self.capture_from = cfg, device, unit, capture_from
        self.prof = torch_profiler(cfg, device, total, capture_from)
        self.last_print = time.perf_counter()

    def __enter__(self) -> "Loop":
        if self.prof is not None:
            self.prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.prof is not None:
            self.prof.__exit__(*exc)

    def capture(self) -> None:
        """nsys records from here (run under nsys --capture-range=cudaProfilerApi)."""
        if self.cfg.profile == "nsys":
            torch.cuda.profiler.start()

    def stepped(self, i: int, total: int | None = None) -> None:
        """After batch i (of `total`, when known): torch.profiler's schedule moves on, and every 10 s a line."""
        if self.prof is not None:
            self.prof.step()
        if time.perf_counter() - self.last_print > PROGRESS_S and DIST.rank == 0:
            log(f"  {self.unit} {i + 1}{f'/{total}' if total else ''} "
                f"({'warm-up' if i < self.cfg.warmup else 'measured'})")
            self.last_print = time.perf_counter()

    def end(self) -> None:
        device_sync(self.device)  # note: a CPU-GPU sync point, so the clock sees the last batch finish
        if self.cfg.profile == "nsys":
            torch.cuda.profiler.stop()


# -----------------------------------------------------------------------------
# the window and the record


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def elapsed(a, b) -> float:
    """Seconds between two marks: CUDA events (recorded on the compute stream) or perf_counter times."""
    return a.elapsed_time(b) / 1e3 if hasattr(a, "elapsed_time") else b - a


def halves(marks: list, steps: int) -> tuple[float, float]:
    """Steps/s over each half of the window of the last `steps` steps; marks[-k] ends the k-th last step."""
    h = steps // 2
    w = marks[-steps - 1:]
    return h / elapsed(w[0], w[h]), (steps - h) / elapsed(w[h], w[-1])


def halves_agree(marks: list, steps: int) -> bool:
    """Whether the last `steps` steps ran as fast in their first half as in their second, within
    SETTLE_TOLERANCE: a steady state."""
    first, second = halves(marks, steps)
    return abs(first - second) <= SETTLE_TOLERANCE * max(first, second)


def unsettled(marks: list, steps: int, device: torch.device) -> bool:
    """Whether the window's halves disagree, on any rank: every rank must slide its window, or none."""
    if hasattr(marks[-1], "synchronize"):
        marks[-1].synchronize()  # note: a CPU-GPU sync point, at the window's end only
    differ = not halves_agree(marks, steps)
    if DIST.launched:
        flag = torch.tensor([float(differ)], device=device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        differ = bool(flag.item())
    return differ


def window_figures(cfg, step_ms: list[float], waits_s: list[float], window_s: float) -> dict:
    """The record's figures over the measured window (one entry of step_ms per measured step): throughput,
    the second half's pace (the guard: a pipeline slower than the device shows as a second half slower
    than the whole), the pace under a profiler, the step times, and the loop's waits (a median hides
    bursts: the mean, its share of the window and the p90 show them)."""
    steps, half = len(step_ms), len(step_ms) // 2
    captured = step_ms[steps - min(steps, cfg.profile_steps or steps):]
    profiled = cfg.profile != "none"
    return dict(
        profiled=cfg.profile, window_s=window_s, steps=steps,
        steps_per_s=steps / window_s, images_per_s=steps * cfg.batch_size / window_s,
        steps_per_s_second_half=(steps - half) * 1e3 / sum(step_ms[half:]) if half else steps / window_s,
        profiled_steps=len(captured) if profiled else None,
        # the pace under the profiler, less the first captured step, which also holds the capture's start
        profiled_steps_per_s=(len(captured) - 1) * 1e3 / sum(captured[1:]) if profiled and len(captured) > 1
        else None,
        step_ms_median=statistics.median(step_ms), step_ms_min=min(step_ms), step_ms_max=max(step_ms),
        step_ms_p10=percentile(step_ms, 0.1), step_ms_p90=percentile(step_ms, 0.9),
        data_wait_ms_median=statistics.median(waits_s) * 1e3, data_wait_ms_mean=statistics.mean(waits_s) * 1e3,
        data_wait_ms_p90=percentile(waits_s, 0.9) * 1e3, data_wait_share=sum(waits_s) / window_s)


def window_record(cfg, marks: list, waits_s: list[float], slid: int, settled: bool | None) -> dict:
    """A window's figures for its record, from its marks (its start, then the end of each measured step or
    batch) and the loop's wait in each: window_figures, its halves' rates, how many steps it slid later
    while they disagreed, and whether they agreed (None: not judged)."""
    step_ms = [elapsed(a, b) * 1e3 for a, b in zip(marks, marks[1:])]
    return dict(window_figures(cfg, step_ms, waits_s, elapsed(marks[0], marks[-1])), slid_steps=slid,
                settled=settled, steps_per_s_halves=list(halves(marks, len(step_ms))) if len(step_ms) >= 2 else [])


def stream_mark(device: torch.device, stream=None):
    """Now, on `stream` (default: the device's current one) as a CUDA event, read once the device reaches
    it, so that the CPU never waits; on the CPU, the clock."""
    if device.type != "cuda":
        return time.perf_counter()
    return (stream or torch.cuda.current_stream(device)).record_event(torch.cuda.Event(enable_timing=True))


def window_done(cfg, measured: int, elapsed_s: float) -> bool:
    """The window closes once it has run --window-s seconds and holds --min-steps steps, and at --steps
    steps at the latest."""
    return measured >= cfg.steps or (measured >= cfg.min_steps and elapsed_s >= cfg.window_s)


class Window:
    """The measured window: the clock's start and the end of each measured step, as CUDA events on the
    stream that computes (so the CPU never waits for the device) or, on the CPU, the clock; and the
    loop's wait for each step's data. It is the last `steps` steps: while its halves differ by more
    than SETTLE_TOLERANCE (a queue still filling or emptying), it slides half a window later, up to
    `settle` steps. Given `timed` (the config), the first window may close early, by window_done()."""

    def __init__(self, steps: int, settle: int, device: torch.device, stream, timed=None):
        self.steps, self.slide_left, self.device, self.stream = steps, settle, device, stream
        self.marks, self.waits_s, self.slid, self.settled = [], [], 0, None
        self.timed, self.t0, self.closed = timed, 0.0, False

    def now(self):
        return stream_mark(self.device, self.stream)

    def start(self) -> None:
        device_sync(self.device)  # note: the clock starts with the device idle...
        if DIST.launched:
            dist.barrier()  # ...and on every rank at once
        self.marks.append(self.now())
        self.t0 = time.perf_counter()

    def closes_early(self) -> bool:
        """After a measured step of the first window: it has run its seconds and holds its fewest steps
        before --steps. It is that long from then on, and may slide in proportion (--settle of --steps),
        at most its own length."""
        n = len(self.marks) - 1
        if self.timed is None or self.closed or n >= self.steps \
                or not window_done(self.timed, n, time.perf_counter() - self.t0):
            return False
        self.steps, self.slide_left = n, min(n, self.slide_left * n // self.steps)
        return True

    def lap(self) -> None:
        """A measured step's work is issued: mark its end, on the stream (the device reaches it later)."""
        self.marks.append(self.now())

    def slide(self) -> int:
        """At the window's planned end: how many steps more, half a window while its halves disagree. The
        last window is judged too, once the slides are spent: `settled` describes the figures' window."""
        self.closed = True
        if self.slide_left == 0 and self.slid == 0:
            return 0  # a window that may not slide is not judged
        self.settled = not unsettled(self.marks, self.steps, self.device)
        slide = 0 if self.settled else min(self.slide_left, max(1, self.steps // 2))
        self.slide_left, self.slid = self.slide_left - slide, self.slid + slide
        return slide

    def span(self) -> tuple[list, list[float]]:
        """The window's marks (its start, then each measured step's end) and the loop's wait in each step."""
        return self.marks[-self.steps - 1:], self.waits_s[-self.steps:]

    def figures(self, cfg) -> dict:
        """The record's figures, once the device has finished the last step."""
        return window_record(cfg, *self.span(), self.slid, self.settled)


class Completions(Window):
    """A window over what the host finishes after the loop has issued it (part 2: each batch's output,
    processed by a worker), not over the loop's steps: its marks are the completion times that ends() gives,
    in order, from the first-th on (count(): how many there are). So it opens once that one has completed,
    with the output path full, and closes in whole `rounds` (workers hand batches back in rounds): by
    window_done() given `timed`, else at `steps`. It does not slide: until it closes, the loop goes on."""

    def __init__(self, steps: int, device: torch.device, ends, count, first: int, rounds: int, timed=None):
        super().__init__(steps, 0, device, None, timed)
        self.ends, self.count, self.first, self.rounds, self.opened = ends, count, first, rounds, None

    def start(self) -> None:
        pass  # the clock is the consumers': it opens at the first-th completion, whenever that lands

    def lap(self) -> None:
        pass  # the marks are the completions

    def closes_early(self) -> bool:
        n = self.count() - 1 - self.first
        if self.closed or n < 0:
            return False
        if self.opened is None:
            self.opened = self.ends()[self.first]
        if not (window_done(self.timed, n, time.perf_counter() - self.opened) if self.timed else n >= self.steps):
            return False
        self.steps, self.closed = n - n % self.rounds if n >= self.rounds else n, True
        return True

    def slide(self) -> int:
        return 0 if self.closed else 1  # at the planned end and still open: one batch more, until it closes

    def span(self) -> tuple[list, list[float]]:
        """Its marks (the completion that opens it, then each measured one) and the loop's time on the output
        path for each batch issued in it: in step with them, but not to the batch."""
        return self.ends()[self.first:self.first + self.steps + 1], self.waits_s[:self.steps]


def rate_line(r: dict, unit: str, per: str, step: str, wait: str, extra: str = "") -> str:
    """The head of a run's summary line: its rate (`unit`/s), step times and the loop's wait (ms/`per`)."""
    return (f"{r['steps_per_s']:.2f} {unit}/s ({r['images_per_s']:.0f} img/s) | {extra}{step} "
            f"{r['step_ms_median']:.1f} ms median [{r['step_ms_min']:.1f}-{r['step_ms_max']:.1f}] | {wait} "
            f"{r['data_wait_ms_mean']:.1f} ms/{per} mean ({100 * r['data_wait_share']:.0f}% of the window), "
            f"p90 {r['data_wait_ms_p90']:.1f}")


FELL_BEHIND = 0.10      # a window's second half this much slower than the whole: it had not settled
FELL_BEHIND_STEPS = 20  # ... over at least this many steps (fewer are noise)


def fell_behind(r: dict) -> bool:
    """The window's second half ran more than FELL_BEHIND slower than the whole (noise below that), over
    enough steps to tell: the pipeline had not settled."""
    whole, half = ((r["loader_batches_per_s"], r["loader_batches_per_s_second_half"]) if r.get("loader_only")
                   else (r["steps_per_s"], r["steps_per_s_second_half"]))
    return r["steps"] >= FELL_BEHIND_STEPS and half < (1 - FELL_BEHIND) * whole


def finish(record: dict, cfg, line: str, mismatches: list[str], verified: str, path: str | None = None,
           said: bool = False) -> int:
    """The run's one line on stdout, its record written whole (to path, else --json), and --verify's outcome
    as the exit status (said: another record of the process says it)."""
    record["fell_behind"] = fell_behind(record)
    if record["fell_behind"]:
        warn(f"throughput fell during the window: its second half ran more than {FELL_BEHIND:.0%} slower than the "
             f"whole (see the record's *_second_half): the pipeline had not settled: {longer_window(record)} until "
             "the two agree")
    # a CPU run's figures: every copy synchronous, streams no-ops, so they say nothing about a GPU (README)
    print(line + (" | a CPU run: says nothing about a GPU" if record.get("device") == "cpu" else ""), flush=True)
    saved, record = True, for_file(record)
    if path or cfg.json:
        try:
            write_json(path or cfg.json, record)
        except OSError as e:  # a full or read-only disk: the figures are not lost, they go to stderr
            log(f"error: could not write the record to {path or cfg.json} ({e.strerror}); here it is:")
            sys.stderr.write(json.dumps(record) + "\n")
            saved = False
    for mismatch in mismatches:  # --verify's outcome is said whether or not the record could be saved
        log(mismatch)
    if cfg.verify and not mismatches and not said:
        log(verified)
    return 1 if mismatches or not saved else 0


def run_head(cfg, device: torch.device, backend: str) -> dict:
    """What ran, where: the fields every record starts with."""
    return dict(
        settings={k: v for k, v in asdict(cfg).items()
                  if k not in ("json", "inject_fault", "given", "requested")},
        device=str(device), device_name=torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or "cpu", torch=torch.__version__, torchvision=torchvision.__version__,
        cpu_count=usable_cpus(), torch_threads=torch.get_num_threads(), nvtx_backend=backend, steps=cfg.steps,
        cuda_work_queues=os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
        warmup=cfg.warmup,
        world_size=DIST.world_size, rank=DIST.rank, host=platform.node())



# -----------------------------------------------------------------------------
# train.py's steps: the measurement owns the loop's schedule, and the loop hands it each step


def settle_max(cfg) -> int:
    """The most steps the window may slide while its halves disagree: none under a profiler (whose capture
    is planned around a fixed window) nor for windows too short to halve."""
    return cfg.settle if cfg.profile == "none" and cfg.steps >= 10 else 0


def timed(cfg) -> bool:
    """Whether the window may close by time (window_done). A profiler plans its capture around a fixed
    window, and under torchrun every rank must take the same steps: those keep --steps."""
    return cfg.profile == "none" and not DIST.launched


def drain_at(cfg) -> int | None:
    """The warm-up step before which the batches made ahead (cfg.ahead) are dropped: that many steps before
    the clock starts, so that the workers, which all restart at once after the drain, have fallen out of
    step again, and the burst of their first round has been trained on, when it starts."""
    return max(0, cfg.warmup - cfg.ahead) if cfg.ahead and not cfg.data_on_gpu else None


def schedule(cfg) -> str:
    """What a training run measures, after what warm-up and why, for its first line."""
    if cfg.loader_only:
        window = f"{cfg.steps} batches"
    elif timed(cfg) and cfg.min_steps < cfg.steps:
        window = f"a window of {cfg.window_s:g} s ({cfg.min_steps}-{cfg.steps} steps)"
    else:
        window = f"{cfg.steps} steps"
    why = []
    if drain_at(cfg) is not None:
        why.append(f"the {cfg.ahead} batches " + ("queued and decoded" if cfg.decoded_ahead else "the workers queue")
                   + " ahead are dropped in it, so the clock starts on what they sustain")
    if settle_max(cfg):
        sooner = ", in proportion if the window closes sooner," * timed(cfg)
        why.append(f"up to {settle_max(cfg)} more{sooner} while the window's halves differ by more than "
                   f"{SETTLE_TOLERANCE:.0%}")
    return f"{window} measured after {cfg.warmup} warm-up ({'; '.join(why) or 'a fixed window'})"


def window_note(r: dict) -> str:
    """A summary line's note on a window that slid while its halves disagreed ("" when it did not)."""
    if not r.get("slid_steps"):
        return ""
    first, second = r["steps_per_s_halves"]
    return (f" | window slid {r['slid_steps']} steps " + ("to settle" if r["settled"] else
            f"and its halves still differ ({first:.2f} vs {second:.2f} steps/s): not a steady state; "
            + longer_window(r)))


class Steps:
    """A loop's steps, as `for i in Steps(...)`: --warmup steps, then the window of the last --steps
    (fewer when it closes by time; more while its halves disagree and it slides). Around each step it
    drops the batches the workers queued ahead (drain, before warm-up step drain_at), starts the clock,
    starts the profilers' capture, marks the step's end on the stream that computes and takes the loop's
    wait for its data (waited: the seconds waited so far). The loop only makes its batch and step. Part 2
    passes its own `window` (Completions: the window counts what the host has finished) and unit "batch"."""

    def __init__(self, cfg, device: torch.device, stream, waited=lambda: 0.0, drain=None, drain_at=None,
                 window: Window | None = None, unit: str = "step"):
        self.cfg, self.device, self.waited, self.drain, self.drain_at = cfg, device, waited, drain, drain_at
        self.window = window or Window(cfg.steps, settle_max(cfg), device, stream, cfg if timed(cfg) else None)
        self.unit = unit

    def __iter__(self):
        cfg, window = self.cfg, self.window
        total = cfg.warmup + cfg.steps
        # the profilers record the last measured steps
        with Loop(cfg, self.device, total, capture_from=total - (cfg.profile_steps or cfg.steps),
                  unit=self.unit) as loop:
            i = 0
            while i < total:
                if i == self.drain_at:
                    self.drain()
                if i == cfg.warmup:
                    window.start()
                if i == loop.capture_from:
                    loop.capture()
                waited = self.waited()
                yield i  # the loop issues step i's work
                if i >= cfg.warmup:
                    window.lap()
                    window.waits_s.append(self.waited() - waited)
                    if window.closes_early():
                        total = i + 1
                if i == total - 1:
                    total += window.slide()  # the first half becomes warm-up while the halves disagree
                loop.stepped(i, total)
                i += 1
            loop.end()


def alone_batches(workers: int, steps: int) -> int:
    """The batches the loader alone is timed over: at least `steps`, a whole number of rounds in each half.
    With no step to pace it, the loop takes each batch as it lands and the workers fall into step,
    delivering in rounds of `workers` batches."""
    rounds = max(1, workers)
    return 2 * rounds * math.ceil(steps / (2 * rounds))


def alone_after(cfg, window: "Window"):
    """--then-alone: the loader alone's settings after the window, timed over half as many steps as the window
    held (alone_steps, which run_all.sh's plan sizes by too)."""
    return replace(cfg, steps=alone_steps(window.steps), loader_only=True, verify=False)


def rate_of(take, n: int, device: torch.device) -> tuple[float, float]:
    """Calls a second of `take()`, over n calls and over their second half, the device synchronized at
    each end (the last copy has landed)."""
    device_sync(device)
    t0 = t_half = time.perf_counter()
    for i in range(n):
        if i == n // 2:
            device_sync(device)
            t_half = time.perf_counter()
        take()
    device_sync(device)
    t1 = time.perf_counter()
    return n / (t1 - t0), (n - n // 2) / (t1 - t_half)


# -----------------------------------------------------------------------------
# the loader alone: what train.py's input pipeline delivers with no training step to feed


def sustained(cfg, source, take, device: torch.device) -> tuple[float, float]:
    """Batches/s that `take` hands the loop, over the window and its second half: the queued batches
    dropped first, and the clock started as the first round after them lands."""
    source.drain()
    take()
    return rate_of(take, alone_batches(cfg.workers, cfg.steps), device)


def fed_rate(cfg, device: torch.device, source, take, what: str) -> tuple[float, float]:
    """Batches/s that `take` hands the loop after a warm-up (to drain_at, where the queue is dropped), sustained.
    A slow folder's loader takes minutes: every PROGRESS_S a line says where `what` is."""
    at = drain_at(cfg)
    warm, taken, last = cfg.warmup if at is None else at, 0, time.perf_counter()

    def counted():
        nonlocal taken, last
        batch = take()
        taken += 1
        if time.perf_counter() - last > PROGRESS_S and DIST.rank == 0:
            log(f"  {what}: batch {taken} ({'warm-up' if taken <= warm else 'measured'})")
            last = time.perf_counter()
        return batch
    try:
        for _ in range(warm):
            counted()
        return sustained(cfg, source, counted, device)
    finally:
        source.close()


def loader_rates(cfg, device: torch.device, feed, rate: tuple[float, float] | None = None) -> dict:
    """--loader-only's figures: the pipeline's batches/s to the device, copies included (`rate`, when --then-alone
    measured it after the window); when it pins (the pin-memory thread or the pool), also the workers alone, with
    no pinning and no copy: the two rates side by side say which stage caps the pipeline. feed(cfg, copy) makes
    the pipeline: (source, take), with copies or without."""
    rate, second_half = rate or fed_rate(cfg, device, *feed(cfg, True), "the loader")
    workers = None
    if cfg.pin_memory or cfg.pool:
        bare = replace(cfg, pin_memory=False, pool=False, verify=False)
        workers = fed_rate(bare, device, *feed(bare, False), "the workers alone")[0]
    return dict(loader_batches_per_s=rate, after_window=cfg.then_alone,
                loader_batches_per_s_second_half=second_half, workers_batches_per_s=workers)
