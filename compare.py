"""
Tabulate run_all.sh run folders into results.md (and a chart).

    python compare.py RUN_DIR                 # writes RUN_DIR/results.md and RUN_DIR/steps_per_s.png
    python compare.py RUN_A RUN_B [-o FILE]   # also the runs side by side (another GPU, before/after a change)

A run folder holds what run_all.sh writes: env.json, VARIANT.runN.json (unprofiled runs),
VARIANT.loader.json (the loader alone: train.py --then-alone, next in run 1's process, or --loader-only),
VARIANT.nsys.json (the profiled run),
diagnosis.json (analyze.py: every figure taken from the traces, and what each report lacks),
failures.tsv, and INCOMPLETE when it was interrupted. compare.py reads JSON records only, by key; the
traces are analyze.py's. With run_all.sh --gpus N each variant has one report per rank
(VARIANT.rankK.*): the table's trace columns come from rank 0's.
"""
import argparse
import io
import statistics
import sys
from pathlib import Path

from starvation.records import Malformed, Run, Variant, ceiling_for, load_run, rates, write_whole
# the one verdict engine, which analyze.py's own lines use too
from starvation.thresholds import SETTLE_TOLERANCE, closed_by_time, longer_window
from starvation.verdict import decide, loader_bound, output_bound

# -----------------------------------------------------------------------------
# the table


class Notes:
    """Footnotes for cells that hold no number: each distinct reason once, numbered."""

    def __init__(self):
        self.items: list[str] = []

    def dash(self, reason: str) -> str:
        if reason not in self.items:
            self.items.append(reason)
        return f"- [{self.items.index(reason) + 1}]"


def decided(v: Variant, run: Run) -> dict | None:
    """The variant's one verdict, as analyze.py decides it (None on a CPU run: nothing ran on a GPU)."""
    return None if is_cpu(run) else decide(rates(v, run), v.trace, run.study)


def unprofiled(v: Variant, run: Run, notes: Notes) -> str:
    """The footnote of every cell that needs the variant's profiled run, when it has none."""
    why = "; ".join(v.failures) or ("not profiled yet (the run was interrupted)" if run.incomplete else
                                    "not profiled (--no-nsys, or no nsys found)")
    return notes.dash(f"{v.name}: {why}")


def profiled_cells(v: Variant, run: Run, notes: Notes) -> list[str]:
    """The profiled run's whole window beside the unprofiled median, and the pace of the steps nsys recorded
    (a GPU run's: on a CPU, nsys traces the whole run and no figure of it says anything)."""
    if "no nsys report" in v.problems:
        return [unprofiled(v, run, notes)] * 2
    if v.profiled is None:
        return [notes.dash(f"{v.name}: no record of the profiled run ({v.name}.nsys.json)")] * 2
    sps, whole = v.median("steps_per_s"), v.profiled["steps_per_s"]
    lo, hi = min(r["steps_per_s"] for r in v.runs), max(r["steps_per_s"] for r in v.runs)
    r = rates(v, run)
    bound = r is not None and not r.is_ceiling and (output_bound if run.study == "infer" else loader_bound)(r)
    if bound and lo <= whole <= hi:  # the pipeline's own variation, not the profiler's
        change = notes.dash(f"bound by its {'output path' if run.study == 'infer' else 'loader'}, and the profiled "
                            "run within the unprofiled runs' spread: no overhead to tell")[2:]
    else:
        change = f"{100 * (whole / sps - 1):+.0f}%"
    pace = v.profiled.get("profiled_steps_per_s")
    return [f"{whole:.2f} ({change})",
            f"{pace:.2f}" if pace else notes.dash(f"{v.name}: the profiled run's record has no pace of its traced "
                                                  "steps (an older script)")]


