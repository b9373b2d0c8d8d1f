"""
Diagnose GPU starvation from a trace, the way the case study does it by eye in the Nsight GUI:
per step, how long the GPU idles, how much of the host-to-device copy hides under kernels, where
the CPU waits, and a verdict naming the change to make next.

    python analyze.py results/latest              # every variant's report in a run_all.sh folder
    python analyze.py streams.nsys-rep            # one nsys report (exported to SQLite with nsys)
    python analyze.py traces/                     # a torch.profiler trace (train.py --profile torch)
    python analyze.py my_job.pt.trace.json.gz     # your own job: its ProfilerStep#N ranges are its steps
    python analyze.py --step-range '^step' my.nsys-rep   # your own job's NVTX ranges, one a step
    python analyze.py --run -- python my_train.py ARGS   # your own job under nsys: a window of steady steps

Steps are the NVTX "Batch i" ranges that train.py writes (any script with such ranges works); under
torchrun they end with the rank, "Batch i (rank 1)", and run_all.sh --gpus N writes one report per rank
(VARIANT.rankK.nsys-rep), each diagnosed on its own.

A job of your own has other names: its steps are the ranges --step-range names, torch.profiler's
ProfilerStep#N, or else the CUDA calls of the loop's thread that repeat once a step. The
DataLoader's __next__, or the loop's wait without a CUDA call up to its copy to the device, stands for
"get batch"; the figures are over the whole window; the change is named in the job's own words. An nsys
report of a job under torchrun is read a process at a time, each rank named by its pid.

NCCL's kernels (DDP's all-reduce) are kept apart from the compute kernels: a rank waiting in an
all-reduce for a starved peer is idle, not busy, and its verdict says it waits for another rank. A trace
of more than 200 steps is read for its middle 200.

Writes, beside the input: NAME_steps.csv (one row per step), NAME_timeline.png (two steps), and
for a run folder diagnosis.json: every figure taken from a trace (H2D time, bytes and GB/s, kernel
time, pageable against pinned copies, idle, overlap), which compare.py tabulates, and what each
report lacks.

    python analyze.py --check results/latest/streams.nsys-rep   # what the report lacks; exit 1 if any
"""
import argparse
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from starvation import records
from starvation.trace import (PHASES, NoData, Trace, Unreadable, clip, load, medians, per_step, pid, step_metrics,
                              step_windows, torch_traces, union, warmed, window_means)
from starvation.verdict import Rates, decide, user_change, verdict

# -----------------------------------------------------------------------------
# the picture


