"""run_all.sh's options and measurement policy (starvation/plan.py), in-process: which runs each variant gets,
with which flags, in which order, and what a user reads as they end. The runs here are a fake that writes
the records a real one would."""
import json
import re
from pathlib import Path

import pytest

from starvation import plan


class FakeRuns:
    """Stands in for run_all.sh: takes each request, writes the records that run would, answers success (or
    a failure for the (variant, what) in `fail`)."""

    def __init__(self, out: Path, rates: dict[str, list[float]] | None = None, fail=(), steps: int = 30):
        self.out, self.rates, self.fail, self.steps = out, rates or {}, set(fail), steps
        self.requests, self.said = [], []

    def __call__(self, kind: str, v: str, what: str, log: str, flags: list[str]) -> bool:
        self.requests.append((kind, v, what, log, flags))
        if (v, what) in self.fail:
            return False
        path = flags[flags.index("--json") + 1]
        names = ["run1", "loader"] if "--then-alone" in flags else [None]
        if "--repeat" in flags:  # part 2: every window, then output processing alone, in one process
            names = [f"run{r}" for r in range(1, int(flags[flags.index("--repeat") + 1]) + 1)]
            names += ["output"] * ("--then-alone" in flags)
        for name in names:
            rate = self.rates.get(v, [10.0]).pop(0) if name != "loader" and self.rates.get(v) else 10.0
            record = dict(steps=self.steps, steps_per_s=rate, data_wait_share=0.1, loader_only=name == "loader"
                          or "--loader-only" in flags, loader_batches_per_s=20.0, nvtx_backend="torch")
            Path(path.replace("{}", name) if name else path).write_text(json.dumps(record))
        return True


def schedule(tmp_path, argv: list[str], variants: list[str], gpu: bool = True, **fake) -> FakeRuns:
    runs = FakeRuns(tmp_path, **fake)
    (tmp_path / "logs").mkdir(exist_ok=True)
    plan.Schedule(tmp_path, plan.parse_options(argv), gpu, variants, runs, runs.said.append,
                  lambda name, value: runs.said.append(f"env {name}={value}")).run()
    return runs


def test_a_gpu_run_of_the_study_in_order(tmp_path):
    """Run 1 measures the loader alone next in its process; runs 1 and 2 agree, so no third; the profiled run
    captures the last steps of a window sized to run 1's; a ceiling has no loader alone."""
    runs = schedule(tmp_path, ["--workers", "16"], ["prefetch", "ceiling"], rates={"prefetch": [10.0, 10.5]},
                    steps=30)
    asked = [(kind, v, what, log) for kind, v, what, log, _ in runs.requests]
    assert asked == [("run", "prefetch", "run 1", "logs/prefetch.run1.log"),
                     ("run", "prefetch", "run 2", "logs/prefetch.run2.log"),
                     ("nsys", "prefetch", "nsys", "logs/prefetch.nsys.log"),
                     ("run", "ceiling", "run 1", "logs/ceiling.run1.log"),
                     ("run", "ceiling", "run 2", "logs/ceiling.run2.log"),
                     ("nsys", "ceiling", "nsys", "logs/ceiling.nsys.log")]
    flags = [f for *_, f in runs.requests]
    assert flags[0] == ["--variant", "prefetch", "--workers", "16", "--then-alone", "--json",
                        f"{tmp_path}/prefetch.{{}}.json"]
    assert flags[2] == ["--variant", "prefetch", "--workers", "16", "--steps", "30", "--profile", "nsys",
                        "--profile-steps", "10", "--json", f"{tmp_path}/prefetch.nsys.json"]
    assert flags[3] == ["--variant", "prefetch", "--data-on-gpu", "--drop-pipeline-flags", "--json",
                        f"{tmp_path}/ceiling.run1.json"]
    assert runs.said.count("    runs 1 and 2 agree within 10%: run 3 skipped") == 2
    assert runs.said[0] == f"run_all: 2 variants x (3 runs + loader alone + 1 under nsys) into {tmp_path}"
    assert runs.said[1] == "[1/2] prefetch"
    assert re.fullmatch(r"    run 1/3    10\.00 steps/s, waiting for data 10% of the window  "
                        r"\[1/9 runs, \d+ s, about \d+ min \d\d s left\]", runs.said[2]), runs.said
    assert re.fullmatch(r"    loader alone 20\.00 batches/s  \[2/9 runs, same process, .*\]", runs.said[3])
    assert runs.said.count("    note: this nsys drops the nvtx package's ranges: they went through "
                           "torch.cuda.nvtx, without colours (docs/profiling.md)") == 1
    assert runs.said.count("env NVTX_FALLBACK_SAID=1") == 1  # and the runs after it do not log it again
    assert runs.said[-1].startswith("    nsys ") and "[9/9 runs" in runs.said[-1]


