"""analyze.py: interval math, the verdict rules, and real traces (nsys on the H200 and in CI, torch.profiler)."""
import json
import shutil
import sys

import pytest

import analyze
from conftest import FIXTURES, ROOT, TINY, run_profiled, run_script
from starvation import records, writes
from starvation import trace as tr
from starvation import verdict as vd

DEEP = "a JSON list nested 100,000 deep"  # stands for itself in a test's name, made only in its body
REFERENCE = ROOT / "results" / "20261130T182151Z-NVIDIA-H200"  # README's reference run of part 1


# ---- interval math on hand-built intervals

def test_union_merges_overlapping_and_touching():
    assert tr.union([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]
    assert tr.total([(0, 10), (5, 15), (20, 25)]) == 20


def test_overlap_counts_time_covered_by_both():
    copies, kernels = [(0, 10), (20, 30)], [(5, 25)]
    assert tr.overlap(copies, kernels) == 10
    assert tr.overlap(copies, []) == 0
    assert tr.overlap([(0, 10)], [(0, 3), (2, 4), (8, 20)]) == 6


def test_clip_cuts_at_window_edges():
    assert tr.clip([(0, 10), (15, 30), (40, 50)], 5, 20) == [(5, 10), (15, 20)]


def test_steps_tile_the_timeline_at_nvtx_boundaries():
    steps = [(2, (200, 250)), (0, (0, 80)), (1, (100, 180))]
    assert tr.step_windows(steps) == [(0, (0, 100)), (1, (100, 200))]  # no end mark for the last one: dropped
    assert tr.step_windows(steps, end=270) == [(0, (0, 100)), (1, (100, 200)), (2, (200, 270))]  # it ends the trace


def test_idle_and_overlap_per_step():
    trace = tr.Trace("hand-built", steps=[(0, (0, 90)), (1, (100, 190)), (2, (200, 290))],
                          phases={"get batch": [(0, 10), (100, 110)], "copy batch": [(10, 20), (110, 120)],
                                  "Compute": [(20, 90), (120, 190)]},
                          kernels=[(30, 80), (130, 180)],
                          h2d=[((20, 40), 1000, False), ((120, 130), 1000, True)])
    rows = tr.step_metrics(trace)
    assert [r["step"] for r in rows] == [0, 1, 2]  # the last runs to the end of the trace
    assert rows[0]["gpu_busy_pct"] == pytest.approx(60) and rows[0]["gpu_idle_pct"] == pytest.approx(40)
    assert rows[0]["h2d_overlap_pct"] == pytest.approx(50)       # 10 of its 20 under a kernel
    assert rows[1]["h2d_overlap_pct"] == 0
    assert (rows[0]["pinned_copies"], rows[1]["pageable_copies"]) == (1, 1)
    assert rows[0]["get_batch_ms"] == pytest.approx(10e-6)


def test_per_step_figures_span_the_whole_capture():
    """Kernels run behind the CPU's step ranges, so the table's per-step figures are capture totals over
    the steps, as nsys stats sums them; NCCL's kernels are not in trace.kernels."""
    trace = tr.Trace("hand-built", steps=[(0, (0, 90)), (1, (100, 190))], phases={},
                          kernels=[(30, 80), (130, 180), (200, 260)],
                          h2d=[((20, 40), 2000, False), ((120, 130), 1000, True)])
    assert tr.per_step(trace) == dict(steps=2, kernel_ms=80e-6, h2d_ms=15e-6, h2d_gb_per_s=100.0,
                                           h2d_pageable_copies=0.5, h2d_pinned_copies=0.5, d2h_ms=0.0,
                                           d2h_gb_per_s=None, d2h_pageable_copies=0.0, d2h_pinned_copies=0.0,
                                           h2d_stream=None, beside_kernels={})
    assert tr.per_step(tr.Trace("cpu", steps=[(0, (0, 9))], phases={})) is None


def test_device_to_host_copies_are_counted_and_judged_on_part_2s_path():
    """infer.py's traces: D2H copies per step, and the verdicts walk the sequel's steps."""
    trace = tr.Trace("hand-built", steps=[(0, (0, 100)), (1, (100, 200)), (2, (200, 300))],
                          phases={"Compute": [(0, 10), (100, 110)], "copy output": [(10, 90), (110, 190)],
                                  "get batch": [], "copy batch": [], "process output": []},
                          kernels=[(5, 40), (105, 140)], d2h=[((40, 80), 4000, True), ((140, 180), 4000, True)])
    assert trace.inference
    m = tr.medians(tr.step_metrics(trace))
    assert m["d2h_ms"] == pytest.approx(40e-6) and m["d2h_overlap_pct"] == 0 and m["d2h_pageable_copies"] == 1
    assert vd.verdict(m)["verdict"] == "synchronous output copy"
    assert tr.per_step(trace)["d2h_gb_per_s"] == pytest.approx(100.0)
    assert analyze.problems(trace, gpu=True, ceiling=False, study="infer") == []
    assert analyze.problems(trace, gpu=True, ceiling=False)[0] == "no host-to-device copies in the report"


@pytest.mark.parametrize("kw, expected", [
    (dict(process_output_ms=60), "output processing on the main thread"),
    (dict(copy_output_ms=30, d2h_pageable_copies=1), "synchronous output copy"),
    (dict(copy_output_ms=30), "waiting for a free output buffer"),  # pinned copies: no buffer is free
    (dict(gpu_busy_pct=85, gpu_idle_pct=5, d2h_ms=10, d2h_overlap_pct=0), "copy not overlapped"),
    (dict(gpu_busy_pct=99, gpu_idle_pct=1), "GPU-bound"),
])
def test_inference_verdict_rules(kw, expected):
    m = metrics(gpu_busy_pct=60, gpu_idle_pct=40, copy_output_ms=1.0, process_output_ms=0.0, d2h_ms=1.0,
                d2h_overlap_pct=90.0, d2h_pageable_copies=0)
    m.update(kw)
    assert vd.verdict(m)["verdict"] == expected


def test_problems_name_what_a_gpu_report_lacks():
    empty = tr.Trace("t", steps=[(0, (0, 9))], phases={})
    assert analyze.problems(empty, gpu=False, ceiling=False) == []
    lacks = analyze.problems(empty, gpu=True, ceiling=False)
    assert lacks[0].startswith("no CUDA kernels") and lacks[1] == "no host-to-device copies in the report"
    assert analyze.problems(tr.Trace("t", [(0, (0, 9))], {}, kernels=[(1, 2)]), gpu=True, ceiling=True) == []


def test_check_names_what_the_report_lacks(nsys, tmp_path):
    """run_all.sh checks each report as nsys writes it: the fixture's lost its nvtx-package ranges."""
    shutil.copy(FIXTURES / "nsys-2023.4-h200-async" / "async.nsys-rep", tmp_path)
    p = run_script("analyze.py", "--check", str(tmp_path / "async.nsys-rep"))
    assert p.returncode == 1 and p.stdout.startswith("async: ") and "no NVTX 'Batch i' ranges" in p.stdout
    assert "0.2.12" in p.stdout and not (tmp_path / "async_steps.csv").exists()


# ---- the rules, one per verdict

def metrics(**kw):
    m = dict(step_ms=100.0, gpu_busy_pct=99.0, gpu_idle_pct=1.0, kernel_busy_pct=98.0, h2d_ms=1.0,
             h2d_overlap_pct=95.0, pageable_copies=0, pinned_copies=2, blocked_in_copy_ms=0.1,
             munmap_in_copy_ms=0.0, get_batch_ms=0.5, copy_batch_ms=0.2, compute_ms=99.0)
    m.update(kw)
    return m


@pytest.mark.parametrize("kw, expected", [
    (dict(gpu_busy_pct=30, gpu_idle_pct=70, get_batch_ms=80), "loading-bound"),
    (dict(gpu_busy_pct=80, gpu_idle_pct=20, pageable_copies=2, pinned_copies=0), "synchronous pageable copy"),
    (dict(gpu_busy_pct=85, gpu_idle_pct=15, blocked_in_copy_ms=12), "synchronous pageable copy"),
    # the batch pinned, a table of a few hundred bytes beside it from pageable memory, which blocks nothing
    (dict(gpu_busy_pct=80, gpu_idle_pct=20, pageable_copies=1, pinned_copies=65, h2d_bytes=100_000_000,
          pageable_bytes=800), "unclassified"),
    (dict(gpu_busy_pct=80, gpu_idle_pct=20, pageable_copies=1, pinned_copies=1, h2d_bytes=100_000_000,
          pageable_bytes=90_000_000), "synchronous pageable copy"),
    (dict(h2d_ms=6, h2d_overlap_pct=0, kernel_busy_pct=93), "copy not overlapped"),
    # a decoder's kernels on streams of their own, beside the step: the GPU busy, yet not with the step alone
    (dict(side_kernel_ms=8), "GPU work beside the step"),
    (dict(gpu_busy_pct=92, gpu_idle_pct=8, side_kernel_ms=8), "GPU work beside the step"),
    (dict(side_kernel_ms=2), "GPU-bound"),
    (dict(gpu_busy_pct=85, gpu_idle_pct=15, side_kernel_ms=8), "unclassified"),  # (the idle is what holds it)
    ({}, "GPU-bound"),
    (dict(gpu_busy_pct=85, gpu_idle_pct=15), "unclassified"),
    (dict(gpu_busy_pct=None, gpu_idle_pct=None), "no GPU activity"),
])
def test_verdict_rules(kw, expected):
    v = vd.verdict(metrics(**kw))
    assert v["verdict"] == expected
    assert v["why"] and v["cause"] == vd.TRACE_CAUSES.get(expected)


def test_a_compiled_step_alone_is_not_told_to_compile():
    """A trace with no record beside it: its settings unknown, save that torch.compile's kernels are in it."""
    t = vd.verdict(metrics(gpu_busy_pct=50, gpu_idle_pct=50, launch_gaps=400, launch_gaps_ms=40))
    assert t["verdict"] == "launch-bound"
    assert "(--compile)" in vd.decide(None, t)["change"]
    assert vd.decide(None, t, compiled=True)["change"].startswith("none from these steps")


def test_verdicts_quote_their_numbers():
    v = vd.verdict(metrics(gpu_busy_pct=30, gpu_idle_pct=70, get_batch_ms=80))
    assert "80 of 100 ms" in v["why"] and "70%" in v["why"]


# ---- real traces

def test_reference_run_walks_the_studys_path(nsys, tmp_path):
    """README's reference run, its reports and records diagnosed again: each verdict names the change that
    the next variant makes, and the trace agrees with the measured rates."""
    run = tmp_path / "run"
    run.mkdir()
    for f in REFERENCE.iterdir():
        if f.suffix in (".nsys-rep", ".json") and f.name != "diagnosis.json":
            shutil.copy(f, run)
    p = run_script("analyze.py", str(run))
    assert p.returncode == 0, p.stderr
    d = json.loads((run / "diagnosis.json").read_text())
    walk = ("baseline", "workers", "async", "streams", "prefetch", "pool", "ceiling")
    assert [d[v]["trace"]["verdict"] for v in walk] == [
        "loading-bound", "synchronous pageable copy", "copy not overlapped", "loading-bound: pinning caps it",
        "loading-bound: pinning caps it", "GPU-bound", "GPU-bound"]
    # the rates add what the trace cannot see: the loader alone caps the study's steps, pinning caps async
    # and after (its workers alone are faster), and the pool runs at its ceiling
    assert [d[v]["verdict"] for v in walk] == [
        "loader-bound; trace: loading-bound", "loader-bound; trace: synchronous pageable copy",
        "loader-bound: pinning caps it", "loader-bound: pinning caps it", "loader-bound: pinning caps it",
        "at its ceiling", "the ceiling"]
    assert "--workers" in d["baseline"]["change"] and "--pin-memory --non-blocking" in d["workers"]["change"]
    assert "--pool" in d["async"]["change"] and "--amp bf16" in d["pool"]["change"]
    assert d["ceiling"]["metrics"]["gpu_idle_pct"] < 2
    assert (run / "workers_steps.csv").read_text().startswith("step,step_ms,")
    assert (run / "workers_timeline.png").stat().st_size > 10_000
    p = run_script("compare.py", str(run))  # results.md gains the diagnosis columns and the reasoning
    assert p.returncode == 0, p.stderr
    md = (run / "results.md").read_text()
    assert "| [loader-bound: pinning caps it](async_timeline.png) |" in md and "## Diagnosis" in md
    assert "the trace: copy not overlapped" in md


def test_a_report_without_nvtx_steps_is_read_by_its_repeating_cuda_calls(nsys, tmp_path):
    """The fixture lost its ranges (nsys 2023.4, nvtx 0.2.16): alone, it is read as a job of the user's own, whose
    three profiled steps repeat their CUDA calls twice between them: too few steps for a verdict, in one line."""
    rep = tmp_path / "async.nsys-rep"
    shutil.copy(FIXTURES / "nsys-2023.4-h200-async" / "async.nsys-rep", rep)
    p = run_script("analyze.py", str(rep))
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == (f"analyze.py: {rep}: 2 steps found (CUDA calls that repeat once a step): a verdict needs 3 or "
                        "more: record more (torch.profiler: schedule(active=10); analyze.py --run: a longer --window)\n")
    assert not (tmp_path / "async_steps.csv").exists()


@pytest.mark.e2e
def test_a_cpu_trace_from_nsys_gives_cpu_metrics_and_no_picture(nsys, tmp_path):
    rep = tmp_path / "workers"
    p = run_profiled(nsys, "profile", "--force-overwrite=true", "--trace=nvtx,osrt", "-o", str(rep), sys.executable,
                     "train.py", "--variant", "workers", "--workers", "2", *TINY)
    assert p.returncode == 0, p.stderr
    p = run_script("analyze.py", f"{rep}.nsys-rep")
    assert p.returncode == 0, p.stderr
    assert "workers: CPU ranges only" in p.stdout and "no CUDA kernels or copies" in p.stderr
    assert (tmp_path / "workers_steps.csv").exists() and not (tmp_path / "workers_timeline.png").exists()


def test_a_torch_profiler_trace_is_read_too(tmp_path):
    trace_dir = tmp_path / "trace"
    p = run_script("train.py", "--variant", "streams", "--workers", "2", *TINY, "--profile", "torch",
                   "--profile-dir", str(trace_dir))
    assert p.returncode == 0, p.stderr
    p = run_script("analyze.py", str(trace_dir))
    assert p.returncode == 0, p.stderr
    assert "trace: CPU ranges only" in p.stdout and "median of 3 traced steps" in p.stdout  # the 3 it measured


def test_bad_inputs_are_one_line(tmp_path):
    """An input that cannot be read as what it should be exits 2, as in every tool (README, exit statuses)."""
    p = run_script("analyze.py", str(tmp_path))
    assert p.returncode == 2 and "no *.pt.trace.json" in p.stderr
    bad = tmp_path / "x.sqlite"
    bad.write_bytes(b"")
    p = run_script("analyze.py", str(bad))
    assert p.returncode == 2 and "not an nsys SQLite export" in p.stderr
    bad.write_bytes(b"SQLite format 3\x00 and then garbage")
    p = run_script("analyze.py", str(bad))
    assert p.returncode == 2 and "x.sqlite: not a readable SQLite export (file is not a database)" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "it needs an object whose traceEvents is a list of events"),
    ('{"traceEvents": "many"}', "it needs an object whose traceEvents is a list of events"),
    ('{"traceEvents": [1, 2]}', "it needs an object whose traceEvents is a list of events"),
    ('{"traceEvents": [{"ph": "X", "ts": 1, "dur": "long", "name": "Batch 0"}]}', "ts or dur is not a number"),
    (DEEP, "not a torch.profiler chrome trace (RecursionError)"),
    (b"\xff\xfe garbage", "not a torch.profiler chrome trace (UnicodeDecodeError)"),
])
def test_a_malformed_torch_trace_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "w.pt.trace.json"
    content = "[" * 100_000 + "]" * 100_000 if content == DEEP else content
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert analyze.main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_links_that_lead_nowhere_are_one_line(tmp_path, capsys):
    loop = tmp_path / "loop.nsys-rep"
    loop.symlink_to(loop)
    assert analyze.main([str(loop)]) == 2
    assert capsys.readouterr().err.strip() == f"analyze.py: {loop}: too many levels of symbolic links"
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "a.pt.trace.json").symlink_to(traces / "b.pt.trace.json")
    (traces / "b.pt.trace.json").symlink_to(traces / "a.pt.trace.json")
    assert analyze.main([str(traces)]) == 2
    assert "too many levels of symbolic links" in capsys.readouterr().err