def timeline(trace: Trace, path: Path, title: str) -> None:
    """Two typical steps in a row (the median pair): CPU ranges in the study's colours, GPU kernels, H2D
    copies; gaps are idle time."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    windows = step_windows(trace.steps)
    # the median pair: the two steps in a row whose length together is the median of all such pairs
    pairs = sorted(range(max(1, len(windows) - 1)),
                   key=lambda j: sum(hi - lo for _, (lo, hi) in windows[j:j + 2]))
    k = pairs[len(pairs) // 2]
    (i0, (lo, _)), (_, (_, hi)) = windows[k], windows[min(k + 1, len(windows) - 1)]
    ms = lambda ivs: [((s - lo) / 1e6, (e - s) / 1e6) for s, e in clip(ivs, lo, hi)]  # noqa: E731
    fig, ax = plt.subplots(figsize=(11, 3.6))
    rows = [("CPU: Batch i" if trace.ours else "CPU: step", ms([r for _, r in trace.steps]), "tab:blue"),
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
            edge = dict(edgecolor="white", linewidth=1) if label in ("CPU: Batch i", "CPU: step") else {}
            ax.broken_barh(bars, (y - 0.35, 0.7), color=color, **edge)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)])
    ax.set_xlim(0, (hi - lo) / 1e6)
    ax.set_xlabel(f"ms from the start of Batch {i0}")
    ax.set_title(title, fontsize=10)
    if ax.get_legend_handles_labels()[0]:  # (a job of the user's own may have none of the study's ranges)
        ax.legend(loc="upper right", fontsize=7, ncol=3)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    records.write_whole(path, png.getvalue())

# -----------------------------------------------------------------------------
# inputs: a report, its export, a torch trace, or a run folder



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


def summarize(path: Path, trace: Trace, name: str, out_dir: Path, gpu: bool = False, study: str = "train") -> dict:
    """Metrics, the trace's own verdict and the per-step CSV for the trace read from path. Its steps are the
    measured ones: a warm-up that nsys traced too (a CPU run traces the whole run) is left out."""
    warmup = (profiled_record(path) or {}).get("warmup")
    if isinstance(warmup, int) and any(i >= warmup for i, _ in trace.steps):
        trace.steps = [(i, r) for i, r in trace.steps if i >= warmup]
    warm = 0
    if not trace.ours:  # (a job of the user's own: a trace held around all of it holds its warm-up too)
        trace.steps, warm = warmed(trace.steps)
    lacks = problems(trace, gpu, is_ceiling(path), study)
    for problem in lacks:
        print(f"{name}: {problem}", file=sys.stderr)
    rows = step_metrics(trace)
    table = io.StringIO(newline="")
    w = csv.DictWriter(table, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    records.write_whole(out_dir / f"{name}_steps.csv", table.getvalue())
    m = medians(rows) if trace.ours else window_means(rows)
    m["pin_thread_busy_pct"] = 100 * trace.pin_busy if trace.pin_busy is not None else None
    summary = dict(name=name, source=path.name, metrics=m, per_step=per_step(trace), problems=lacks,
                   trace=verdict(m, ours=trace.ours))
    if not trace.ours:
        summary["steps_found_by"] = trace.found_by
    if trace.steps_found:
        summary["steps_found"] = trace.steps_found
    if warm:
        summary["warmup_left_out"] = warm
    return summary


def conclude(summary: dict, trace: Trace, rates: Rates | None, out_dir: Path) -> dict:
    """The summary's one verdict (decide(): the rates first, then the trace), its timeline and its line."""
    t = summary["trace"]
    study = "infer" if trace.inference else "train"
    summary.update(decide(rates, t, study, compiled=trace.compiled) or dict(
        verdict=t["verdict"], why=t["why"], cause=None, change="profile on a GPU with nsys --trace=cuda"))
    if summary["cause"] == "launch" and trace.python_stacks:  # (the profiler's own cost, which no rate measured)
        summary["why"] += ("; the trace holds Python's frames (with_stack=True), whose recording slows each launch "
                           "itself: compare the rate of a run without the profiler")
    beside = (summary.get("per_step") or {}).get("beside_kernels")
    if summary["cause"] == "beside" and beside:  # (which work it is, where the trace names it)
        summary["why"] += "; the largest, summed over their launches: " + ", ".join(
            f"{name} {ms:.1f} ms a step" for name, ms in beside.items())
    if not trace.ours and trace.has_gpu:  # a job of the user's own: the change in its code's words
        # (pinned batches whose pin-memory thread the trace cannot see: it may be the cap)
        pinned = trace.pin_busy is None and any(not p for *_, p in trace.h2d)
        summary["change"] = user_change(summary["cause"], trace.workers, pinned=pinned,
                                        side_stream=trace.copy_stream == "a side stream", compiled=trace.compiled)
    if trace.has_gpu:
        m = summary["metrics"]
        try:
            timeline(trace, out_dir / f"{summary['name']}_timeline.png",
                     f"{summary['name']}: {summary['verdict']} (GPU idle {m['gpu_idle_pct']:.0f}% in the traced steps)")
            summary["timeline"] = f"{summary['name']}_timeline.png"
        except ImportError:  # (matplotlib: requirements.txt has it; a bare machine may not)
            print(f"{summary['name']}: no timeline: matplotlib is not installed", file=sys.stderr)
    print(report_line(summary))
    return summary


def analyze(path: Path, name: str, out_dir: Path, step_range: str | None = None) -> list[dict | str]:
    """Metrics, verdict, per-step CSV and timeline for a trace with no measured rates beside it: one summary for
    each process with steps of its own (an nsys report of a job under torchrun holds every rank's, each named
    NAME.pidN). A later process whose steps cannot be read gets the line that says why instead, also on stderr:
    one rank's failure leaves the others' verdicts standing."""
    trace = load(path, step_range)
    processes = trace.processes if len(trace.processes) > 1 else [None]
    summaries = []
    for p in processes:
        each = name if p is None else f"{name}.pid{pid(p)}"
        try:
            t = trace if p == processes[0] else load(path, step_range, process=p)
        except NoData as e:
            summaries.append(f"{each}: {e}")
            print(f"analyze.py: {summaries[-1]}", file=sys.stderr)
            continue
        summary = summarize(path, t, each, out_dir)
        if not t.has_gpu:
            print(f"{each}: no CUDA kernels or copies in {path}: CPU figures only, no verdict and no timeline (profile "
                  "on a GPU with nsys --trace=cuda, or train.py --profile torch on CUDA)", file=sys.stderr)
        summaries.append(conclude(summary, t, None, out_dir))
    return summaries