def test_a_slow_window_sizes_what_follows_and_a_third_run_settles_a_disagreement(tmp_path):
    runs = schedule(tmp_path, ["--no-loader"], ["streams"], rates={"streams": [10.0, 14.0, 12.0]}, steps=60)
    assert [what for _, _, what, _, _ in runs.requests] == ["run 1", "run 2", "run 3", "nsys"]
    assert "--then-alone" not in runs.requests[0][4]
    assert runs.requests[-1][4][2:8] == ["--steps", "40", "--profile", "nsys", "--profile-steps", "10"]


def test_the_extra_flags_come_last_before_the_record(tmp_path):
    """Flags after run_all.sh's -- override the plan's (a user's --steps wins), and the record's path is the plan's."""
    runs = schedule(tmp_path, ["--repeat", "1", "--no-nsys", "--", "--steps", "7"], ["async"])
    assert runs.requests[0][4][-4:] == ["--steps", "7", "--json", f"{tmp_path}/async.{{}}.json"]


def test_a_failed_run_ends_its_variant_and_the_next_one_runs(tmp_path):
    runs = schedule(tmp_path, ["--repeat", "2"], ["baseline", "workers"], fail={("baseline", "run 1")})
    assert [(v, what) for _, v, what, _, _ in runs.requests] == [
        ("baseline", "run 1"), ("workers", "run 1"), ("workers", "run 2"), ("workers", "nsys")]


def test_a_resumed_folder_skips_what_it_holds(tmp_path):
    """Run 1 done and its process gone: the loader alone gets a process of its own, sized to run 1's window."""
    (tmp_path / "async.run1.json").write_text(json.dumps(dict(steps=24, steps_per_s=9.0, data_wait_share=0.5)))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "async.nsys.done").touch()
    runs = schedule(tmp_path, ["--repeat", "2"], ["async"])
    assert [(kind, what) for kind, _, what, _, _ in runs.requests] == [("run", "run 2"), ("py", "loader alone")]
    assert runs.requests[1][4] == ["--variant", "async", "--steps", "12", "--loader-only", "--json",
                                   f"{tmp_path}/async.loader.json"]
    assert runs.said[2] == "    run 1/2 (already done)" and runs.said[-1] == "    nsys (already done)"
    assert re.fullmatch(r"    loader alone 20\.00 batches/s  \[3/4 runs, \d+ s, .*\]", runs.said[4]), runs.said


def test_a_small_cpu_run(tmp_path):
    runs = schedule(tmp_path, ["--repeat", "1"], ["baseline", "prefetch", "ceiling"], gpu=False)
    small = ["--img-size", "64", "--batch-size", "8", "--warmup", "2", "--steps", "5"]
    assert runs.requests[0][4][:-2] == ["--variant", "baseline", *small, "--then-alone"]
    assert runs.requests[2][4][:-2] == ["--variant", "prefetch", "--workers", "2", *small, "--then-alone"]
    assert runs.requests[3][4][:-2] == ["--variant", "prefetch", "--workers", "2", *small]  # nsys: the whole run
    assert runs.requests[4][4][:-2] == ["--variant", "prefetch", "--data-on-gpu", "--drop-pipeline-flags", *small]
    # its rates are printed as they come, each marked as what README says it is
    assert re.match(r"    run 1/1    10\.00 steps/s, waiting for data 10% of the window \(CPU: not a GPU figure\)  \[",
                    runs.said[2]), runs.said


