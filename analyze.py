"""
Diagnose GPU starvation from a trace, the way the case study does it by eye in the Nsight GUI:
per step, how long the GPU idles, how much of the host-to-device copy hides under kernels, where
the CPU waits, and a verdict naming the change to make next.

    python analyze.py results/latest              # every variant's report in a run_all.sh folder
    python analyze.py streams.nsys-rep            # one nsys report (exported to SQLite with nsys)
    python analyze.py traces/                     # a torch.profiler trace (train.py --profile torch)

Steps are the NVTX "Batch i" ranges that train.py writes (any script with such ranges works); under
torchrun they end with the rank, "Batch i (rank 1)", and run_all.sh --gpus N writes one report per
rank (VARIANT.rankK.nsys-rep), each diagnosed on its own. NCCL's kernels (DDP's all-reduce) are kept
apart from the compute kernels: a rank waiting in an all-reduce for a starved peer is idle, not busy.
Writes, beside the input: NAME_steps.csv (one row per step), NAME_timeline.png (two steps), and
for a run folder diagnosis.json: every figure taken from a trace (H2D time, bytes and GB/s, kernel
time, pageable against pinned copies, idle, overlap), which compare.py tabulates, and what each
report lacks.

    python analyze.py --check results/latest/streams.nsys-rep   # what the report lacks; exit 1 if any
"""
import argparse
import csv
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# -----------------------------------------------------------------------------
# the verdict thresholds, all in one place

GPU_BOUND_BUSY = 0.95     # GPU (kernels or copies) busy at least this share of the step: GPU-bound
STARVED_IDLE = 0.10       # GPU idle at least this share of the step: the input pipeline is starving it
LOADING_SHARE = 0.50      # "get batch" at least this share of the step: loading-bound
BLOCKED_SHARE = 0.10      # CPU blocked in copy calls or munmap inside "copy batch": synchronous copy
COPY_SHARE = 0.02         # H2D time at least this share of the step counts as worth hiding
OVERLAP_MIN = 0.50        # less than this share of the H2D time under kernels: copy not overlapped

STEP = re.compile(r"^Batch (\d+)(?: \(rank \d+\))?$")
RANK_SUFFIX = re.compile(r" \(rank \d+\)$")
# the ranges in a step, in the scripts' NVTX colours (harness.RANGES), yellow drawn as gold to show on white
PHASES = {"get batch": "red", "copy batch": "gold", "Compute": "green",
          "copy output": "gold", "process output": "red"}  # the last two: infer.py's (part 2)


class NoData(Exception):
    """The trace lacks what the analysis needs; the message says which option produces it."""


class Unreadable(NoData):
    """The input cannot be read as what it should be (a truncated report, another file under its name, a
    folder without traces): exit 2, as for every tool's bad input."""


Interval = tuple[int, int]  # ns, on the trace's clock

# -----------------------------------------------------------------------------
# interval math


def union(intervals: list[Interval]) -> list[Interval]:
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def clip(intervals: list[Interval], lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if s < hi and e > lo]


def total(intervals: list[Interval]) -> int:
    return sum(e - s for s, e in union(intervals))