def trace_cells(v: Variant, run: Run, notes: Notes) -> list[str]:
    """The copy and kernel figures of the traced steps, and analyze.py's idle and overlap: GPU runs only."""
    if "no nsys report" in v.problems:
        return [unprofiled(v, run, notes)] * 6
    m = v.diagnosis and v.diagnosis.get("per_step")
    if not m:
        why = v.problems[0] if v.diagnosis and "error" in v.diagnosis else (
            "per-step figures come from analyze.py's diagnosis of its report (diagnosis.json)")
        return [notes.dash(f"{v.name}: {why}")] * 6
    k = run.copies.lower()
    gb_per_s = m.get(k + "_gb_per_s")  # footnoted only where it is missing: one note for every such cell
    metrics = v.diagnosis["metrics"]
    return [f"{m[k + '_ms']:.1f}", f"{gb_per_s:.1f}" if gb_per_s else notes.dash(f"no {run.copies} copy in the trace"),
            f"{m['kernel_ms']:.1f}", f"{m[k + '_pageable_copies']:g} / {m[k + '_pinned_copies']:g}",
            f"{metrics['gpu_idle_pct']:.0f}%" if metrics["gpu_idle_pct"] is not None
            else notes.dash("no GPU activity in the trace"),
            f"{metrics[k + '_overlap_pct']:.0f}%" if metrics.get(k + "_overlap_pct") is not None
            else notes.dash(f"no {run.copies} copy in the trace")]


def name_cell(v: Variant, run: Run, notes: Notes) -> str:
    """The variant's name, with a footnote for what its report lacks and for a window that did not settle."""
    unit = "batches" if run.study == "infer" else "steps"
    name = " ".join([v.name] + [notes.dash(f"{v.name}: {p}")[2:] for p in v.problems if p != "no nsys report"])
    behind = [r for r in v.runs if r.get("fell_behind")]
    if behind:
        name += " " + notes.dash(
            f"{v.name}: in {len(behind)} of {len(v.runs)} runs throughput fell during the window (second half: "
            f"{', '.join(format(r['steps_per_s_second_half'], '.2f') for r in behind)} {unit}/s): the pipeline "
            "is slower than the GPU and what it had queued carried the first steps; the sustained figure is lower: "
            + longer_window(behind[0]))[2:]
    unsettled = [r for r in v.runs if r.get("settled") is False]
    if unsettled:
        slid = max(r.get("slid_steps") or 0 for r in unsettled)
        name += " " + notes.dash(
            f"{v.name}: in {len(unsettled)} of {len(v.runs)} runs the window's halves still differed by more "
            f"than {SETTLE_TOLERANCE:.0%}" + (f" after the window slid {slid} steps" if slid else "") + ": no steady "
            "state within the run; " + longer_window(unsettled[0]))[2:]
    return name


def runs_cell(v: Variant, run: Run) -> str:
    """How many unprofiled runs the figure comes from, how many steps each window held, and what closed it:
    --steps, or --window-s seconds once it held --min-steps."""
    unit = "batches" if run.study == "infer" else "steps"
    held = sorted(r["steps"] for r in v.runs)
    span = f"{held[0]}" if held[0] == held[-1] else f"{held[0]}-{held[-1]}"
    by_time = [r for r in v.runs if closed_by_time(r)]
    rule = f", closed at {by_time[0]['settings']['window_s']:g} s" if by_time else ""
    return f"{len(v.runs)} x {span} {unit}{rule}"


def table(run: Run, notes: Notes) -> tuple[list[str], list[list[str]]]:
    """The headline: each variant's throughput, against its ceiling, its loader (or output processing)
    alone, the loop's wait, the runs it comes from, and its verdict."""
    infer = run.study == "infer"
    unit = "batches" if infer else "steps"
    header = ["variant", f"{unit}/s median [min-max]", "% of ceiling",
              "output processing alone, batches/s" if infer else "loader alone, batches/s",
              "on the output path: share of window (mean ms)" if infer else "waits for data: share of window (mean ms)",
              "runs x window"]
    ranks = run.world_size
    if ranks > 1:
        header.append(f"data wait ms/step, rank {' / '.join(map(str, range(ranks)))}")
    header.append("verdict")
    rows = []
    for v in run.variants:
        name = name_cell(v, run, notes)
        if not v.runs:
            why = "; ".join(v.failures) or "no unprofiled run recorded"
            rows.append([name] + [notes.dash(f"{v.name}: {why}")] * (len(header) - 1))
            continue
        sps = v.median("steps_per_s")
        lo, hi = min(r["steps_per_s"] for r in v.runs), max(r["steps_per_s"] for r in v.runs)
        cells = [f"{sps:.2f} [{lo:.2f}-{hi:.2f}]", share_of_ceiling(v, ceiling_for(v, run.variants), run, notes),
                 alone_cell(v, run, notes), wait_cell(v, notes), runs_cell(v, run)]
        if ranks > 1:
            cells.append(" / ".join(f"{statistics.median(r['ranks'][k]['data_wait_ms_median'] for r in v.runs):.1f}"
                                    if all(len(r.get("ranks", [])) == ranks for r in v.runs) else "-"
                                    for k in range(ranks)))
        rows.append([name] + cells + [verdict_cell(v, run, notes)])
    return header, rows