def test_part_two_runs_its_windows_and_output_alone_in_one_process(tmp_path):
    runs = schedule(tmp_path, ["--study", "infer", "--no-nsys"], ["streams", "ceiling"])
    assert [(kind, v, what) for kind, v, what, _, _ in runs.requests] == [
        ("py", "streams", "its runs"), ("py", "ceiling", "its runs")]
    assert runs.requests[0][4] == ["--variant", "streams", "--repeat", "2", "--then-alone", "--json",
                                   f"{tmp_path}/streams.{{}}.json"]
    assert runs.requests[1][4][:4] == ["--variant", "baseline", "--outputs-on-gpu", "--repeat"]
    assert [line.split()[0:2] for line in runs.said[2:5]] == [["run", "1/2"], ["run", "2/2"], ["output", "alone"]]
    assert "same process" in runs.said[3] and "same process" in runs.said[4]
    assert runs.said[0] == f"run_all: 2 variants x (2 runs + output processing alone) into {tmp_path}"


@pytest.mark.parametrize("argv, message", [
    (["--repeat", "0"], "--repeat needs a positive integer, got '0'"),
    (["--workers", "x"], "--workers needs a number, got 'x'"),
    (["--frobnicate"], "unknown option: --frobnicate (./run_all.sh --help lists the options)"),
    (["--variants", "baseline,,ceiling"], "--variants baseline,,ceiling: an empty name between commas"),
    (["--variants", "baseline,"], "--variants baseline,: an empty name after the last comma"),
    (["--out"], "--out needs a value (./run_all.sh --help lists the options)"),
    (["--out", "--no-nsys"], "--out needs a value"),
    (["--variants"], "--variants needs a value"),
    (["--study", "both"], "--study needs train or infer, got 'both'"),
    (["--steps", "5", "--nsys-steps", "6"], "--nsys-steps 6 exceeds --steps 5"),
    (["--study", "infer", "--gpus", "2"], "--study infer runs on one GPU: drop --gpus"),
    (["--no-nsys", "--resume", "x"], "--resume takes one folder and no other option"),
    (["--resume", "x", "--repeat", "1"], "--resume takes one folder and no other option: the run's own options"),
])
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(plan.BadOption, match=re.escape(message)):
        plan.parse_options(argv)
    assert plan.main(["options", *argv]) == 2  # what run_all.sh prints: one line, and it exits 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"run_all: {message}"), lines


def test_resume_takes_the_recorded_options(tmp_path):
    (tmp_path / "env.json").write_text(json.dumps(dict(gpu="cpu", argv=["--study", "infer", "--no-nsys"])))
    with pytest.raises(plan.BadOption, match="that run has finished"):
        plan.parse_options(["--resume", str(tmp_path)])
    (tmp_path / "INCOMPLETE").write_text("interrupted\n")
    o = plan.parse_options(["--resume", str(tmp_path)])
    assert (o.study, o.nsys, o.repeat, o.out, o.resume) == ("infer", False, 2, str(tmp_path), str(tmp_path))
    assert "resume=" + str(tmp_path) in o.shell().splitlines()
    assert plan.resumable(tmp_path, "infer", 1, [], "NVIDIA H200") == "that run was on cpu, this machine has NVIDIA H200"


def test_the_nsys_reports_by_the_names_this_nsys_knows():
    """Report names changed across nsys versions: each summary by the first of its names listed."""
    new = "\n  nvtx_sum -- NVTX Range Summary\n  osrt_sum -- OS Runtime\n  cuda_api_sum -- CUDA API\n" \
          "  cuda_gpu_kern_sum[:nvtx-name][:base|:mangled] -- Kernels\n  cuda_gpu_mem_time_sum -- x\n" \
          "  cuda_gpu_mem_size_sum -- x\n"
    assert plan.reports(new, gpu=True) == ["nvtx_sum", "osrt_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum",
                                           "cuda_gpu_mem_size_sum", "cuda_api_sum"]
    assert plan.reports(new, gpu=False) == ["nvtx_sum", "osrt_sum"]
    old = "The following built-in reports are available:\n\n  nvtxsum -- x\n  osrtsum -- x\n  gpukernsum -- x\n"
    assert plan.reports(old, gpu=True) == ["nvtxsum", "osrtsum", "gpukernsum"]