def overlap(a: list[Interval], b: list[Interval]) -> int:
    """Length of time covered by both a and b."""
    a, b = union(a), union(b)
    i = j = n = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        n += max(0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return n


def step_windows(steps: list[tuple[int, Interval]]) -> list[tuple[int, Interval]]:
    """Step i runs from the start of its "Batch i" range to the start of the next one, so the windows
    tile the timeline and GPU work that lags its CPU range still lands in some step. The last range
    has no successor and is dropped once there are three or more."""
    steps = sorted(steps, key=lambda s: s[1][0])
    windows = [(i, (s, steps[k + 1][1][0])) for k, (i, (s, _)) in enumerate(steps[:-1])]
    return windows if len(steps) >= 3 else [(i, r) for i, r in steps]

# -----------------------------------------------------------------------------
# traces, from nsys or torch.profiler, as plain intervals


@dataclass
class Trace:
    source: str
    steps: list[tuple[int, Interval]]                    # (i, "Batch i" range) on the main thread
    phases: dict[str, list[Interval]]                    # "get batch", "copy batch", "Compute"
    kernels: list[Interval] = field(default_factory=list)
    h2d: list[tuple[Interval, int, bool]] = field(default_factory=list)  # (interval, bytes, pageable)
    d2h: list[tuple[Interval, int, bool]] = field(default_factory=list)  # the same, device to host
    other_gpu: list[Interval] = field(default_factory=list)              # memsets, other copies
    blocking: list[Interval] = field(default_factory=list)               # copy/sync CUDA calls, main thread
    munmap: list[Interval] | None = None                                 # None: the trace cannot tell

    @property
    def has_gpu(self) -> bool:
        return bool(self.kernels or self.h2d or self.d2h)

    @property
    def inference(self) -> bool:
        """infer.py's loop (part 2: outputs back to the host), told by its NVTX ranges."""
        return bool(self.phases.get("copy output"))


def nvtx_ranges(rows, source: str) -> tuple[list, dict, object]:
    """Split (name, start, end, thread) rows into steps and phases, on the thread of the steps."""
    steps = [(int(m.group(1)), (s, e), tid) for name, s, e, tid in rows if (m := STEP.match(name or ""))]
    if not steps:
        raise NoData(f"{source}: no NVTX 'Batch i' ranges: run train.py with its NVTX ranges on (no --no-nvtx), "
                     "and nsys with --trace=nvtx (nsys 2023.4 drops the ranges of the nvtx package from 0.2.12 "
                     "on; train.py then falls back to torch.cuda.nvtx); torch.profiler: --profile torch records "
                     "them as labels")
    main_tid = statistics.mode(t for _, _, t in steps)
    phases = {p: [(s, e) for name, s, e, tid in rows if RANK_SUFFIX.sub("", name or "") == p and tid == main_tid]
              for p in PHASES}
    return [(i, r) for i, r, t in steps if t == main_tid], phases, main_tid


def load_nsys(sqlite_path: Path) -> Trace:
    try:
        return read_nsys(sqlite_path)
    except sqlite3.DatabaseError as e:  # OperationalError is one too, and says the schema differs
        if isinstance(e, sqlite3.OperationalError) and "no such" in str(e):
            raise NoData(f"{sqlite_path}: a schema this script does not know ({e}); it reads nsys 2023.4's "
                         "export") from None
        raise Unreadable(f"{sqlite_path}: not a readable SQLite export ({e})") from None


def read_nsys(sqlite_path: Path) -> Trace:
    con = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError:
        con.close()
        raise
    if "StringIds" not in tables:
        con.close()
        raise Unreadable(f"{sqlite_path}: not an nsys SQLite export (no StringIds table): a schema this script "
                         "does not know; export a report with nsys export --type sqlite")
    try:
        # nvtx-package ranges keep their name in StringIds, torch.cuda.nvtx ones in the text column;
        # nsys writes no NVTX_EVENTS table at all when it recorded no range
        rows = con.execute("SELECT COALESCE(e.text, s.value), e.start, e.end, e.globalTid FROM NVTX_EVENTS e "
                           "LEFT JOIN StringIds s ON e.textId = s.id WHERE e.end IS NOT NULL").fetchall() \
            if "NVTX_EVENTS" in tables else []
        steps, phases, main_tid = nvtx_ranges(rows, str(sqlite_path))
        trace = Trace(str(sqlite_path), steps, phases)
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            trace.kernels = con.execute(
                "SELECT k.start, k.end FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON k.shortName = s.id "
                "WHERE s.value IS NULL OR s.value NOT LIKE 'nccl%'").fetchall()
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
            for s, e, kind, src, dst, n in con.execute(
                    "SELECT start, end, copyKind, srcKind, dstKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"):
                if kind == 1:  # ENUM_CUDA_MEMCPY_OPER: 1 host-to-device; ENUM_CUDA_MEM_KIND: 0 pageable
                    trace.h2d.append(((s, e), n, src == 0))
                elif kind == 2:  # device-to-host: the host side is the destination
                    trace.d2h.append(((s, e), n, dst == 0))
                else:
                    trace.other_gpu.append((s, e))
        if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
            trace.other_gpu += con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall()
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            trace.blocking = con.execute(
                "SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id "
                "WHERE r.globalTid = ? AND (s.value LIKE 'cudaMemcpy%' OR s.value LIKE '%Synchronize%')",
                (main_tid,)).fetchall()
        if "OSRT_API" in tables:
            trace.munmap = con.execute(
                "SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON o.nameId = s.id "
                "WHERE o.globalTid = ? AND s.value = 'munmap'", (main_tid,)).fetchall()
    finally:
        con.close()
    return trace


def torch_traces(folder: Path) -> dict[str, Path]:
    """The newest trace of each process in a torch.profiler folder, by its worker name: tensorboard_trace_handler
    writes WORKER.TIME.pt.trace.json, WORKER being rankK under torchrun (train.py names them so)."""
    newest: dict[str, Path] = {}
    for f in sorted(folder.glob("*.pt.trace.json"), key=lambda f: f.stat().st_mtime):
        newest[f.name.split(".")[0]] = f
    if not newest:
        raise Unreadable(f"{folder}: no *.pt.trace.json: make one with train.py --profile torch --profile-dir "
                         f"{folder}")
    return newest


def load_torch(path: Path) -> Trace:
    """A chrome trace from torch.profiler (a file, or a folder holding one process's traces: the newest)."""
    files = [max(torch_traces(path).values(), key=lambda f: f.stat().st_mtime)] if path.is_dir() else [path]
    try:
        events = json.loads(files[-1].read_text())["traceEvents"]
    except (json.JSONDecodeError, KeyError, UnicodeDecodeError) as e:
        raise Unreadable(f"{files[-1]}: not a torch.profiler chrome trace ({e})") from None
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]

    def iv(e) -> Interval:
        s = int(float(e["ts"]) * 1000)
        return s, s + int(float(e["dur"]) * 1000)
    rows = [(e["name"], *iv(e), e.get("tid")) for e in spans if e.get("cat") == "user_annotation"]
    steps, phases, main_tid = nvtx_ranges(rows, str(files[-1]))
    trace = Trace(str(files[-1]), steps, phases, munmap=None)
    for e in spans:
        cat, name = e.get("cat"), e.get("name", "")
        if cat == "kernel" and not name.startswith("nccl"):
            trace.kernels.append(iv(e))
        elif cat == "gpu_memcpy" and ("HtoD" in name or "DtoH" in name):
            (trace.h2d if "HtoD" in name else trace.d2h).append(
                (iv(e), int(e.get("args", {}).get("bytes", 0)), "Pageable" in name))
        elif cat in ("gpu_memcpy", "gpu_memset"):
            trace.other_gpu.append(iv(e))
        elif cat == "cuda_runtime" and e.get("tid") == main_tid and (
                name.startswith("cudaMemcpy") or "Synchronize" in name):
            trace.blocking.append(iv(e))
    return trace