def trace_table(run: Run, notes: Notes) -> tuple[list[str], list[list[str]]]:
    """What the profiled run says: its speed under nsys beside the unprofiled median, the pace of the steps
    nsys recorded, and the copy and kernel figures of those steps (analyze.py's)."""
    c, (unit, one) = run.copies, ("batches", "batch") if run.study == "infer" else ("steps", "step")
    header = ["variant", f"{unit}/s under nsys, whole window (change)", f"traced {unit}' pace, {unit}/s",
              f"{c} ms/{one}", f"{c} GB/s", f"kernel ms/{one}", f"{c} copies per {one}, pageable / pinned",
              "GPU idle", f"{c} under kernels"]
    rows = [[v.name] + profiled_cells(v, run, notes) + trace_cells(v, run, notes) for v in run.variants if v.runs]
    return header, rows


def proof_table(run: Run, notes: Notes) -> tuple[list[str], list[list[str]]]:
    """A CPU run's table: what a CPU can prove (each variant ran, its window, its profile holds the study's
    ranges), and no throughput, which a CPU cannot say anything about for a GPU."""
    unit = "batches" if run.study == "infer" else "steps"
    header = ["variant", "ran", "runs x window", "nsys report", f"{unit} in its trace"]
    rows = []
    for v in run.variants:
        ran = "yes" if v.runs and not v.failures else notes.dash(
            f"{v.name}: {'; '.join(v.failures) or 'no unprofiled run recorded'}")
        if "no nsys report" in v.problems:
            report, traced = unprofiled(v, run, notes), "-"
        elif v.diagnosis is None or "error" in v.diagnosis:
            why = v.problems[0] if v.problems else "no diagnosis of its report (diagnosis.json)"
            report, traced = notes.dash(f"{v.name}: {why}"), "-"
        else:
            report, traced = f"{v.name}.nsys-rep", f"{v.diagnosis['metrics']['steps']}"
        rows.append([name_cell(v, run, notes), ran, runs_cell(v, run) if v.runs else "-", report, traced])
    return header, rows


def is_cpu(run: Run) -> bool:
    return run.env.get("gpu") == "cpu"


def share_of_ceiling(v: Variant, ceil: Variant | None, run: Run, notes: Notes) -> str:
    if ceil is None:
        return notes.dash(f"no ceiling run with the same compute ({v.compute_key})")
    share = v.median("steps_per_s") / ceil.median("steps_per_s")
    cell = f"{100 * share:.0f}%"
    if share > 1.05:  # a ceiling slower than its variant is a symptom of noise, not a finding
        cell += " " + notes.dash("a variant faster than its ceiling means "
                                 "these runs are noise (too few steps, or a busy machine), not a finding")[2:]
    return cell


def alone_cell(v: Variant, run: Run, notes: Notes) -> str:
    what = "output processing alone" if run.study == "infer" else "loader alone"
    if v.is_ceiling:
        return notes.dash("the ceiling has no " + ("output path" if run.study == "infer" else "loader"))
    if v.loader is None:
        return notes.dash(f"{v.name}: {what} not measured (run_all.sh --no-loader, or it failed)")
    workers = v.loader.get("workers_batches_per_s")
    return f"{v.alone:.1f}" + (f" (workers alone {workers:.1f})" if workers else "")


def wait_cell(v: Variant, notes: Notes) -> str:
    if not all("data_wait_ms_mean" in r for r in v.runs):
        return notes.dash(f"{v.name}: records without the mean data wait (an older train.py)")
    return f"{100 * v.median('data_wait_share'):.0f}% ({v.median('data_wait_ms_mean'):.1f})"


def verdict_cell(v: Variant, run: Run, notes: Notes) -> str:
    """decide()'s verdict, linked to the variant's timeline picture when there is one."""
    d = decided(v, run)
    if d is None:
        alone = "output processing alone" if run.study == "infer" else "loader alone"
        return notes.dash(f"{v.name}: no verdict without its trace, or its {alone} and its ceiling")
    timeline = v.diagnosis.get("timeline") if v.diagnosis and "error" not in v.diagnosis else None
    return f"[{d['verdict']}]({timeline})" if timeline else d["verdict"]