def test_the_schedule_talks_to_run_all_and_profiles_only_where_nsys_was_found(tmp_path):
    """`schedule` as run_all.sh runs it: a request a line, an exit status read back for each run; with NSYS 0
    (run_all.sh found none), no profiled run whatever the options say."""
    import subprocess
    import sys
    from conftest import ROOT
    (tmp_path / "logs").mkdir()
    p = subprocess.run([sys.executable, "-m", "starvation.plan", "schedule", str(tmp_path), "1", "0", "ceiling",
                        "--", "--repeat", "1"], cwd=ROOT, input="0\n", capture_output=True, text=True, timeout=60)
    lines = [line.split("\t") for line in p.stdout.splitlines()]
    assert p.returncode == 0 and [line[0] for line in lines] == ["say", "say", "run", "say"], p.stdout + p.stderr
    assert lines[2][:4] == ["run", "ceiling", "run 1", "logs/ceiling.run1.log"]
    assert lines[0][1] == f"run_all: 1 variants x (1 runs + loader alone) into {tmp_path}"


def test_a_run_folder_is_made_new_and_marked(tmp_path, monkeypatch):
    """make_folder never takes one that exists; start_folder writes the marker and, for a new run only,
    env.json; one that cannot be written is named with why, and a folder this run made goes again."""
    out = str(tmp_path / "run")
    plan.make_folder(out)
    with pytest.raises(plan.BadOption, match="exists: runs are never overwritten"):
        plan.make_folder(out)
    plan.start_folder(out, True, '{"cpu_count": 2}', "", "cpu", "1", "train", ["ceiling"], ["--no-nsys"])
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    assert (env["study"], env["variants"], env["argv"], env["cpu_count"]) == ("train", ["ceiling"], ["--no-nsys"], 2)
    assert (tmp_path / "run" / "INCOMPLETE").read_text().startswith("running since ")
    plan.start_folder(out, False, "", "", "other", "1", "infer", [], [])  # resumed: its env.json stays
    assert json.loads((tmp_path / "run" / "env.json").read_text()) == env

    def full(path, data):
        raise OSError(28, "No space left on device", path)
    monkeypatch.setattr(plan.records, "write_whole", full)
    with pytest.raises(plan.BadOption) as e:
        plan.start_folder(out, True, "{}", "", "cpu", "1", "train", [], [])
    assert str(e.value) == f"cannot write INCOMPLETE into {out} (the disk is full): the folder is removed again"
    assert not (tmp_path / "run").exists()


def test_the_time_left_counts_each_kind_of_run_at_its_own_cost(tmp_path, monkeypatch):
    """An nsys run costing four times an unprofiled one: once one has run, the runs still to come are
    counted at their kind's cost, and a variant's own second run at what its first took."""
    clock = [0.0]
    monkeypatch.setattr(plan.time, "monotonic", lambda: clock[0])
    cost = {"run": 10.0, "nsys": 40.0}

    class Timed(FakeRuns):
        def __call__(self, kind, v, what, log, flags):
            clock[0] += cost["nsys" if kind == "nsys" else "run"] * (3 if v == "compiled" else 1)
            return super().__call__(kind, v, what, log, flags)

    runs = Timed(tmp_path)
    (tmp_path / "logs").mkdir()
    plan.Schedule(tmp_path, plan.parse_options(["--repeat", "2", "--no-loader"]), True,
                  ["workers", "async", "compiled"], runs, runs.said.append, lambda *_: None).run()
    left = [int(m[1]) * 60 + int(m[2]) for m in (re.search(r"about (\d+) min (\d\d) s left", s) for s in runs.said)
            if m]
    # after workers' run 1: 8 runs of 10 s; after its nsys run: async's 2 runs and nsys, then compiled's
    assert left[0] == 80 and left[2] == 2 * (10 + 10 + 40)
    # compiled's run 1 took 30 s: its run 2 is counted at 30, its nsys run at nsys's average so far
    assert left[6] == 30 + 40 and left[-1] == 0