# -----------------------------------------------------------------------------
# metrics and the verdict


def copy_spans(copies: list[Interval], computes: list[Interval]) -> list[Interval]:
    """Each "copy batch" range stretched to the start of the next "Compute": the CPU-side clean-up
    after a copy (the study's munmap of the batch's memory) can fall in that gap, before any kernel
    of the step is launched."""
    starts = sorted(s for s, _ in computes)
    return [(s, next((c for c in starts if c >= e), e)) for s, e in copies]


def step_metrics(trace: Trace) -> list[dict]:
    h2d = [iv for iv, _, _ in trace.h2d]
    gpu = trace.kernels + h2d + [iv for iv, _, _ in trace.d2h] + trace.other_gpu
    rows = []
    for i, (lo, hi) in step_windows(trace.steps):
        length = hi - lo
        copies = [(iv, n, pageable) for iv, n, pageable in trace.h2d if lo <= iv[0] < hi]
        copy_ranges = copy_spans(clip(trace.phases["copy batch"], lo, hi), clip(trace.phases["Compute"], lo, hi))
        h2d_ns = total(clip(h2d, lo, hi))
        d2h = clip([iv for iv, _, _ in trace.d2h], lo, hi)
        row = dict(
            step=i, step_ms=length / 1e6,
            gpu_busy_pct=100 * total(clip(gpu, lo, hi)) / length if trace.has_gpu else None,
            kernel_busy_pct=100 * total(clip(trace.kernels, lo, hi)) / length if trace.has_gpu else None,
            h2d_ms=h2d_ns / 1e6 if trace.has_gpu else None,
            h2d_bytes=sum(n for _, n, _ in copies),
            h2d_overlap_pct=100 * overlap(clip(h2d, lo, hi), clip(trace.kernels, lo, hi)) / h2d_ns if h2d_ns else None,
            pageable_copies=sum(1 for *_, p in copies if p), pinned_copies=sum(1 for *_, p in copies if not p),
            d2h_ms=total(d2h) / 1e6 if trace.has_gpu else None,
            d2h_overlap_pct=100 * overlap(d2h, clip(trace.kernels, lo, hi)) / total(d2h) if total(d2h) else None,
            d2h_pageable_copies=sum(1 for iv, _, p in trace.d2h if p and lo <= iv[0] < hi),
            blocked_in_copy_ms=overlap(copy_ranges, clip(trace.blocking, lo, hi)) / 1e6,
            munmap_in_copy_ms=(overlap(copy_ranges, clip(trace.munmap, lo, hi)) / 1e6
                               if trace.munmap is not None else None),
        )
        for phase in PHASES:
            ranges = clip(trace.phases.get(phase, []), lo, hi)
            row[f"{phase.replace(' ', '_').lower()}_ms"] = sum(e - s for s, e in ranges) / 1e6
        row["gpu_idle_pct"] = 100 - row["gpu_busy_pct"] if row["gpu_busy_pct"] is not None else None
        rows.append(row)
    return rows


def per_step(trace: Trace) -> dict | None:
    """Trace-wide device figures over the recorded steps, as `nsys stats` sums them: the GPU runs
    behind the CPU, so its work is counted over the whole capture, not inside each step's NVTX range.
    Kernel time is the compute kernels' (NCCL's are not counted, as everywhere in this script)."""
    if not trace.has_gpu:
        return None
    n = len(trace.steps)
    out = dict(steps=n, kernel_ms=sum(e - s for s, e in trace.kernels) / n / 1e6)
    for key, copies in (("h2d", trace.h2d), ("d2h", trace.d2h)):
        ns = sum(e - s for (s, e), _, _ in copies)
        out.update({f"{key}_ms": ns / n / 1e6,
                    f"{key}_gb_per_s": sum(b for _, b, _ in copies) / ns if ns else None,  # bytes per ns
                    f"{key}_pageable_copies": sum(1 for *_, p in copies if p) / n,
                    f"{key}_pinned_copies": sum(1 for *_, p in copies if not p) / n})
    return out


def medians(rows: list[dict]) -> dict:
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    out.pop("step")
    out["steps"] = len(rows)
    return out


# the stage each of the trace's verdicts names, for next_step()
TRACE_CAUSES = {"loading-bound": "making", "synchronous pageable copy": "pageable copy",
                "copy not overlapped": "overlap", "GPU-bound": "compute",
                "output processing on the main thread": "main thread",
                "synchronous output copy": "sync copy", "waiting for a free output buffer": "processing"}


def verdict(m: dict) -> dict:
    """What the trace alone says, in the study's order: each rule quotes the numbers that triggered
    it, and `cause` names the stage for next_step(). decide() weighs it against the measured rates."""
    v = inference_verdict(m) if m["gpu_busy_pct"] is not None and m.get("copy_output_ms") else training_verdict(m)
    return dict(v, cause=TRACE_CAUSES.get(v["verdict"]))