def diagnosis_md(run: Run) -> list[str]:
    """Each variant's verdict, why, with the numbers that decided it, and the change to make next."""
    if is_cpu(run):
        return []
    lines = ["## Diagnosis", "",
             "One verdict per variant, the same in the table, here, in analyze.py's output and in diagnosis.json: "
             f"the measured rates first (the loop's {'time on the output path' if run.study == 'infer' else 'wait'}"
             f", the {'output processing' if run.study == 'infer' else 'loader'} alone against the ceiling), then "
             "the trace (analyze.py; medians over the traced steps), which names the stage where the rates do not.",
             ""]
    for v in run.variants:
        if (d := decided(v, run)) is not None:
            lines.append(f"- **{v.name}: {d['verdict']}.** {d['why']}. Next: {d['change']}.")
        for key, other in sorted((run.diagnosis or {}).items()):  # under torchrun: the other ranks' traces
            if key.startswith(f"{v.name}.rank") and key != f"{v.name}.rank0" and "error" not in other:
                t = other.get("trace") or other
                lines.append(f"  - rank {key.split('.rank')[1]}'s trace: {t['verdict']} ({t['why']})")
    return lines + [""] if len(lines) > 4 else []


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    align = ["---" if i == 0 or h.startswith("verdict") else "---:" for i, h in enumerate(header)]
    lines = [header, align] + rows
    return "\n".join("| " + " | ".join(r) + " |" for r in lines)


def machine_line(env: dict) -> str:
    gpu = "no GPU (a small CPU run)" if env.get("gpu") == "cpu" else env.get("gpu")
    if env.get("gpus", 1) > 1:
        gpu = f"{env['gpus']} x {gpu} (torchrun, one DDP process per GPU)"
    return (f"{gpu}, {env.get('cpu_count')} CPUs, torch {env.get('torch')}, "
            f"nsys {env.get('nsys') or 'not used'}, {env.get('date')}")


def loader_where(run: Run) -> str:
    """Where the loader-alone figures were measured: after run 1's window, on its workers (--then-alone),
    or in a process of their own (--loader-only); "" for records that do not say."""
    after = {v.loader.get("after_window") for v in run.variants if v.loader} - {None}
    if not after:
        return ""
    if after == {True}:
        return ", measured next in run 1's process, on its workers"
    if after == {False}:
        return ", measured in a process of its own"
    return ", measured next in run 1's process or, for some, in one of its own"


def photos_lines(run: Run) -> list[str]:
    """What the photo variants read: each folder once, its survey's kinds and sizes, and each variant's decoder."""
    folders: dict[str, tuple[dict, list[str]]] = {}
    for v in run.variants:
        r = next(iter(v.runs), None) or v.profiled
        if not r or not r.get("photos"):
            continue
        p = r["photos"]
        decoder = p.get("decoder") or ("on the GPU" if "to_workers" in p else "CPU, in the workers")  # (older records)
        entry = folders.setdefault(r.get("data_dir") or "the default set", (p, []))
        entry[1].append(f"{v.name}: {decoder}")
    lines = []
    for folder, (p, decoders) in folders.items():
        kinds = ", ".join(f"{n} {k}" for k, n in (p.get("kinds") or {}).items())
        lines.append(f"Photos: `{folder}`, {p.get('files')} files ({kinds or 'kinds not surveyed'}), median "
                     f"{p.get('median_pixels')} pixels, {p.get('bits_per_pixel') or '?'} bits a pixel; decoded by "
                     + "; ".join(decoders))
    return lines + [""] if lines else []