@pytest.mark.parametrize("env", ["[1, 2]", "{not json", DEEP])
def test_a_run_folder_whose_env_json_is_not_an_object_is_one_line(tmp_path, capsys, env):
    (tmp_path / "env.json").write_text("[" * 100_000 + "]" * 100_000 if env == DEEP else env)
    assert analyze.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "env.json") in err[0], err


def test_a_read_only_folder_is_one_line(tmp_path, capsys, monkeypatch):
    """analyze.py writes beside its input: where it cannot, one line says so, and no half-written file is left."""
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    steps = [dict(ph="X", cat="user_annotation", name=f"Batch {i}", ts=1000 * i, dur=900, tid=1) for i in range(4)]
    (trace_dir / "w.pt.trace.json").write_text(json.dumps(dict(traceEvents=steps)))

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(writes.os, "replace", read_only)
    assert analyze.main([str(trace_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"analyze.py: cannot write {trace_dir / 'trace_steps.csv'} (Read-only file system): analyze a "
                   "copy in a writable folder"]
    assert sorted(p.name for p in trace_dir.iterdir()) == ["w.pt.trace.json"]


def test_one_broken_report_spoils_nothing_else(nsys, tmp_path):
    """A garbage export beside a good report is made again from the report; a truncated report is named,
    and the other variants are still diagnosed into diagnosis.json."""
    run = tmp_path / "run"
    run.mkdir()
    for v in ("async", "workers", "baseline"):
        shutil.copy(REFERENCE / f"{v}.nsys-rep", run)
    (run / "env.json").write_text(json.dumps(dict(gpu="NVIDIA H200", variants=["baseline", "workers", "async"])))
    (run / "async.sqlite").write_bytes(b"SQLite format 3\x00 but cut short")  # newer than its report
    rep = run / "baseline.nsys-rep"
    rep.write_bytes(rep.read_bytes()[:1000])
    p = run_script("analyze.py", str(run))
    assert p.returncode == 1
    assert "Traceback" not in p.stderr and "baseline.nsys-rep: nsys export failed" in p.stderr
    d = json.loads((run / "diagnosis.json").read_text())
    assert "error" in d["baseline"] and d["async"]["verdict"] == "copy not overlapped"
    assert d["workers"]["verdict"] == "synchronous pageable copy"


def test_torch_traces_are_picked_by_time_and_read_per_rank(tmp_path):
    import os
    trace_dir = tmp_path / "trace"
    p = run_script("train.py", "--variant", "streams", "--workers", "1", *TINY, "--profile", "torch",
                   "--profile-dir", str(trace_dir))
    assert p.returncode == 0, p.stderr
    real = next(trace_dir.glob("*.pt.trace.json"))
    worker = real.name.split(".")[0]
    stale = trace_dir / f"{worker}.9.pt.trace.json"  # sorts after the real one by name, older by time
    stale.write_text("{}")
    os.utime(stale, (1, 1))
    p = run_script("analyze.py", str(trace_dir))
    assert p.returncode == 0, p.stderr
    assert "median of 3 traced steps" in p.stdout  # the 3 it measured
    for rank in (0, 1):
        shutil.copy(real, trace_dir / f"rank{rank}.1000.pt.trace.json")
    stale.unlink()
    real.unlink()
    p = run_script("analyze.py", str(trace_dir))
    assert p.returncode == 0, p.stderr
    assert "trace.rank0: CPU ranges only" in p.stdout and "trace.rank1: CPU ranges only" in p.stdout


def test_a_ceiling_report_is_known_by_its_record(tmp_path):
    """No copies are expected of a ceiling: its profiled record (VARIANT.nsys.json) says it is one; a report
    without its record is known by its name."""
    (tmp_path / "resident.nsys.json").write_text(json.dumps(records.for_file({"data_on_gpu": True})))
    (tmp_path / "streams.nsys.json").write_text(json.dumps(records.for_file({"data_on_gpu": False})))
    # part 2's record says it in its own words
    (tmp_path / "kept.nsys.json").write_text(json.dumps(records.for_file({"study": "infer", "data_on_gpu": True})))
    assert json.loads((tmp_path / "kept.nsys.json").read_text())["outputs_on_gpu"]
    assert analyze.is_ceiling(tmp_path / "kept.nsys-rep")
    assert analyze.is_ceiling(tmp_path / "resident.nsys-rep")
    assert analyze.is_ceiling(tmp_path / "resident.rank1.nsys-rep")
    assert not analyze.is_ceiling(tmp_path / "streams.sqlite")
    assert analyze.is_ceiling(tmp_path / "ceiling-uint8.nsys-rep")
    assert not analyze.is_ceiling(tmp_path / "lone.nsys-rep")