def training_verdict(m: dict) -> dict:
    if m["gpu_busy_pct"] is None:
        return dict(verdict="no GPU activity",
                    why="the trace holds no CUDA kernels or copies")
    step, idle, busy = m["step_ms"], m["gpu_idle_pct"] / 100, m["gpu_busy_pct"] / 100
    get_share = m["get_batch_ms"] / step
    blocked = m["blocked_in_copy_ms"] + (m["munmap_in_copy_ms"] or 0)
    pageable = m["pageable_copies"]
    if idle >= STARVED_IDLE and get_share >= LOADING_SHARE:
        return dict(verdict="loading-bound",
                    why=f"'get batch' takes {m['get_batch_ms']:.0f} of {step:.0f} ms per step ({get_share:.0%}) "
                        f"while the GPU idles {idle:.0%}")
    if idle >= STARVED_IDLE and (pageable > 0 or blocked / step >= BLOCKED_SHARE):
        munmap = (f" and {m['munmap_in_copy_ms']:.0f} ms in munmap before 'Compute'" if m["munmap_in_copy_ms"]
                  else "")
        return dict(verdict="synchronous pageable copy",
                    why=f"{pageable:.0f} of {pageable + m['pinned_copies']:.0f} H2D copies per step from pageable "
                        f"memory; the CPU waits {m['blocked_in_copy_ms']:.0f} ms in CUDA copy and sync calls{munmap}; "
                        f"the GPU idles {idle:.0%}")
    h2d_share = (m["h2d_ms"] or 0) / step
    if h2d_share >= COPY_SHARE and (m["h2d_overlap_pct"] or 0) / 100 < OVERLAP_MIN:
        return dict(verdict="copy not overlapped",
                    why=f"H2D takes {m['h2d_ms']:.1f} ms per step ({h2d_share:.0%}), {m['h2d_overlap_pct'] or 0:.0f}% "
                        f"of it under kernels; kernels idle {100 - m['kernel_busy_pct']:.0f}% of the step")
    if busy >= GPU_BOUND_BUSY:
        return dict(verdict="GPU-bound",
                    why=f"the GPU is busy {busy:.0%} of the step, kernels {m['kernel_busy_pct']:.0f}%")
    return dict(verdict="unclassified",
                why=f"GPU idle {idle:.0%}, 'get batch' {get_share:.0%} of the step, CPU blocked {blocked:.0f} ms in "
                    "copies")


def inference_verdict(m: dict) -> dict:
    """Part 2's path (infer.py): the outputs' way back to the host, step by step."""
    step, idle, busy = m["step_ms"], m["gpu_idle_pct"] / 100, m["gpu_busy_pct"] / 100
    processing, copying = m["process_output_ms"] / step, m["copy_output_ms"] / step
    if idle >= STARVED_IDLE and processing >= LOADING_SHARE:
        return dict(verdict="output processing on the main thread",
                    why=f"'process output' takes {m['process_output_ms']:.0f} of {step:.0f} ms per batch on the "
                        f"loop's thread ({processing:.0%}) while the GPU idles {idle:.0%}")
    if idle >= STARVED_IDLE and copying >= BLOCKED_SHARE and m["d2h_pageable_copies"]:
        return dict(verdict="synchronous output copy",
                    why=f"'copy output' holds the loop {m['copy_output_ms']:.0f} of {step:.0f} ms per batch "
                        f"({copying:.0%}), copying to pageable memory ({m['d2h_pageable_copies']:.0f} such copy per "
                        f"batch), while the GPU idles {idle:.0%}")
    if idle >= STARVED_IDLE and copying >= BLOCKED_SHARE:
        return dict(verdict="waiting for a free output buffer",
                    why=f"'copy output' holds the loop {m['copy_output_ms']:.0f} of {step:.0f} ms per batch "
                        f"({copying:.0%}) though its copies are pinned: no buffer is free until a worker hands one "
                        f"back; the GPU idles {idle:.0%}")
    d2h_share = (m["d2h_ms"] or 0) / step
    if d2h_share >= COPY_SHARE and (m["d2h_overlap_pct"] or 0) / 100 < OVERLAP_MIN:
        return dict(verdict="copy not overlapped",
                    why=f"D2H takes {m['d2h_ms']:.1f} ms per batch ({d2h_share:.0%}), {m['d2h_overlap_pct'] or 0:.0f}% "
                        "of it under kernels")
    if busy >= GPU_BOUND_BUSY:
        return dict(verdict="GPU-bound",
                    why=f"the GPU is busy {busy:.0%} of the batch, kernels {m['kernel_busy_pct']:.0f}%")
    return dict(verdict="unclassified",
                why=f"GPU idle {idle:.0%}, 'copy output' {copying:.0%} and 'process output' {processing:.0%} of the "
                    "batch on the loop's thread")

# -----------------------------------------------------------------------------
# the verdict: the measured rates first, then the trace. One engine for analyze.py's own lines,
# diagnosis.json, and every section of compare.py's results.md, so that they never disagree.

ALONE_SHORT = 0.97  # an alone rate under this share of the ceiling cannot feed the GPU
WAIT_SHARE = 0.05   # the loop waits for data (part 2: is on the output path) at least this share of the window
PINNING_CAP = 1.2   # the workers alone make this many times the loader's batches: pinning and copying cap it
AT_CEILING = 0.97   # a variant at this share of its ceiling or more trains at it
# part 2: a variant at this share of its workers' alone rate or more (and at most its inverse) goes at their
# pace. The band is as wide as that ratio wanders from process to process where the workers are the cap
# (README, Part 2), so that one variant gets one verdict from run to run
NEAR_ALONE = 0.75
SETTLE_PCT = 3      # a window whose halves differ by more is no steady state (harness.SETTLE_TOLERANCE; tested)