def results_md(run: Run, chart: str | None) -> str:
    """The headline table, then the trace table, then the diagnosis; a CPU run's one table says what it proved."""
    notes = Notes()
    r0 = next((r for v in run.variants for r in v.runs), {})
    out = [f"# Results: {run.path.name}", "", f"Machine: {machine_line(run.env)}", "", *photos_lines(run)]
    if run.incomplete:
        out += ["**Incomplete: the run was interrupted; variants below may be missing.**", ""]
    unit, one = ("batches", "batch") if run.study == "infer" else ("steps", "step")
    if is_cpu(run):
        header, rows = proof_table(run, notes)
        out += ["**A small CPU run: it shows that each variant runs and that its profile holds the study's ranges. "
                "Its throughput would be noise, and says nothing about a GPU, so it is left out: a GPU run measures "
                "it.**", "", "Each run's window is fixed (`runs x window`: how many unprofiled runs, of how many "
                f"measured {unit}); nsys traced the whole of one more run, warm-up included, with CPU ranges only.",
                "", markdown_table(header, rows), ""]
        if chart:
            out += [f"![the share of each window spent waiting]({chart})", ""]
        if notes.items:
            out += [f"[{i}] {n}" for i, n in enumerate(notes.items, 1)] + [""]
        return "\n".join(out)
    if run.study == "infer":
        out += ["infer.py, the sequel: batched segmentation whose outputs come back to the host. Each variant's "
                "unprofiled windows run one after the other in one process (`runs x window`: how many, how many "
                "batches each held, and whether --window-s closed it); the first opens once warm-up has filled the "
                "output path, and each counts the batches processed on the host, so the figure is what the path "
                "sustains. The ceiling is the same forward with its outputs left on the device. Output processing "
                "alone is the variant's own workers (or the loop's thread) processing host buffers as fast as they "
                "can, with no model, measured next in the same process. The output path is the loop's time copying "
                "and handing over each batch (and processing it, when no worker does).", ""]
    else:
        out += ["Each variant's figure is the median [min-max] of its unprofiled runs (`runs x window`: how many, "
                "how many steps each window held, and whether --window-s closed it before --steps), each what the "
                "pipeline sustains: the batches the workers had queued were dropped before the clock started, and "
                "the device was synchronized at both ends of the window. % of ceiling is the ratio of medians to "
                "the same step with the batch already on the device, in this run. The loader alone is the same "
                f"input pipeline with no training step{loader_where(run)} (batches/s to the device, copies "
                "included; in brackets the workers alone, with no pinning and no copy). The wait is the time the "
                "loop was blocked on the loader.", ""]
    if run.world_size > 1:
        out += [f"Each run is one torchrun job of {run.world_size} processes, one GPU each, under DDP: a step is "
                f"one batch of {r0['settings']['batch_size']} on every GPU, and the job goes at its slowest rank's "
                "pace." + (" The trace table comes from rank 0's report (VARIANT.rank0.nsys-rep); every rank's "
                           "report is in the folder." if any("no nsys report" not in v.problems for v in run.variants)
                           else ""), ""]
    header, rows = table(run, notes)
    out += [markdown_table(header, rows), ""]
    if chart:
        out += [f"![{unit}/s per variant]({chart})", ""]
    out += ["## The traces", ""]
    if all("no nsys report" in v.problems for v in run.variants):
        out += ["No variant was profiled (run_all.sh --no-nsys, or no nsys found): no trace figures.", ""]
    else:
        header, rows = trace_table(run, notes)
        out += [f"One separate profiled run per variant: its whole window beside the unprofiled median (the change "
                f"in speed under the profiler), the pace of the last {unit} nsys recorded, and what its trace holds "
                f"per {one} (analyze.py's medians).", "", markdown_table(header, rows), ""]
    if notes.items:
        out += ["Notes:", ""] + [f"[{i}] {n}" for i, n in enumerate(notes.items, 1)] + [""]
    out += diagnosis_md(run)
    return "\n".join(out)


def side_by_side(runs: list[Run]) -> str:
    names = list(dict.fromkeys(v.name for run in runs for v in run.variants))
    header = ["variant"]
    for run in runs:
        gpus = f" ({run.world_size} GPUs)" if run.world_size > 1 else ""
        header += [f"{run.path.name}{gpus} steps/s", "img/s", "% of ceiling"]
    # img/s, not steps/s: under DDP a step is one batch on every GPU, so only images compare across GPU counts
    header.append(f"img/s, {runs[-1].path.name} / {runs[0].path.name}")
    rows = []
    for name in names:
        row, images = [name], []
        for run in runs:
            v = next((v for v in run.variants if v.name == name and v.runs), None)
            ceil = ceiling_for(v, run.variants) if v else None
            images.append(v.median("images_per_s") if v else None)
            row += [f"{v.median('steps_per_s'):.2f}", f"{images[-1]:.0f}"] if v else ["-", "-"]
            row.append(f"{100 * v.median('steps_per_s') / ceil.median('steps_per_s'):.0f}%" if ceil else "-")
        row.append(f"{images[-1] / images[0]:.2f}" if images[0] and images[-1] else "-")
        rows.append(row)
    return markdown_table(header, rows)