def partial(summaries: list[dict | str]) -> bool:
    """Whether a process of the trace got no verdict (analyze(): its line instead of its summary)."""
    return any(isinstance(s, str) for s in summaries)


def report_line(s: dict) -> str:
    m = s["metrics"]
    typical = "mean" if s.get("steps_found_by") else "median"  # (a job of the user's own: over the whole window)
    figures = f"  {typical} of {m['steps']} traced steps: " + ", ".join([f"step {m['step_ms']:.1f} ms"] + [
        f"{p} {m[p.replace(' ', '_').lower() + '_ms']:.1f} ms" for p in PHASES
        if (p == "Compute" and not s.get("steps_found_by")) or m[p.replace(' ', '_').lower() + '_ms']])
    notes = ([f"steps: {s['steps_found_by']}"] if s.get("steps_found_by") else []) + (
        [f"the middle {m['steps']} of its {s['steps_found']}"] if s.get("steps_found") else []) + (
        [f"the first {s['warmup_left_out']}, each over twice the median step, left out as warm-up"]
        if s.get("warmup_left_out") else [])
    if notes:
        figures += f" ({'; '.join(notes)})"
    if m["gpu_idle_pct"] is None:  # a CPU trace: its figures only; the run says once that there is no GPU
        return f"{s['name']}: CPU ranges only --" + figures[1:]
    copies = "D2H" if m.get("copy_output_ms") else "H2D"
    overlap = m[copies.lower() + "_overlap_pct"]
    stream = (s.get("per_step") or {}).get("h2d_stream") if copies == "H2D" else None
    beside = f", other streams' kernels {m['side_kernel_ms']:.1f} ms" if m.get("side_kernel_ms") else ""
    return (f"{s['name']}: {s['verdict']} -- {s['why']}. Next: {s['change']}.\n{figures}, GPU idle "
            f"{m['gpu_idle_pct']:.0f}%{beside}, {copies} {m[copies.lower() + '_ms']:.1f} ms "
            f"({'-' if overlap is None else format(overlap, '.0f')}% under kernels"
            f"{f', on {stream}' if stream else ''})")


def reports_of(run_dir: Path, variant: str) -> list[Path]:
    """VARIANT.nsys-rep, or under torchrun one VARIANT.rankK.nsys-rep per rank, rank 0 first."""
    single = run_dir / f"{variant}.nsys-rep"
    if single.exists():
        return [single]
    rank = lambda p: int(p.name.split(".rank")[1].split(".")[0])  # noqa: E731
    return sorted(run_dir.glob(f"{variant}.rank[0-9]*.nsys-rep"), key=rank)


def profiled_record(report: Path) -> dict | None:
    """The record of the run a report profiled (VARIANT.nsys.json beside it; one for every rank's), or None."""
    path = report.parent / (re.sub(r"\.rank\d+$", "", trace_name(report)) + ".nsys.json")
    try:
        return records.from_file(records.read_json(path), path)  # in part 1's words, whatever the study
    except records.Malformed:
        return None


def is_ceiling(report: Path) -> bool:
    """Whether the profiled run had its data on the device (a ceiling: no copies to expect), as its record
    says; a report without its record is known by its name."""
    record = profiled_record(report)
    if record is not None and isinstance(record.get("data_on_gpu"), bool):
        return record["data_on_gpu"]
    return trace_name(report).startswith("ceiling")


def trace_name(path: Path) -> str:
    """streams.rank1.nsys-rep -> streams.rank1; traces/ -> traces"""
    return re.sub(r"(\.pt\.trace)?\.(nsys-rep|sqlite|json|json\.gz)$", "", path.name)


def run_rates(run_dir: Path) -> dict[str, Rates]:
    """Each variant's measured rates, read (and checked) as compare.py reads them; {} when they cannot be."""
    try:
        run = records.load_run(run_dir)
    except records.Malformed as e:
        print(f"analyze.py: {e}: verdicts from the traces alone", file=sys.stderr)
        return {}
    return {v.name: r for v in run.variants if (r := records.rates(v, run)) is not None}


def analyze_run(run_dir: Path) -> int:
    env = records.read_json(run_dir / "env.json")
    names = env.get("variants") or sorted({trace_name(p).split(".rank")[0] for p in run_dir.glob("*.nsys-rep")})
    gpu = env.get("gpu") != "cpu"
    rates = run_rates(run_dir) if gpu else {}
    results, failed = {}, 0
    for variant in names:
        for rep in reports_of(run_dir, variant):
            name = trace_name(rep)
            try:
                trace = load(rep, infer=False)
                summary = summarize(rep, trace, name, run_dir, gpu, env.get("study", "train"))
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
    records.write_json(run_dir / "diagnosis.json", results)
    return 1 if failed else 0