@dataclass
class Rates:
    """What a variant's unprofiled runs measured (compare.py reads them from a run folder)."""
    study: str                          # train (part 1) or infer (part 2)
    rate: float                         # median steps/s (part 2: batches/s)
    ceiling: float | None = None        # its ceiling's median: the same compute, the data already on the device
    alone: float | None = None          # the loader alone (part 2: output processing alone), batches/s
    workers_alone: float | None = None  # part 1: the workers alone, no pinning and no copy
    wait_share: float | None = None     # the loop's wait for data (part 2: time on the output path) / window
    settings: dict = field(default_factory=dict)  # the steps the variant has taken
    cpus: int | None = None
    is_ceiling: bool = False


def loader_bound(r: Rates) -> tuple[str, str, str | None] | None:
    """Part 1: (verdict, why, cause) when the rates say the loader cannot keep up, whatever the trace shows."""
    why = []
    # a loader alone slower than the training it fed is no bound: it was measured low, so it proves nothing
    short = (r.alone is not None and r.ceiling and r.alone < ALONE_SHORT * r.ceiling
             and r.alone * (2 - ALONE_SHORT) >= r.rate)
    if short:
        why.append(f"the loader alone delivers {r.alone:.1f} batches/s and the GPU trains {r.ceiling:.1f} (ceiling)")
    if r.wait_share is not None and r.wait_share >= WAIT_SHARE:
        why.append(f"the loop waits for data {r.wait_share:.0%} of the window")
    if not why:
        return None
    w = r.workers_alone
    if r.alone and w and w >= PINNING_CAP * r.alone:
        why.append(f"the workers alone make {w:.1f} batches/s, so what caps it is pinning and copying"
                   + (" (the DataLoader's pin-memory thread, which copies every batch once more on one thread)"
                      if r.settings.get("pin_memory") else ""))
        return "loader-bound: pinning caps it", "; ".join(why), "pinning"
    if short and w and w < ALONE_SHORT * r.ceiling:
        why.append(f"the workers alone make {w:.1f} batches/s, so making the batches is the cap")
        return "loader-bound: making the batches caps it", "; ".join(why), "making"
    if short and (r.settings.get("pin_memory") or r.settings.get("pool")):
        # the loader alone includes its copies: only the workers alone set a stage apart. A loader that pins
        # nothing has no workers-alone figure to miss: its copy, if it is the cap, is the trace's to name
        why.append("which of its stages caps it, the rates do not say (" + (
            f"the workers alone make {w:.1f} batches/s, neither short of the ceiling nor well above the pipeline"
            if w else "no workers-alone figure") + ")")
    return "loader-bound", "; ".join(why), None


def output_bound(r: Rates) -> tuple[str, str, str | None] | None:
    """Part 2: (verdict, why, cause) when the rates say the output path cannot keep up with the GPU."""
    short = r.ceiling is not None and r.rate < AT_CEILING * r.ceiling
    if not ((r.wait_share or 0) >= WAIT_SHARE or short):
        return None
    why = [f"the loop is on the output path {r.wait_share:.0%} of the window"] if r.wait_share is not None else []
    if r.ceiling:
        why.append(f"it makes {r.rate:.2f} batches/s, {r.rate / r.ceiling:.0%} of the {r.ceiling:.2f} the GPU makes "
                   "(ceiling)")
    workers = r.settings.get("workers", 0)
    if not workers:
        why.append("the loop's own thread processes every batch" + (
            f", at {r.alone:.2f} batches/s when it does nothing else (output processing alone)" if r.alone else ""))
        return "output processing on the main thread", "; ".join(why), "main thread"
    # as in part 1, an alone rate well below what the variant made with the model was measured low: it proves
    # nothing
    measured_low = r.alone is not None and r.alone < NEAR_ALONE * r.rate
    if r.alone and not measured_low and NEAR_ALONE * r.alone <= r.rate and (
            r.ceiling is None or r.alone < ALONE_SHORT * r.ceiling):
        gpu = f", the GPU makes {r.ceiling:.2f}" if r.ceiling else ""
        return (f"output processing caps it: {workers} workers process {r.alone:.2f} batches/s{gpu}", "; ".join(why),
                "processing")
    if measured_low:
        why.append(f"its {workers} workers alone processed {r.alone:.2f} batches/s, less than with the model in "
                   "front: measured low, that proves nothing")
    elif r.alone:
        why.append(f"its {workers} workers alone process {r.alone:.2f} batches/s"
                   + (", so they are not what holds it" if r.alone >= 1.5 * r.rate else ""))
    return "output-path-bound", "; ".join(why), None