def chart(run: Run, path: Path) -> bool:
    """Bar chart of steps/s per variant, each variant's ceiling drawn as a line over its bar; a CPU run's,
    whose rates say nothing, of the share of its window the loop waited (cpu_chart)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [v for v in run.variants if v.runs and not v.is_ceiling]
    if not shown:
        return False
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(shown)), 4))
    x = range(len(shown))
    if is_cpu(run):
        cpu_chart(run, shown, ax)
        return save_chart(fig, plt, path)
    meds = [v.median("steps_per_s") for v in shown]
    err = [[m - min(r["steps_per_s"] for r in v.runs) for v, m in zip(shown, meds)],
           [max(r["steps_per_s"] for r in v.runs) - m for v, m in zip(shown, meds)]]
    ax.bar(x, meds, yerr=err, color="tab:blue", capsize=3, label="steps/s (median, min-max)")
    labelled = False
    for i, v in enumerate(shown):
        c = ceiling_for(v, run.variants)
        if c:
            ax.hlines(c.median("steps_per_s"), i - 0.45, i + 0.45, colors="tab:red", linewidth=2,
                      label=None if labelled else "ceiling (batch on device)")
            labelled = True
    ax.set_xticks(list(x), [v.name for v in shown], rotation=30, ha="right")
    ax.set_ylabel("steps/s")
    ax.set_title(f"{run.env.get('gpu')}: " + ("DeepLabV3 inference batches/s" if run.study == "infer"
                                               else "ResNet-18 training steps/s"))
    ax.legend(loc="upper left", fontsize=8)
    return save_chart(fig, plt, path)


def cpu_chart(run: Run, shown: list[Variant], ax) -> None:
    """A CPU run's chart: what it can show is where each variant's loop spent its window, not how fast a GPU
    would go, so the bars are the share of the window the loop waited for data (part 2: on the output path)."""
    waits = [100 * statistics.median(r.get("data_wait_share") or 0.0 for r in v.runs) for v in shown]
    bars = ax.bar(range(len(shown)), waits, color="tab:gray")
    ax.bar_label(bars, [f"{w:.1f}%" for w in waits], fontsize=8)  # small shares stay readable
    ax.set_xticks(list(range(len(shown))), [v.name for v in shown], rotation=30, ha="right")
    ax.set_ylim(0, max(10.0, 1.2 * max(waits)))
    ax.set_ylabel("% of the window")
    ax.set_title("a CPU run: the loop's share of its window " + ("on the output path" if run.study == "infer"
                 else "waiting for data") + " (no GPU throughput)", fontsize=10)


def save_chart(fig, plt, path: Path) -> bool:
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    plt.close(fig)
    write_whole(path, png.getvalue())
    return True

# -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders written by run_all.sh")
    p.add_argument("-o", "--output", type=Path, help="with several RUN_DIRs, also write the side-by-side table here")
    args = p.parse_args(argv)
    for d in args.run_dirs:
        if not d.is_dir():  # a link that leads nowhere, or round in a loop, is none either
            print(f"compare.py: {d}: not a folder", file=sys.stderr)
            return 2
    if args.output and not args.output.parent.is_dir():
        print(f"compare.py: -o {args.output}: no folder {args.output.parent}", file=sys.stderr)
        return 2
    try:
        runs = [load_run(d) for d in args.run_dirs]
        if len({run.study for run in runs}) > 1:  # batches of one study are not steps of the other
            raise Malformed("one study per table: " + ", ".join(f"{run.path} is {run.study}.py's" for run in runs))
    except Malformed as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    try:
        for run in runs:
            png = run.path / ("data_wait.png" if is_cpu(run) else "steps_per_s.png")
            md = results_md(run, png.name if chart(run, png) else None)
            write_whole(run.path / "results.md", md)
            print(f"compare.py: {run.path / 'results.md'}")
        if len(runs) > 1:
            both = side_by_side(runs)
            print(both)
            if args.output:
                write_whole(args.output, both + "\n")
    except OSError as e:
        print(f"compare.py: cannot write {e.filename} ({e.strerror})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
