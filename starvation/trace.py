"""
A trace, read: an nsys report (through its SQLite export) or a torch.profiler chrome trace, as plain
intervals on one clock (the "Batch i" steps, the ranges inside them, kernels, copies, blocking calls),
and the figures per step that the verdicts weigh. Nothing here judges: the verdicts are verdict.py's.
"""
import collections
import gzip
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from starvation.ranges import RANGES

STEP = re.compile(r"^Batch (\d+)(?: \(rank \d+\))?$")
PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")  # torch.profiler's own range around each step
# torch.profiler's label for the main thread's wait on a DataLoader: the study's "get batch", in a user's job
DATALOADER_NEXT = "enumerate(DataLoader)"
INDUCTOR = re.compile(r"triton_(poi|red|per|tem|for)_")  # the kernels torch.compile generates
RANK_SUFFIX = re.compile(r" \(rank \d+\)$")
# the ranges in a step, in the scripts' NVTX colours, yellow drawn as gold to show on white
PHASES = {name: "gold" if colour == "yellow" else colour for name, colour in RANGES.items() if name != "Batch"}

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


def step_windows(steps: list[tuple[int, Interval]], end: int | None = None) -> list[tuple[int, Interval]]:
    """Step i runs from the start of its "Batch i" range to the start of the next one, so the windows
    tile the timeline and GPU work that lags its CPU range still lands in some step. The last range has
    no successor: it runs to `end`, where the trace's last activity ends (the scripts synchronize the
    device before the capture stops), or, without one, it is dropped once there are three or more."""
    steps = sorted(steps, key=lambda s: s[1][0])
    windows = [(i, (s, steps[k + 1][1][0])) for k, (i, (s, _)) in enumerate(steps[:-1])]
    if end is not None and steps:
        i, (s, e) = steps[-1]
        return windows + [(i, (s, max(e, end)))]
    return windows if len(steps) >= 3 else [(i, r) for i, r in steps]


MAX_STEPS = 200  # a longer trace is read for its middle steps: the figures, not the memory, grow with a report


def middle(steps: list[tuple[int, Interval]]) -> tuple[list[tuple[int, Interval]], int | None, Interval]:
    """At most MAX_STEPS steps from the middle of a long trace, how many it holds where that is more, and the time
    those span: from the first one's start to the start of the one after the last (a step's GPU work may run on
    into the next one's, which is cut at its end). A trace of MAX_STEPS or fewer spans all time."""
    steps = sorted(steps, key=lambda s: s[1][0])
    if len(steps) <= MAX_STEPS:
        return steps, None, (-2 ** 63, 2 ** 63 - 1)
    a = (len(steps) - MAX_STEPS) // 2
    return steps[a:a + MAX_STEPS], len(steps), (steps[a][1][0], steps[a + MAX_STEPS][1][0])


WARMUP_SLOW = 2  # a job's opening steps that take this many times its median step or more are its warm-up