def decide(rates: Rates | None, trace: dict | None, study: str = "train") -> dict | None:
    """A variant's one verdict: the rates first (the loop's wait, the alone rate against the ceiling),
    then the trace, which names the stage where the rates do not. Where the two disagree, `why` says
    so with both figures. None when neither says anything."""
    t = trace if trace and trace.get("verdict") not in (None, "no GPU activity") else None
    study = rates.study if rates else study
    if rates and rates.is_ceiling:
        what = "outputs left" if study == "infer" else "batch already"
        verdict, why, cause = "the ceiling", f"the same {'forward' if study == 'infer' else 'step'} with its " \
            f"{what} on the device: {rates.rate:.2f} {'batches' if study == 'infer' else 'steps'}/s", "compute"
    elif rates and (bound := (output_bound if study == "infer" else loader_bound)(rates)):
        verdict, why, cause = bound
        if t and t["cause"] == "compute":
            why += (f"; the profiled steps were fed from what was queued and look GPU-bound ({t['why']}): the "
                    "rates over the whole window say otherwise")
        elif t and cause is None:  # the rates say bound, the trace names the stage
            verdict, why, cause = f"{verdict}; trace: {t['verdict']}", f"{why}; the trace: {t['why']}", t["cause"]
        elif t:
            why += f"; the trace: {t['verdict']} ({t['why']})"
    elif t:
        verdict, why, cause = t["verdict"], t["why"], t["cause"]
        if rates and rates.ceiling and rates.rate >= AT_CEILING * rates.ceiling:
            verdict, why = "at its ceiling", f"{rates.rate / rates.ceiling:.0%} of its ceiling; the trace: " \
                f"{t['verdict']} ({t['why']})"
    elif rates and rates.ceiling and rates.rate >= AT_CEILING * rates.ceiling:
        verdict, why, cause = "at its ceiling", f"{rates.rate / rates.ceiling:.0%} of its ceiling, and the loop " \
            "hardly waits (no trace)", "compute"
    elif rates and rates.ceiling and rates.alone is not None:  # (part 2 unbound is at its ceiling, above)
        verdict, why, cause = "not bound by its rates", "the loop hardly waits and its alone rate keeps up " \
            f"({rates.rate / rates.ceiling:.0%} of its ceiling; no trace names the rest)", None
    else:
        return None
    return dict(verdict=verdict, why=why, change=next_step(cause, study, rates.settings if rates else {},
                                                             rates.cpus if rates else None), cause=cause)


def next_step(cause: str | None, study: str, s: dict, cpus: int | None) -> str:
    """The change to make next for a cause: a step of the variant's own study that it has not taken, or
    a knob whose effect the rates measured; never what the variant already does, never a flag its
    script lacks."""
    workers = s.get("workers") or 0
    more = min(cpus - 1, 2 * workers) if cpus and workers and workers < cpus - 1 else None
    if study == "infer":
        if cause == "compute":
            return "none from part 2's steps: the output path keeps up, so the forward itself is the limit"
        if cause is None:
            return "open its timeline: neither the rates nor the trace name the stage"
        if not workers:  # the loop's thread processes every batch, whatever else the trace saw
            return "process the outputs in worker processes (--workers N)"
        lock = "--pinned" if s.get("pool") else "--pool --pinned"  # what page-locked buffers still need
        if cause == "sync copy" and not s.get("pinned"):
            return f"a reused, page-locked output pool with non_blocking copies ({lock})"
        if cause == "overlap" and not s.get("streams"):
            return "copies on a side stream, overlapping the next forward (--streams" + \
                (")" if s.get("pinned") else f", which needs {lock})")
        if more:
            return f"more output workers (--workers {more}): they are the cap, and the machine has {cpus} CPUs"
        if not s.get("uint8_out"):
            return "send back a class map made on the GPU (--uint8-out): 1 byte a pixel instead of the class scores"
        return "cheaper output processing: its workers have every CPU"
    pinned = s.get("pin_memory") or s.get("pool")
    if cause == "pageable copy" and not pinned:
        return "pinned memory and non_blocking copies (--pin-memory --non-blocking)"
    if cause == "overlap" and not (s.get("streams") or s.get("prefetcher")):
        return "copy on a side stream (--streams), or through a prefetcher (--prefetcher)"
    if cause in ("pinning", "pageable copy", "overlap") and workers and not s.get("pool"):
        return "let the workers write into page-locked shared memory (--pool): no pin-memory thread"
    if cause == "compute":
        missing = ([] if s.get("amp", "none") != "none" else ["--amp bf16"]) + \
            ([] if s.get("channels_last") else ["--channels-last"])
        if missing:
            return f"faster compute: bf16 autocast with channels_last ({' '.join(missing)})"
        return "none from these steps: the input pipeline keeps up, so the step itself is the limit"
    if cause in ("making", "pinning", "pageable copy", "overlap"):
        if not workers:
            return "DataLoader worker processes (--workers N)"
        if cpus and workers < cpus // 2:
            return f"more workers (--workers {more}): the machine has {cpus} CPUs"
        if not s.get("uint8"):
            return "uint8 images, normalized on the GPU (--uint8): a quarter of the bytes to make, share and copy"
        if not s.get("batched_fetch"):
            return "one dataset call per batch, no collate (--batched-fetch)"
        return "cheaper samples, or more CPUs: its workers are what caps it"
    return "open its timeline: neither the rates nor the trace name the stage"

# -----------------------------------------------------------------------------
# the picture