def check(path: Path) -> int:
    """--check: run_all.sh's test of each report as nsys writes it, so that an empty or partial
    report is a failure with a name, never a blank in the table."""
    env = records.read_json(path.parent / "env.json") if (path.parent / "env.json").exists() else {}
    name = trace_name(path)
    try:
        lacks = problems(load(path, infer=False), env.get("gpu") != "cpu", is_ceiling(path), env.get("study", "train"))
    except NoData as e:
        lacks = [str(e)]
    for problem in lacks:
        print(f"{name}: {problem}")
    return 1 if lacks else 0


# -----------------------------------------------------------------------------
# --run: a job of the user's own under nsys, a window of its steady steps


def run_job(cmd: list[str], skip: float, window: float, out: Path, step_range: str | None = None) -> int:
    """Run cmd under nsys, capture `window` seconds after its first `skip` (starvation/window: the process opens
    and closes the capture itself), and diagnose the report. On a machine without a GPU, nsys records the window
    by its clock (--delay, --duration), and the report holds CPU ranges only."""
    nsys = shutil.which("nsys")
    if nsys is None:
        print("analyze.py --run: needs nsys on PATH (tools/get_nsys.sh fetches it)", file=sys.stderr)
        return 2
    gpu = Path("/dev/nvidiactl").exists()
    out.mkdir(parents=True, exist_ok=True)
    report = out / "job.nsys-rep"
    report.unlink(missing_ok=True)
    window_dir = str(Path(__file__).resolve().parent / "starvation" / "window")
    python_path = os.pathsep.join(filter(None, [window_dir, os.environ.get("PYTHONPATH")]))
    capture = (["--trace=cuda,nvtx,osrt", "--capture-range=cudaProfilerApi", "--capture-range-end=stop-shutdown"]
               if gpu else ["--trace=nvtx,osrt", f"--delay={skip:g}", f"--duration={window:g}"])
    print(f"analyze.py --run: {' '.join(cmd)}, under nsys: {window:g} s after its first {skip:g} s, into {out}/",
          flush=True)
    # nsys keeps its session lock under TMPDIR: a folder of this run's own keeps it from another nsys of the
    # same user's. The job's first Python process leaves a file there, and on a GPU another when it closes the
    # window: they tell nsys's own failures (2023.4 at times fails by itself on a loaded machine, at start-up or
    # as it writes the report) from a job that ended too soon, which a second try would not mend.
    with tempfile.TemporaryDirectory(prefix="analyze-run-nsys.") as tmp:
        started, closed = Path(tmp) / "job-started", Path(tmp) / "window-closed"
        env = dict(os.environ, TMPDIR=tmp, PYTHONPATH=python_path, GPU_STARVATION_WINDOW=f"{skip},{window}",
                   GPU_STARVATION_STARTED=str(started), GPU_STARVATION_CLOSED=str(closed))
        for attempt in (1, 2):
            started.unlink(missing_ok=True)
            closed.unlink(missing_ok=True)
            t0 = time.monotonic()
            p = subprocess.run([nsys, "profile", *capture, "--force-overwrite=true", "-o",
                                str(report.with_suffix("")), *cmd], env=env)
            if report.exists():
                break
            took = time.monotonic() - t0
            # (without a GPU, nsys closes the window by its own clock, skip + window seconds after it starts)
            if started.exists() and not (closed.exists() if gpu else took >= skip + window):
                print(f"analyze.py --run: no report: the job ended (exit {p.returncode}) after {took:.0f} s, "
                      f"before its window closed: --skip less, or run it for longer", file=sys.stderr)
                return 2
            fault = ("without its report, though the job ran through its window" if started.exists()
                     else "before the job started")
            print(f"analyze.py --run: nsys exited {p.returncode} {fault}"
                  + (": profiling it once more" if attempt == 1 else ""), file=sys.stderr, flush=True)
        if not report.exists():
            return 2
    status = 0
    if not gpu and step_range is None:  # (a job of the user's own: its steps are found by its CUDA calls)
        line = ("no GPU here: the report holds the job's OS calls and its own NVTX ranges, not the CUDA calls that its "
                "steps are found by, nor the kernels and copies a verdict needs; --step-range REGEX names a range of "
                "the job's own that holds each step, for its step times")
        print(f"analyze.py --run: {line}")
    else:
        try:
            summaries = analyze(report, "job", out, step_range=step_range)
            line = "\n\n".join(s if isinstance(s, str) else report_line(s) for s in summaries)
            status = 1 if partial(summaries) else 0
        except NoData as e:  # the report is kept, and results.md says what it lacks
            line, status = str(e), 2 if isinstance(e, Unreadable) else 1
            if status == 1:  # (a model that torch.compile compiles takes a minute or more before its first steps)
                line += (f"; the window may have fallen in the job's start-up, its compile or its end: --skip more than "
                         f"{skip:g} s, or a --window longer than {window:g} s")
            print(f"analyze.py: {line}", file=sys.stderr)
    files = [f"`{f.name}`" for f in sorted(out.glob("job*")) if f.suffix in (".nsys-rep", ".csv", ".png")]
    records.write_whole(out / "results.md", "\n".join([
        f"# {' '.join(cmd)}", "", f"`analyze.py --run`: nsys, {window:g} s after the first {skip:g} s, "
        f"{'on a GPU' if gpu else 'on a machine without a GPU'}.", "", line, "", f"Files: {', '.join(files)}."]) + "\n")
    return status


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as e:
        raise argparse.ArgumentTypeError(f"{text!r} is no regular expression ({e})") from None
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="a run_all.sh folder, a .nsys-rep, its .sqlite export, or a torch.profiler trace (folder)")
    p.add_argument("--step-range", type=regex, metavar="REGEX",
                   help="a trace of your own job: the NVTX ranges (or torch.profiler labels) that each hold one "
                        "step, matched anywhere in the name, the outermost where they nest (default: the study's "
                        "'Batch i', else torch.profiler's ProfilerStep#N)")
    p.add_argument("--check", action="store_true",
                   help="only say what each report lacks (steps, kernels, copies), one line each; exit 1 if any")
    p.add_argument("--run", action="store_true",
                   help="run the command after -- under nsys and diagnose a window of its steady steps (nsys and "
                        "the job get a TMPDIR of their own, removed when it ends)")
    p.add_argument("--skip", type=float, default=20.0, metavar="S",
                   help="--run: seconds of the job left out first: imports, start-up, compile; on a GPU, counted "
                        "again from the job's first use of CUDA where that comes later (default: %(default)s)")
    p.add_argument("--window", type=float, default=5.0, metavar="S",
                   help="--run: seconds of the job recorded (default: %(default)s)")
    p.add_argument("--out", type=Path, default=Path("own-job"), metavar="DIR",
                   help="--run: the folder for the report, its figures, timeline and results.md (default: %(default)s)")
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:len(argv) - len(cmd) - 1] if cmd or "--" in argv else argv)
    if args.run:
        if not cmd or args.paths:
            p.error("--run takes a command after --, and no PATH: analyze.py --run -- python my_train.py ARGS")
        if args.skip < 0 or args.window <= 0:
            p.error("--skip is 0 or more seconds, --window more than 0")
        return run_job(cmd, args.skip, args.window, args.out, args.step_range)
    if not args.paths:
        p.error("a PATH to analyze, or --run -- COMMAND")
    status = 0
    for path in args.paths:
        try:
            path.stat()
        except OSError as e:  # missing, or a link that leads nowhere or round in a loop
            print(f"analyze.py: {path}: {e.strerror.lower()}", file=sys.stderr)
            return 2
        try:
            if args.check:
                status |= check(path)
                continue
            if path.is_dir() and (path / "env.json").exists():
                status |= analyze_run(path)
            elif path.is_dir() and len(traces := torch_traces(path)) > 1:  # under torchrun: one per rank
                for worker, trace in traces.items():
                    try:
                        if partial(analyze(trace, f"{trace_name(path)}.{worker}", path, step_range=args.step_range)):
                            status = max(status, 1)
                    except NoData as e:  # a rank without steps: named, and the others still get their verdicts
                        print(f"analyze.py: {e}", file=sys.stderr)
                        status = max(status, 2 if isinstance(e, Unreadable) else 1)
            elif partial(analyze(path, trace_name(path), path.parent if path.is_file() else path,
                                 step_range=args.step_range)):
                status = max(status, 1)
        except NoData as e:  # a trace that lacks what the analysis needs: 1; one that cannot be read: 2
            print(f"analyze.py: {e}", file=sys.stderr)
            status = max(status, 2 if isinstance(e, Unreadable) else 1)
        except records.Malformed as e:  # a run folder's env.json
            print(f"analyze.py: {e}", file=sys.stderr)
            return 2
        except OSError as e:  # what it writes beside the input: a read-only folder, a full disk
            print(f"analyze.py: cannot write {e.filename} ({e.strerror}): analyze a copy in a writable folder",
                  file=sys.stderr)
            return 2
    return status


if __name__ == "__main__":
    sys.exit(main())