def warmed(steps: list[tuple[int, Interval]]) -> tuple[list[tuple[int, Interval]], int]:
    """A trace held around a whole job (nsys, or torch.profiler without a schedule) opens with its slowest steps:
    CUDA's, cuBLAS's and cuDNN's set-up, the optimizer's state made, the allocator's first blocks. The steps before
    the first that takes under WARMUP_SLOW times the median are left out, a quarter of them at most (a loader that
    delivers in bursts makes every few steps a long one), and their number is returned. Only where the trace may
    hold the job's first step: its first step is numbered 0 (torch.profiler's schedule numbers the steps it skipped,
    and the middle of a long trace is past its warm-up)."""
    steps = sorted(steps, key=lambda s: s[1][0])
    lengths = [hi - lo for _, (lo, hi) in step_windows(steps)]
    if len(lengths) < 8 or steps[0][0] != 0:
        return steps, 0
    typical = sorted(lengths)[len(lengths) // 2]
    k = min(next(j for j, n in enumerate(lengths) if n < WARMUP_SLOW * typical), len(steps) // 4)
    return steps[k:], k


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
    nccl: list[Interval] = field(default_factory=list)                   # NCCL's kernels: DDP's all-reduce
    blocking: list[Interval] = field(default_factory=list)               # copy/sync CUDA calls, main thread
    munmap: list[Interval] | None = None                                 # None: the trace cannot tell
    found_by: str = "the study's NVTX ranges"  # how the steps were found: a job of the user's own has other names
    workers: int | None = None  # the DataLoader's worker processes that the trace shows; None: it cannot tell
    steps_found: int | None = None  # the steps in the whole trace, where they are more than `steps` (MAX_STEPS)
    processes: list[int] = field(default_factory=list)  # an nsys report's processes with steps: DDP's ranks
    pin_busy: float | None = None  # the share of the steps' span the DataLoader's pin-memory thread ran; None: unknown
    compiled: bool = False  # torch.compile's kernels (Inductor's) among the traced ones: the step is compiled
    python_stacks: bool = False  # torch.profiler recorded Python's frames (with_stack): it slows the host's calls
    kernel_streams: list = field(default_factory=list)  # the stream and the name of each of `kernels`, where the
    kernel_names: list[str] = field(default_factory=list)  # trace gives them (a hand-made trace may not)
    h2d_stream_ns: collections.Counter = field(default_factory=collections.Counter)  # the copies' ns on each stream

    @property
    def ours(self) -> bool:
        """Whether the steps are the study's "Batch i" ranges (train.py's or infer.py's own trace)."""
        return self.found_by == "the study's NVTX ranges"

    @property
    def has_gpu(self) -> bool:
        return bool(self.kernels or self.h2d or self.d2h)

    @property
    def compute_stream(self):
        """The stream with the most kernel time: the step's own. None where the trace does not say which stream ran
        each kernel."""
        if not self.kernels or len(self.kernel_streams) != len(self.kernels) or None in self.kernel_streams:
            return None
        ns = collections.Counter()
        for (s, e), stream in zip(self.kernels, self.kernel_streams):
            ns[stream] += e - s
        return ns.most_common(1)[0][0]

    @property
    def copy_stream(self) -> str | None:
        """Where the copies to the device ran, by their time: on the compute stream (where a copy and the step's
        kernels wait for each other), on a side stream, or on both."""
        copies, compute = self.h2d_stream_ns, self.compute_stream
        if not copies or compute is None or None in copies:  # (a trace that does not say)
            return None
        share = copies[compute] / sum(copies.values())
        return ("the compute stream" if share > 0.9 else "a side stream" if share < 0.1 else
                "the compute and a side stream")

    @property
    def side_kernels(self) -> list[tuple[Interval, str]]:
        """The kernels on other streams than the compute stream, with their names: work beside the step, a
        decoder's or an augmentation's, which shares the GPU's SMs with it. Empty where the trace does not say
        which stream ran each kernel."""
        compute = self.compute_stream
        if compute is None:
            return []
        return [(iv, name) for iv, stream, name in zip(self.kernels, self.kernel_streams, self.kernel_names)
                if stream != compute]

    @property
    def inference(self) -> bool:
        """infer.py's loop (part 2: outputs back to the host), told by its NVTX ranges."""
        return bool(self.phases.get("copy output"))


def step_ranges(rows, step_range: str | None = None) -> tuple[list[tuple[int, Interval, object]], str]:
    """The (i, range, thread) of each step among (name, start, end, thread) rows, and how they were found: the
    study's "Batch i"; else, in a job of the user's own, the ranges --step-range names, or torch.profiler's
    ProfilerStep#N."""
    steps = [(int(m.group(1)), (s, e), tid) for name, s, e, tid in rows if (m := STEP.match(name or ""))]
    if steps:
        return steps, "the study's NVTX ranges"
    if step_range is not None:
        pattern = re.compile(step_range)
        # the outermost ranges that match: 'step' matches a step's own range and the optimizer's inside it
        # (torch.profiler's Optimizer.step#SGD.step), and each step would be cut in two
        mine, reach = [], {}
        for s, e, tid in sorted((s, e, tid) for name, s, e, tid in rows if pattern.search(name or "")):
            if s >= reach.get(tid, s):
                mine.append((s, e, tid))
                reach[tid] = max(e, s + 1)
        return [(k, (s, e), tid) for k, (s, e, tid) in enumerate(mine)], f"ranges matching {step_range!r}"
    return ([(int(m.group(1)), (s, e), tid) for name, s, e, tid in rows if (m := PROFILER_STEP.match(name or ""))],
            "torch.profiler's ProfilerStep#N")


def nvtx_ranges(rows, step_range: str | None = None) -> tuple[list, dict, object, str]:
    """Split (name, start, end, thread) rows into steps and phases, on the thread of the steps (step_ranges), and
    say how the steps were found. In a job of the user's own, the DataLoader's __next__, as torch.profiler labels
    it, stands for "get batch"."""
    steps, found_by = step_ranges(rows, step_range)
    if not steps:
        return [], {p: [] for p in PHASES}, None, ""
    main_tid = statistics.mode(t for _, _, t in steps)
    phases = {p: [(s, e) for name, s, e, tid in rows if RANK_SUFFIX.sub("", name or "") == p and tid == main_tid]
              for p in PHASES}
    if found_by != "the study's NVTX ranges" and not phases["get batch"]:
        phases["get batch"] = [(s, e) for name, s, e, tid in rows
                               if (name or "").startswith(DATALOADER_NEXT) and tid == main_tid]
    return [(i, r) for i, r, t in steps if t == main_tid], phases, main_tid, found_by


def no_steps(source: str, step_range: str | None, infer: bool, names: list[str], cuda: bool,
             calls: bool) -> NoData:
    """Why no steps were found, in one line. `names`: the trace's ranges (NVTX, or torch.profiler's labels), `cuda`:
    whether it holds any CUDA work; `calls`: its CUDA calls were looked at for steps that repeat them. run_all.sh's
    own reports (not infer) must hold the study's ranges."""
    if not infer:
        return NoData(f"{source}: no NVTX 'Batch i' ranges: run train.py with its NVTX ranges on (no --no-nvtx), and "
                      "nsys with --trace=nvtx (nsys 2023.4 drops the ranges of the nvtx package from 0.2.12 on; "
                      "train.py then falls back to torch.cuda.nvtx); torch.profiler: --profile torch records them as "
                      "labels")
    seen = list(dict.fromkeys(re.sub(r"\d+", "N", n) for n in names if n))  # (train_step 0, 1, ...: train_step N)
    some = ", ".join(repr(n) for n in seen[:5])
    if step_range is not None:
        return NoData(f"{source}: no range matches --step-range {step_range!r}" + (
            f" (its ranges include {some})" if seen else " (it holds no NVTX ranges or torch.profiler labels; nsys "
                                                         "2023.4 drops the nvtx package's from 0.2.12 on, and keeps "
                                                         "torch.cuda.nvtx's)"))
    if not seen and not cuda:
        return Unreadable(f"{source}: no CUDA work, no NVTX ranges and no torch.profiler steps: not a trace of a "
                          "PyTorch job on a GPU (profile one with nsys --trace=cuda,nvtx, or with torch.profiler, "
                          "calling prof.step() once a step)")
    tried = "no torch.profiler ProfilerStep#N (prof.step() once a step makes them)" + (
        ", no CUDA calls of its main thread that repeat once a step, three times or more" if calls else "")
    return NoData(f"{source}: its steps cannot be found: {tried}, and " + (
        f"--step-range REGEX can name a range of its own that holds each step ({some})" if seen else
        "no range of its own for --step-range REGEX to name"))


def load_nsys(sqlite_path: Path, step_range: str | None = None, infer: bool = True,
              process: int | None = None) -> Trace:
    try:
        return read_nsys(sqlite_path, step_range, infer, process)
    except sqlite3.DatabaseError as e:  # OperationalError is one too, and says the schema differs
        if isinstance(e, sqlite3.OperationalError) and "no such" in str(e):
            raise NoData(f"{sqlite_path}: a schema this script does not know ({e}); it reads nsys 2023.4's "
                         "export") from None
        raise Unreadable(f"{sqlite_path}: not a readable SQLite export ({e})") from None


def read_nsys(sqlite_path: Path, step_range: str | None = None, infer: bool = True,
              process: int | None = None) -> Trace:
    """The trace of one process of the report: `process` (a globalPid), or the one with the most steps. A report
    of several processes with steps of their own (DDP's ranks under one nsys) lists them all in .processes."""
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
        named, found_by = step_ranges(rows, step_range)
        # (the study's own reports need none of the calls: their ranges hold the steps and "get batch")
        calls = main_thread_calls(con, tables) if found_by != "the study's NVTX ranges" else {}
        if named:  # the processes with steps, the most first
            steps_of = collections.Counter(process_of(t) for *_, t in named)
            processes = sorted(steps_of, key=lambda p: (-steps_of[p], p))
        elif step_range is None and calls and infer:  # those whose main thread calls CUDA a quarter as much as the most
            most = len(next(iter(calls.values())))
            processes = [process_of(t) for t, c in calls.items() if 4 * len(c) >= most]
        else:
            processes = []
        process = processes[0] if process is None and processes else process
        if process is not None:
            rows = [r for r in rows if process_of(r[3]) == process]
        steps, phases, main_tid, found_by = nvtx_ranges(rows, step_range)
        if not steps and step_range is None and infer and (main := [t for t in calls if process_of(t) == process]):
            main_tid = main[0]
            steps, found_by = repeating_steps(calls[main_tid]), "CUDA calls that repeat once a step"
        if not steps:
            raise no_steps(str(sqlite_path), step_range, infer, [name for name, *_ in rows], bool(calls) or any(
                t in tables for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")), calls=True)
        steps, found, (lo, hi) = middle(steps)
        if found_by != "the study's NVTX ranges" and not phases["get batch"]:  # a job of the user's own
            phases["get batch"] = host_gaps(calls.get(main_tid, []))
        trace = Trace(str(sqlite_path), steps, {p: clip(ivs, lo, hi) for p, ivs in phases.items()},
                      found_by=found_by, steps_found=found, processes=processes)

        def within(table: str, gpu: bool = False) -> str:
            """SQL: a row of `table` (its alias and a dot) in the steps' span (a long report's middle ones); the GPU's
            work of their process alone, where the report holds several."""
            span = f"{table}start < {hi} AND {table}end > {lo}"
            return span + (f" AND {table}globalPid = {process}" if gpu and len(processes) > 1 else "")
        if {"SCHED_EVENTS", "ThreadNames"} <= tables:
            trace.pin_busy = thread_busy(con, "pt_data_pin", process_of(main_tid), steps[0][1][0], steps[-1][1][1])
        if found_by != "the study's NVTX ranges" and "PROCESSES" in tables and len(processes) < 2:
            # (its DataLoader's workers: nsys does not say whose they are where the report holds several processes)
            trace.workers = con.execute("SELECT COUNT(*) FROM PROCESSES WHERE name = 'pt_data_worker'").fetchone()[0]
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
            for s, e, name, stream in con.execute(
                    "SELECT k.start, k.end, s.value, k.streamId FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                    f"LEFT JOIN StringIds s ON k.shortName = s.id WHERE {within('k.', gpu=True)}"):
                if (name or "").startswith("nccl"):
                    trace.nccl.append((s, e))
                else:
                    trace.kernels.append((s, e))
                    trace.kernel_streams.append(stream)
                    trace.kernel_names.append(name or "")
                trace.compiled = trace.compiled or bool(INDUCTOR.match(name or ""))
        if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
            for s, e, kind, src, dst, n, stream in con.execute(
                    "SELECT start, end, copyKind, srcKind, dstKind, bytes, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                    f"WHERE {within('', gpu=True)}"):
                if kind == 1:  # ENUM_CUDA_MEMCPY_OPER: 1 host-to-device; ENUM_CUDA_MEM_KIND: 0 pageable
                    trace.h2d.append(((s, e), n, src == 0))
                    trace.h2d_stream_ns[stream] += e - s
                elif kind == 2:  # device-to-host: the host side is the destination
                    trace.d2h.append(((s, e), n, dst == 0))
                else:
                    trace.other_gpu.append((s, e))
        if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
            trace.other_gpu += con.execute(
                f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE {within('', gpu=True)}").fetchall()
        if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
            trace.blocking = con.execute(
                "SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id "
                "WHERE r.globalTid = ? AND (s.value LIKE 'cudaMemcpy%' OR s.value LIKE '%Synchronize%') "
                f"AND {within('r.')}", (main_tid,)).fetchall()
        if "OSRT_API" in tables:
            trace.munmap = con.execute(
                "SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON o.nameId = s.id "
                f"WHERE o.globalTid = ? AND s.value = 'munmap' AND {within('o.')}", (main_tid,)).fetchall()
    finally:
        con.close()
    return trace


def thread_busy(con, name: str, process: int, lo: int, hi: int) -> float | None:
    """The share of [lo, hi) that the process's thread of that name (torch names its threads: pt_data_pin is the
    DataLoader's pin-memory thread) ran on a CPU, from nsys's context switches; None where it has no such thread."""
    tid = next((t for (t,) in con.execute("SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON t.nameId = s.id "
                                          "WHERE s.value = ?", (name,)) if process_of(t) == process), None)
    if tid is None or hi <= lo:
        return None
    ran, since = 0, None
    for start, scheduled_in in con.execute("SELECT start, isSchedIn FROM SCHED_EVENTS "
                                           "WHERE globalTid = ? AND start < ? ORDER BY start", (tid, hi)):
        if scheduled_in:
            since = start
        elif since is not None:
            ran, since = ran + max(0, min(start, hi) - max(since, lo)), None
    return (ran + (max(0, hi - max(since, lo)) if since is not None else 0)) / (hi - lo)


# a job's own steps, where nothing names them: the loop's thread makes the same CUDA calls, in the same order,
# every step (its copies, its forward's launches, the optimizer's), so the sequence of calls has a period
CALLS = ("cudaLaunch%", "cuLaunch%", "cudaGraphLaunch%", "cudaMemcpy%", "cudaMemset%", "%Synchronize%")
PERIOD_AGREE = 0.9  # the share of calls that must match the call one period later
PERIOD_BETTER = 0.02  # a longer period (not a multiple) that matches this much more is the loop's, not a block's
HOST_GAP = 1_000_000  # ns: a stretch of the loop's thread this long without a CUDA call is host work


class Call(NamedTuple):
    """A CUDA call of the loop's thread."""
    start: int
    end: int
    what: str   # the call, and the kernel it launched or the kind of copy it made
    h2d: bool   # it copied from the host to the device: the batch, in a training loop


def process_of(tid: int) -> int:
    """nsys's globalPid of a globalTid: the thread's process."""
    return (tid >> 24) << 24


def pid(process: int) -> int:
    """The operating system's id of a process, from nsys's globalPid."""
    return (process >> 24) & 0xFFFFFF


def main_thread_calls(con, tables) -> dict[int, list[Call]]:
    """Every launch, copy, memset and sync that each process's main thread made (a Python program's main thread has
    its process's id: nsys's globalTid holds both), in order, by that thread; the busiest first."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in tables:
        return {}
    names = " OR ".join("s.value LIKE ?" for _ in CALLS)
    same_process = "{0}.correlationId = r.correlationId AND {0}.globalPid = (r.globalTid >> 24) << 24"
    kernel = ("LEFT JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON " + same_process.format("k")
              if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else "")
    copy = ("LEFT JOIN CUPTI_ACTIVITY_KIND_MEMCPY m ON " + same_process.format("m")
            if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables else "")
    by_thread: dict[int, list[Call]] = {}
    for t, s, e, what in con.execute(
            f"SELECT r.globalTid, r.start, r.end, s.value || ':' || COALESCE({'k.shortName' if kernel else 'NULL'}, "
            f"'') || ':' || COALESCE({'m.copyKind' if copy else 'NULL'}, '') "
            f"FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id {kernel} {copy} "
            f"WHERE ({names}) AND (r.globalTid >> 24) & 16777215 = r.globalTid & 16777215 ORDER BY r.start",
            CALLS):
        # (ENUM_CUDA_MEMCPY_OPER: copyKind 1 is host-to-device)
        by_thread.setdefault(t, []).append(Call(s, e, what, what.endswith(":1")))
    return dict(sorted(by_thread.items(), key=lambda kv: -len(kv[1])))


def repeating_steps(calls: list[Call]) -> list[tuple[int, Interval]]:
    """Steps from the period of the loop's work: the smallest P such that nearly every launch or copy to the
    device, its copies included, is the one P such calls later, seen at least three times (in a loop that copies
    nothing to the device, the smallest that no longer period but P's multiples repeats better). Copies back and
    syncs are left out of the search: a loop makes them now and then (a loss logged every N steps), and each
    would shift the calls after it. Each step starts where the loop's thread waits longest before a call, on
    average: before a copy to the device where the period has one (the loader's turn, in a loop that fetches a
    batch and then copies it), and runs to the next such place."""
    import numpy as np
    body = [j for j, c in enumerate(calls) if not (c.what.endswith(":2") or "Synchronize" in c.what)]
    codes = {w: k for k, w in enumerate(dict.fromkeys(calls[j].what for j in body))}
    every = np.array([codes[calls[j].what] for j in body])
    seq, h2d = every[:20000], np.array([calls[j].h2d for j in body[:20000]])

    # a period repeats the calls and, where the loop copies to the device, its copies too: a block of launches
    # that repeats within a step (a model's identical layers) copies nothing
    def agreement(p: int) -> float:
        same = seq[:-p] == seq[p:]
        return float(same.mean()) if not h2d[:-p].any() or same[h2d[:-p]].mean() >= PERIOD_AGREE else 0.0
    lengths = range(1, len(seq) // 3 + 1)
    if h2d.any():
        period = next((p for p in lengths if agreement(p) >= PERIOD_AGREE), None)
    else:  # the smallest period that no longer one, but its own multiples, repeats better: a deep stack of identical
        # blocks (a transformer's) repeats one block's calls for nearly all of a step, and the step's for all of them.
        # (Where the loop copies, the copies tell a step from a block; and a cycle of steps, the one that logs its
        # accuracy every N, also repeats better than a step does.)
        agree = np.array([0.0] + [agreement(p) for p in lengths])
        q = np.arange(len(agree))
        period = next((int(p) for p in np.flatnonzero(agree >= PERIOD_AGREE)
                       if not (agree[(q > p) & (q % p != 0)] > agree[p] + PERIOD_BETTER).any()), None)
    if period is None:
        return []
    # (the wait before body call m: from the end of the call before it, whichever that was; the first has none)
    waits = np.array([calls[j].start - calls[j - 1].end if j else 0 for j in body])
    # where a step starts: the place in a period from the middle before which the loop waits longest, on average
    # (the mean, not the median: workers that deliver in bursts make most waits short). The calls found there (as
    # many as a period holds, up to 16) open each step: a cut is made a period after the last, where they follow,
    # or where they follow nearest to it, within half a period. A step that makes more calls (the first, where an
    # optimizer makes its state; one that logs its accuracy) shifts those after it
    ref = len(body) // period // 2 * period
    before_copy = [(ref + o) % period for o in range(period) if calls[body[ref + o]].h2d]
    phase = max(before_copy or range(period), key=lambda o: waits[o::period].mean())
    k = min(period, 16, len(every) - ref - phase)
    opens = np.flatnonzero((np.lib.stride_tricks.sliding_window_view(every, k) == every[ref + phase:][:k]).all(axis=1))
    cuts: list[int] = []
    m = phase
    while m < len(every):
        i, j = np.searchsorted(opens, [m - period // 2, m + period // 2 + 1])
        if i < j:
            m = int(opens[i:j][np.argmin(np.abs(opens[i:j] - m))])
        elif j < len(opens):  # no step opens near m: on to the next that does
            m = int(opens[j])
        else:
            break
        if body[m]:  # (each m lies past the last cut: at least half a period after it)
            cuts.append(m)
        m += period
    bounds = [calls[body[m] - 1].end for m in cuts]
    # the last step, where its calls are all there (a period's at least), ends with its last launch or copy: a sync
    # after it may wait for the work that the loop queued ahead
    if cuts and len(body) - cuts[-1] >= period:
        bounds.append(calls[body[-1]].end)
    return [(k, (lo, hi)) for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def host_gaps(calls: list[Call]) -> list[Interval]:
    """The loop's thread without a CUDA call for HOST_GAP or longer, up to a copy to the device: where a job of the
    user's own waits for its batch (or prepares it), the stand-in for "get batch" where no range names it. Host
    work that ends elsewhere (ranking the predictions that a sync brought back, say) is not loading."""
    return [(a.end, b.start) for a, b in zip(calls, calls[1:]) if b.h2d and b.start - a.end >= HOST_GAP]


def torch_traces(folder: Path) -> dict[str, Path]:
    """The newest whole trace of each process in a torch.profiler folder, by its worker name: tensorboard_trace_handler
    writes WORKER.TIME.pt.trace.json (.gz with use_gzip), WORKER being rankK under torchrun (train.py names them
    so). A profiler that stops mid-cycle (its loop ended) writes a short trace last, of a step or two: the newest
    trace at least half the size of the worker's largest is taken."""
    found: dict[str, list[tuple[float, int, Path]]] = {}
    try:
        for f in [*folder.glob("*.pt.trace.json"), *folder.glob("*.pt.trace.json.gz")]:
            st = f.stat()
            found.setdefault(f.name.split(".")[0], []).append((st.st_mtime, st.st_size, f))
    except OSError as e:  # a link among them that leads nowhere, or round in a loop
        raise Unreadable(f"{e.filename}: {e.strerror.lower()}") from None
    if not found:
        raise Unreadable(f"{folder}: no *.pt.trace.json: make one with train.py --profile torch --profile-dir "
                         f"{folder}")
    newest = {}
    for worker, traces in sorted(found.items()):
        largest = max(size for _, size, _ in traces)
        newest[worker] = max((t for t in traces if 2 * t[1] >= largest), key=lambda t: t[0])[2]
    return newest


def load_torch(path: Path, step_range: str | None = None) -> Trace:
    """A chrome trace from torch.profiler (a file, or a folder holding one process's traces: the newest)."""
    files = [max(torch_traces(path).values(), key=lambda f: f.stat().st_mtime)] if path.is_dir() else [path]
    try:
        raw = files[-1].read_bytes()
        # torch.profiler's tensorboard_trace_handler(use_gzip=True) writes .pt.trace.json.gz
        trace = json.loads((gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode())
    except (ValueError, RecursionError, EOFError, gzip.BadGzipFile, zlib.error) as e:  # not JSON, not UTF-8,
        # nested past any trace, or a gzip stream cut short
        raise Unreadable(f"{files[-1]}: not a torch.profiler chrome trace ({type(e).__name__})") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise Unreadable(f"{files[-1]}: not a torch.profiler chrome trace (it needs an object whose traceEvents "
                         "is a list of events)")
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    bad = next((e for e in spans if not all(isinstance(e.get(k), (int, float)) for k in ("ts", "dur"))), None)
    if bad is not None:
        raise Unreadable(f"{files[-1]}: an event whose ts or dur is not a number: {json.dumps(bad)[:120]}")

    def iv(e) -> Interval:
        s = int(e["ts"] * 1000)
        return s, s + int(e["dur"] * 1000)
    rows = [(e["name"], *iv(e), e.get("tid")) for e in spans if e.get("cat") == "user_annotation"]
    steps, phases, main_tid, found_by = nvtx_ranges(rows, step_range)
    calls = torch_calls(spans, iv) if not steps and step_range is None else {}
    if calls:  # (no prof.step() in the loop: its steps are found as in an nsys report)
        main_tid, found_by = next(iter(calls)), "CUDA calls that repeat once a step"
        steps = repeating_steps(calls[main_tid])
        loader_waits = [(s, e) for name, s, e, tid in rows if name.startswith(DATALOADER_NEXT) and tid == main_tid]
        phases["get batch"] = loader_waits or host_gaps(calls[main_tid])
    if not steps:
        raise no_steps(str(files[-1]), step_range, True, [name for name, *_ in rows],
                       any(e.get("cat") in ("kernel", "gpu_memcpy", "cuda_runtime") for e in spans), bool(calls))
    loader = next((name for name, *_ in rows if name.startswith(DATALOADER_NEXT)), "")
    steps, found, (lo, hi) = middle(steps)
    trace = Trace(str(files[-1]), steps, {p: clip(ivs, lo, hi) for p, ivs in phases.items()}, munmap=None,
                  found_by=found_by, workers=0 if "SingleProcess" in loader else None, steps_found=found,
                  python_stacks=any(e.get("cat") == "python_function" for e in spans))
    for e in spans:
        cat, name = e.get("cat"), e.get("name", "")
        if iv(e)[0] >= hi or iv(e)[1] <= lo:  # (outside a long trace's middle steps)
            continue
        stream = (e.get("args") or {}).get("stream")
        if cat == "kernel":
            if name.startswith("nccl"):
                trace.nccl.append(iv(e))
            else:
                trace.kernels.append(iv(e))
                trace.kernel_streams.append(stream)
                trace.kernel_names.append(name)
            trace.compiled = trace.compiled or bool(INDUCTOR.match(name))
        elif cat == "gpu_memcpy" and ("HtoD" in name or "DtoH" in name):
            (trace.h2d if "HtoD" in name else trace.d2h).append(
                (iv(e), int(e.get("args", {}).get("bytes", 0)), "Pageable" in name))
            trace.h2d_stream_ns[stream] += e["dur"] if "HtoD" in name else 0
        elif cat in ("gpu_memcpy", "gpu_memset"):
            trace.other_gpu.append(iv(e))
        elif cat == "cuda_runtime" and e.get("tid") == main_tid and (
                name.startswith("cudaMemcpy") or "Synchronize" in name):
            trace.blocking.append(iv(e))
    return trace


def torch_calls(spans: list[dict], iv) -> dict[object, list[Call]]:
    """A torch.profiler trace's CUDA calls, as main_thread_calls reads an nsys report's: each thread's launches,
    copies, memsets and syncs, in order, with the kernel each launched or the kind of copy it made (matched by
    kineto's correlation id); the main thread first (its id is its process's: autograd runs a CUDA backward on a
    thread of its own, which copies nothing to the device), then the busiest."""
    wanted = re.compile("|".join(c.replace("%", ".*") for c in CALLS))
    made = {}  # correlation id -> the kernel launched, or the copy's kind (1: host to device, 2: back)
    for e in spans:
        corr = (e.get("args") or {}).get("correlation")
        if corr is None:
            continue
        if e.get("cat") == "kernel":
            made[corr] = f"{e['name']}:"
        elif e.get("cat") == "gpu_memcpy":
            made[corr] = ":1" if "HtoD" in e["name"] else ":2" if "DtoH" in e["name"] else ":"
    by_thread: dict[object, list[Call]] = {}
    main = set()
    for e in sorted((e for e in spans if e.get("cat") == "cuda_runtime" and wanted.fullmatch(e.get("name", ""))),
                    key=lambda e: e["ts"]):
        what = f"{e['name']}:{made.get((e.get('args') or {}).get('correlation'), ':')}"
        by_thread.setdefault(e.get("tid"), []).append(Call(*iv(e), what, what.endswith(":1")))
        if e.get("tid") == e.get("pid"):
            main.add(e.get("tid"))
    return dict(sorted(by_thread.items(), key=lambda kv: (kv[0] not in main, -len(kv[1]))))


# -----------------------------------------------------------------------------
# the figures per step


def copy_spans(copies: list[Interval], computes: list[Interval]) -> list[Interval]:
    """Each "copy batch" range stretched to the start of the next "Compute": the CPU-side clean-up
    after a copy (the study's munmap of the batch's memory) can fall in that gap, before any kernel
    of the step is launched."""
    starts = sorted(s for s, _ in computes)
    return [(s, next((c for c in starts if c >= e), e)) for s, e in copies]


def step_metrics(trace: Trace) -> list[dict]:
    h2d = [iv for iv, _, _ in trace.h2d]
    gpu = trace.kernels + h2d + [iv for iv, _, _ in trace.d2h] + trace.other_gpu
    side = [iv for iv, _ in trace.side_kernels]
    rows = []
    ends = [e for _, (_, e) in trace.steps] + [e for _, e in trace.kernels + h2d + trace.other_gpu] + \
        [e for (_, e), _, _ in trace.d2h]
    for i, (lo, hi) in step_windows(trace.steps, end=max(ends)):
        length = hi - lo
        copies = [(iv, n, pageable) for iv, n, pageable in trace.h2d if lo <= iv[0] < hi]
        copy_ranges = copy_spans(clip(trace.phases["copy batch"], lo, hi), clip(trace.phases["Compute"], lo, hi))
        h2d_ns = total(clip(h2d, lo, hi))
        d2h = clip([iv for iv, _, _ in trace.d2h], lo, hi)
        busy = union(clip(gpu, lo, hi))
        row = dict(
            step=i, step_ms=length / 1e6,
            gpu_busy_pct=100 * sum(e - s for s, e in busy) / length if trace.has_gpu else None,
            kernel_busy_pct=100 * total(clip(trace.kernels, lo, hi)) / length if trace.has_gpu else None,
            h2d_ms=h2d_ns / 1e6 if trace.has_gpu else None,
            h2d_bytes=sum(n for _, n, _ in copies),
            pageable_bytes=sum(n for _, n, pageable in copies if pageable),
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
        row["sync_ms"] = total(clip(trace.blocking, lo, hi)) / 1e6  # the main thread in CUDA copy and sync calls
        # NCCL's kernels with no compute kernel beside them: a rank waiting in an all-reduce for a later one
        nccl = clip(trace.nccl, lo, hi)
        row["nccl_alone_ms"] = (total(nccl) - overlap(nccl, clip(trace.kernels, lo, hi))) / 1e6
        # kernels of other streams than the step's, running beside it: they take SMs from the step's own
        row["side_kernel_ms"] = total(clip(side, lo, hi)) / 1e6 if trace.has_gpu else None
        # the GPU's idle between two of its works, in gaps shorter than HOST_GAP: too short for the loop to do host
        # work of its own (or to wait for data) in them, so the GPU ran each kernel as soon as the CPU launched it
        short = [b[0] - a[1] for a, b in zip(busy, busy[1:]) if b[0] - a[1] < HOST_GAP]
        row["launch_gaps"] = len(short) if trace.has_gpu else None
        row["launch_gaps_ms"] = sum(short) / 1e6 if trace.has_gpu else None
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
    out["h2d_stream"] = trace.copy_stream
    # the kernels beside the step that take the most time, summed over their launches: ms a step, by name
    beside = collections.Counter()
    for (s, e), name in trace.side_kernels:
        beside[short_name(name)] += (e - s) / n / 1e6
    out["beside_kernels"] = {name: round(ms, 2) for name, ms in beside.most_common(3)}
    return out


def short_name(kernel: str) -> str:
    """A kernel's name without its return type, namespace-qualified template arguments and parameters:
    'void nvjpeg::rgba2rgb<(nvjpegOutputFormat_t)3, ...>(...)' -> 'nvjpeg::rgba2rgb'."""
    name = re.split(r"[<(]", kernel.removeprefix("void "), maxsplit=1)[0].strip()
    return name or kernel[:60]


def medians(rows: list[dict]) -> dict:
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows if r[key] is not None]
        out[key] = statistics.median(values) if values else None
    out.pop("step")
    out["steps"] = len(rows)
    return out


def window_means(rows: list[dict]) -> dict:
    """Each figure over the whole window, per step: a time's total over the steps, divided by their number; a
    share of the whole window (a share of the copies' time, for the copies' overlap). For a job of the user's
    own, whose loader may deliver in bursts: the median step is then a fast one, and hides the waits."""
    out, n = {}, len(rows)
    for key in rows[0]:
        weight = ("h2d_ms" if key == "h2d_overlap_pct" else "d2h_ms" if key == "d2h_overlap_pct"
                  else "step_ms" if key.endswith("_pct") else None)
        values = [(r[key], r[weight] if weight else 1) for r in rows if r[key] is not None]
        whole = sum(w for _, w in values)
        out[key] = (sum(v * w for v, w in values) / whole if weight else sum(v for v, _ in values) / n) \
            if values and whole else None
    out.pop("step")
    out["steps"] = n
    return out




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


MIN_STEPS = 3  # fewer make no median, no typical pair of steps, and no period seen three times


def load(path: Path, step_range: str | None = None, infer: bool = True, process: int | None = None) -> Trace:
    """A trace of any kind (load_any); step_range: a regex naming the ranges that hold a job's steps, where
    they are not the study's; infer: steps from repeating CUDA calls where nothing names them (not for
    run_all.sh's own reports, which must hold the study's ranges); process: which of an nsys report's
    processes (Trace.processes), where it holds several with steps."""
    try:
        trace = load_any(path, step_range, infer, process)
    except OSError as e:  # cannot be read: permissions, a link that leads nowhere
        raise Unreadable(f"{e.filename or path}: cannot be read ({e.strerror})") from None
    if len(trace.steps) < MIN_STEPS:
        n = len(trace.steps)
        raise NoData(f"{path}: {n} step{'' if n == 1 else 's'} found ({trace.found_by}): a verdict needs "
                     f"{MIN_STEPS} or more: record more (torch.profiler: schedule(active=10); analyze.py --run: a "
                     "longer --window)")
    return trace


def load_any(path: Path, step_range: str | None = None, infer: bool = True, process: int | None = None) -> Trace:
    if path.suffix == ".nsys-rep":
        try:
            return load_nsys(export_sqlite(path), step_range, infer, process)
        except Unreadable:  # an export cut short, or another file under its name: the report makes it again
            return load_nsys(export_sqlite(path, again=True), step_range, infer, process)
    if path.suffix == ".sqlite":
        return load_nsys(path, step_range, infer, process)
    return load_torch(path, step_range)