def timeline(trace: Trace, path: Path, title: str) -> None:
    """Two measured steps from the middle of the trace: CPU ranges in the study's colours, GPU kernels,
    H2D copies; gaps are idle time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    windows = step_windows(trace.steps)
    k = max(0, len(windows) // 2 - 1)
    (i0, (lo, _)), (_, (_, hi)) = windows[k], windows[min(k + 1, len(windows) - 1)]
    ms = lambda ivs: [((s - lo) / 1e6, (e - s) / 1e6) for s, e in clip(ivs, lo, hi)]  # noqa: E731
    fig, ax = plt.subplots(figsize=(11, 3.6))
    rows = [("CPU: Batch i", ms([r for _, r in trace.steps]), "tab:blue"),
            ("CPU: phases", None, None),
            ("CPU: munmap", ms(trace.munmap or []), "dimgray"),
            ("GPU: kernels", ms(union(trace.kernels)), "lightskyblue"),
            ("GPU: H2D copies", ms(union([iv for iv, _, _ in trace.h2d])), "mediumseagreen")]
    if trace.d2h:
        rows.append(("GPU: D2H copies", ms(union([iv for iv, _, _ in trace.d2h])), "orange"))
    for y, (label, bars, color) in enumerate(reversed(rows)):
        if bars is None:
            for phase, c in ((p, c) for p, c in PHASES.items() if trace.phases.get(p)):
                ax.broken_barh(ms(trace.phases.get(phase, [])), (y - 0.35, 0.7), color=c, label=phase)
        else:  # white edges keep back-to-back steps apart
            edge = dict(edgecolor="white", linewidth=1) if label.startswith("CPU: Batch") else {}
            ax.broken_barh(bars, (y - 0.35, 0.7), color=color, **edge)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)])
    ax.set_xlim(0, (hi - lo) / 1e6)
    ax.set_xlabel(f"ms from the start of Batch {i0}")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

# -----------------------------------------------------------------------------
# inputs: a report, its export, a torch trace, or a run folder


def export_sqlite(rep: Path, again: bool = False) -> Path:
    db = rep.with_suffix(".sqlite")
    if db.exists() and db.stat().st_mtime >= rep.stat().st_mtime and not again:
        return db
    nsys = shutil.which("nsys")
    if nsys is None:
        raise NoData(f"{rep}: needs nsys on PATH to export the report to SQLite (tools/get_nsys.sh), "
                     f"or the export itself: nsys export --type sqlite -o {db} {rep}")
    p = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(db), str(rep)],
                       capture_output=True, text=True)
    if p.returncode != 0 or not db.exists():
        raise Unreadable(f"{rep}: nsys export failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return db


def load(path: Path) -> Trace:
    if path.suffix == ".nsys-rep":
        try:
            return load_nsys(export_sqlite(path))
        except Unreadable:  # an export cut short, or another file under its name: the report makes it again
            return load_nsys(export_sqlite(path, again=True))
    if path.suffix == ".sqlite":
        return load_nsys(path)
    return load_torch(path)


def problems(trace: Trace, gpu: bool, ceiling: bool, study: str = "train") -> list[str]:
    """What a report of a GPU run lacks, each as one line naming the cause (a report without steps
    raises NoData before this). The training study copies to the device, its sequel back to the host."""
    if not gpu:
        return []
    lacks = [] if trace.kernels else ["no CUDA kernels in the report (nsys needs --trace=cuda and, with "
                                      "--capture-range=cudaProfilerApi, --profile nsys)"]
    if not ceiling and not (trace.d2h if study == "infer" else trace.h2d):
        lacks.append(f"no {'device-to-host' if study == 'infer' else 'host-to-device'} copies in the report")
    return lacks


def summarize(path: Path, name: str, out_dir: Path, gpu: bool = False, study: str = "train") -> tuple[dict, Trace]:
    """Metrics, the trace's own verdict and the per-step CSV for one trace: the summary, and the trace."""
    trace = load(path)
    lacks = problems(trace, gpu, is_ceiling(path), study)
    for problem in lacks:
        print(f"{name}: {problem}", file=sys.stderr)
    rows = step_metrics(trace)
    with open(out_dir / f"{name}_steps.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    m = medians(rows)
    return dict(name=name, source=path.name, metrics=m, per_step=per_step(trace), problems=lacks,
                trace=verdict(m)), trace


def conclude(summary: dict, trace: Trace, rates: Rates | None, out_dir: Path) -> dict:
    """The summary's one verdict (decide(): the rates first, then the trace), its timeline and its line."""
    t = summary["trace"]
    study = "infer" if trace.inference else "train"
    summary.update(decide(rates, t, study) or dict(verdict=t["verdict"], why=t["why"], cause=None,
                                                   change="profile on a GPU with nsys --trace=cuda"))
    if trace.has_gpu:
        m = summary["metrics"]
        timeline(trace, out_dir / f"{summary['name']}_timeline.png",
                 f"{summary['name']}: {summary['verdict']} (GPU idle {m['gpu_idle_pct']:.0f}% in the traced steps)")
        summary["timeline"] = f"{summary['name']}_timeline.png"
    print(report_line(summary))
    return summary


def analyze(path: Path, name: str, out_dir: Path, gpu: bool = False, study: str = "train") -> dict:
    """Metrics, verdict, per-step CSV and timeline for one trace with no measured rates beside it."""
    summary, trace = summarize(path, name, out_dir, gpu, study)
    if not trace.has_gpu:
        print(f"{name}: no CUDA kernels or copies in {path}: CPU figures only, no verdict and no timeline (profile on "
              "a GPU with nsys --trace=cuda, or train.py --profile torch on CUDA)", file=sys.stderr)
    return conclude(summary, trace, None, out_dir)


def report_line(s: dict) -> str:
    m = s["metrics"]
    figures = f"  median of {m['steps']} traced steps: step {m['step_ms']:.1f} ms, " + ", ".join(
        f"{p} {m[p.replace(' ', '_').lower() + '_ms']:.1f} ms" for p in PHASES
        if p == "Compute" or m[p.replace(' ', '_').lower() + '_ms'])
    if m["gpu_idle_pct"] is None:  # a CPU trace: its figures only; the run says once that there is no GPU
        return f"{s['name']}: CPU ranges only --" + figures[1:]
    copies = "D2H" if m.get("copy_output_ms") else "H2D"
    overlap = m[copies.lower() + "_overlap_pct"]
    return (f"{s['name']}: {s['verdict']} -- {s['why']}. Next: {s['change']}.\n{figures}, GPU idle "
            f"{m['gpu_idle_pct']:.0f}%, {copies} {m[copies.lower() + '_ms']:.1f} ms "
            f"({'-' if overlap is None else format(overlap, '.0f')}% under kernels)")


def reports_of(run_dir: Path, variant: str) -> list[Path]:
    """VARIANT.nsys-rep, or under torchrun one VARIANT.rankK.nsys-rep per rank, rank 0 first."""
    single = run_dir / f"{variant}.nsys-rep"
    if single.exists():
        return [single]
    rank = lambda p: int(p.name.split(".rank")[1].split(".")[0])  # noqa: E731
    return sorted(run_dir.glob(f"{variant}.rank[0-9]*.nsys-rep"), key=rank)


def is_ceiling(report: Path) -> bool:
    """Whether the profiled run had its data on the device (a ceiling: no copies to expect), as its record
    says (VARIANT.nsys.json beside the report); a report without its record is known by its name."""
    record = report.parent / (re.sub(r"\.rank\d+$", "", trace_name(report)) + ".nsys.json")
    try:
        return bool(json.loads(record.read_text())["data_on_gpu"])
    except (OSError, ValueError, KeyError, TypeError):
        return trace_name(report).startswith("ceiling")


def trace_name(path: Path) -> str:
    """streams.rank1.nsys-rep -> streams.rank1; traces/ -> traces"""
    return re.sub(r"(\.pt\.trace)?\.(nsys-rep|sqlite|json)$", "", path.name)


def run_rates(run_dir: Path) -> dict[str, Rates]:
    """Each variant's measured rates, read (and checked) as compare.py reads them; {} when they cannot be."""
    import compare  # note: here, not at the top: compare.py imports this module for decide()
    try:
        run = compare.load_run(run_dir)
    except compare.Malformed as e:
        print(f"analyze.py: {e}: verdicts from the traces alone", file=sys.stderr)
        return {}
    return {v.name: r for v in run.variants if (r := compare.rates(v, run)) is not None}


def analyze_run(run_dir: Path) -> int:
    env = json.loads((run_dir / "env.json").read_text()) if (run_dir / "env.json").exists() else {}
    names = env.get("variants") or sorted({trace_name(p).split(".rank")[0] for p in run_dir.glob("*.nsys-rep")})
    gpu = env.get("gpu") != "cpu"
    rates = run_rates(run_dir) if gpu else {}
    results, failed = {}, 0
    for variant in names:
        for rep in reports_of(run_dir, variant):
            name = trace_name(rep)
            try:
                summary, trace = summarize(rep, name, run_dir, gpu, env.get("study", "train"))
                results[name] = conclude(summary, trace, rates.get(variant), run_dir)
            except NoData as e:
                print(f"analyze.py: {e}", file=sys.stderr)
                results[name] = dict(name=name, source=rep.name, error=str(e))
                failed += 1
    if not results:
        print(f"analyze.py: {run_dir}: no .nsys-rep to analyze (run_all.sh without --no-nsys writes them)",
              file=sys.stderr)
        return 1
    if not gpu:
        print("analyze.py: a CPU run: its traces hold CPU ranges only (each VARIANT_steps.csv), so no verdicts; "
              "on a GPU, nsys --trace=cuda records the kernels and copies they need")
    (run_dir / "diagnosis.json").write_text(json.dumps(results, indent=2))
    return 1 if failed else 0


def check(path: Path) -> int:
    """--check: run_all.sh's test of each report as nsys writes it, so that an empty or partial
    report is a failure with a name, never a blank in the table."""
    env = json.loads((path.parent / "env.json").read_text()) if (path.parent / "env.json").exists() else {}
    name = trace_name(path)
    try:
        lacks = problems(load(path), env.get("gpu") != "cpu", is_ceiling(path), env.get("study", "train"))
    except NoData as e:
        lacks = [str(e)]
    for problem in lacks:
        print(f"{name}: {problem}")
    return 1 if lacks else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="a run_all.sh folder, a .nsys-rep, its .sqlite export, or a torch.profiler trace (folder)")
    p.add_argument("--check", action="store_true",
                   help="only say what each report lacks (steps, kernels, copies), one line each; exit 1 if any")
    args = p.parse_args(argv)
    status = 0
    for path in args.paths:
        if not path.exists():
            p.error(f"{path}: no such file or folder")
        if args.check:
            status |= check(path)
            continue
        try:
            if path.is_dir() and (path / "env.json").exists():
                status |= analyze_run(path)
            elif path.is_dir() and len(traces := torch_traces(path)) > 1:  # under torchrun: one per rank
                for worker, trace in traces.items():
                    analyze(trace, f"{trace_name(path)}.{worker}", path)
            else:
                analyze(path, trace_name(path), path.parent if path.is_file() else path)
        except NoData as e:  # a trace that lacks what the analysis needs: 1; one that cannot be read: 2
            print(f"analyze.py: {e}", file=sys.stderr)
            status = max(status, 2 if isinstance(e, Unreadable) else 1)
    return status


if __name__ == "__main__":
    sys.exit(main())
