"""run_all.sh end to end on the CPU, with the real nsys that tests/run.sh fetches."""
import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

import infer
import train
from conftest import FIXTURES, ROOT, failing_nsys, run_script

pytestmark = pytest.mark.e2e  # whole scripts, end to end
CPU = r"( \(CPU: not a GPU figure\))?"  # the mark a CPU run's progress lines put on each rate


def test_every_variant_gets_a_report_csvs_and_a_row(nsys, tmp_path):
    out = tmp_path / "run"
    # (the loader-alone runs are covered by the resume test below; here they would only add minutes)
    p = run_script("./run_all.sh", "--repeat", "1", "--no-loader", "--out", str(out), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no CUDA GPU visible: doing a small CPU run" in p.stdout
    variants = json.loads((out / "env.json").read_text())["variants"]
    assert variants == ["baseline", "workers", "async", "streams", "prefetch", "pool", "ceiling"]
    md = (out / "results.md").read_text()
    for i, v in enumerate(variants, 1):
        assert f"[{i}/7] {v}" in p.stdout
        assert (out / f"{v}.nsys-rep").stat().st_size > 0
        assert (out / f"{v}_nvtx_sum.csv").stat().st_size > 0 and (out / f"{v}_osrt_sum.csv").exists()
        assert json.loads((out / f"{v}.run1.json").read_text())["steps_per_s"] > 0
        # a CPU run's table says what it proved: the variant ran, its window, its report and the steps traced
        assert re.search(rf"^\| {v} \| yes \| 1 x 5 steps \| {v}\.nsys-rep \| \d+ \|$", md, re.M), md
    assert not (out / "steps_per_s.png").exists() and "steps/s" not in md  # its throughput is noise: left out
    assert (out / "data_wait.png").exists()  # its chart: the share of each window the loop waited
    assert "Its throughput would be noise" in md and not (out / "INCOMPLETE").exists()
    assert p.stdout.strip().splitlines()[-1] == f"run_all: results in {out}/results.md"  # a path, not the table


@pytest.mark.parametrize("fails, status", [(1, 1), (2, 1), (1, 0)])
def test_a_failed_profile_is_tried_once_more(nsys, tmp_path, fails, status):
    """nsys 2023.4 at times fails by itself on a loaded machine, in words that vary, or exits 0 with no report:
    the run is profiled once more, and only a second failure is the variant's, named with the log's last line.
    Here NSYS is a wrapper whose first `fails` profiles fail, in words nsys has for one such fault."""
    words = "Agent launcher exceeded its timeout." if status else "Generating '/tmp/nsys-report-1.qdstrm'"
    wrapper = failing_nsys(tmp_path / "nsys", nsys, fails, words, status)
    out = tmp_path / "run"
    p = run_script("./run_all.sh", "--repeat", "1", "--steps", "2", "--nsys-steps", "2", "--no-loader",
                   "--variants", "ceiling", "--out", str(out), env={"NSYS": str(wrapper)})
    said = words if status else "it wrote no report ceiling.nsys-rep"
    assert (f"    nsys       exited {status} ({said}): profiling the run once more "
            f"(log: {out}/logs/ceiling.nsys.first.log)") in p.stdout, p.stdout
    assert (out / "logs" / "ceiling.nsys.first.log").read_text() == words + "\n"
    if fails == 1:
        assert p.returncode == 0, p.stdout + p.stderr
        assert (out / "ceiling.nsys-rep").stat().st_size > 0 and "FAILED" not in p.stdout
    else:
        assert p.returncode == 1 and p.stdout.count("profiling the run once more") == 1
        assert ("FAILED: nsys profile exited 1: Agent launcher exceeded its timeout. "
                f"(log: {out}/logs/ceiling.nsys.log)") in p.stdout, p.stdout


def test_a_failing_variant_is_reported_and_the_others_still_run(tmp_path):
    out = tmp_path / "run"
    # --prefetch-factor without workers is an error for the baseline only
    p = run_script("./run_all.sh", "--repeat", "1", "--no-nsys", "--variants", "baseline,workers",
                   "--out", str(out), "--", "--prefetch-factor", "2", timeout=600)
    assert p.returncode == 1
    assert "1 failure(s):" in p.stdout and "baseline: run 1 exited 2" in p.stdout
    assert "logs/baseline.run1.log" in p.stdout
    assert "--prefetch-factor needs worker processes: add --workers N" in (out / "logs" / "baseline.run1.log").read_text()
    assert (out / "workers.run1.json").exists()
    md = (out / "results.md").read_text()
    assert "baseline: run 1 exited 2" in md and "| workers |" in md


def test_bad_options_are_named(tmp_path):
    """Each option's own refusal is tested in-process (test_plan.py); here, that run_all.sh says it in one line."""
    p = run_script("./run_all.sh", "--variants", "baseline,turbo", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "unknown variant(s): turbo" in p.stderr
    for args, line in [(["--repeat", "0"], "run_all: --repeat needs a positive integer, got '0'"),
                       (["--frobnicate"], "run_all: unknown option: --frobnicate")]:
        p = run_script("./run_all.sh", *args)
        assert p.returncode == 2 and p.stderr.strip().splitlines() == [p.stderr.strip()], (args, p.stderr)
        assert p.stderr.startswith(line), (args, p.stderr)
    p = run_script("./run_all.sh", "--help")
    assert p.returncode == 0 and p.stdout.startswith("Run every variant of train.py")


def test_no_install_uses_the_projects_venv(tmp_path):
    """tests/run.sh made .venv; with no PYTHON named, --no-install must find torch there, not fail on python3."""
    import os
    import subprocess
    from conftest import ROOT
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    p = subprocess.run(["./run_all.sh", "--no-install", "--variants", "turbo"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown variant(s): turbo" in p.stderr, p.stderr


def test_resume_refuses_a_folder_it_cannot_finish_as_it_was_started(tmp_path):
    (tmp_path / "env.json").write_text(json.dumps({"gpu": "cpu"}))
    p = run_script("./run_all.sh", "--resume", str(tmp_path))
    assert p.returncode == 2 and "that run has finished" in p.stderr
    (tmp_path / "INCOMPLETE").write_text("interrupted\n")
    p = run_script("./run_all.sh", "--resume", str(tmp_path))
    assert p.returncode == 2 and "env.json holds no argv" in p.stderr
    p = run_script("./run_all.sh", "--resume", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "no env.json there" in p.stderr


def test_an_existing_run_folder_is_never_overwritten(tmp_path):
    p = run_script("./run_all.sh", "--no-nsys", "--out", str(tmp_path))
    assert p.returncode == 2 and "exists: runs are never overwritten" in p.stderr


def test_progress_loader_alone_small_steps_and_resume(tmp_path):
    """Each run prints its figure and the time left; --steps 2 is accepted; an interrupted folder is
    finished by --resume with its own options, skipping what is done."""
    out = tmp_path / "run"
    p = run_script("./run_all.sh", "--repeat", "2", "--steps", "2", "--no-nsys", "--variants", "async,ceiling",
                   "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"run 1/2 +\d+\.\d\d steps/s, waiting for data \d+% of the window" + CPU + r"  "
                     r"\[1/5 runs, \d+ s, about \d+ min \d\d s left\]", p.stdout), p.stdout
    # the loader alone comes next from run 1's own process
    assert re.search(r"loader alone +\d+\.\d\d batches/s" + CPU + r"  \[2/5 runs, same process, about \d+ min \d\d s left\]",
                     p.stdout), p.stdout
    assert re.search(r"run 2/2 .*\[3/5 runs, \d+ s, about \d+ min \d\d s left\]", p.stdout), p.stdout
    assert json.loads((out / "async.run1.json").read_text())["steps"] == 2
    loader = json.loads((out / "async.loader.json").read_text())
    assert loader["loader_only"] and loader["after_window"] and loader["steps"] == 1  # half the window's
    assert not (out / "INCOMPLETE").exists() and not (out / "ceiling.loader.json").exists()
    assert not (out / "logs" / "run_all.lock").exists()  # a finished folder keeps no lock
    p = run_script("./run_all.sh", "--resume", str(out))
    assert p.returncode == 2 and "that run has finished" in p.stderr
    # as a time limit leaves it: one run missing, the loader alone too, the marker still there
    first = (out / "async.run1.json").read_text()
    (out / "async.run2.json").unlink()
    (out / "async.loader.json").unlink()
    (out / "INCOMPLETE").write_text("running since ...\n")
    p = run_script("./run_all.sh", "--resume", str(out), timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "run 1/2 (already done)" in p.stdout
    assert re.search(r"run 2/2 +\d+\.\d\d steps/s", p.stdout)
    # run 1's process is gone: the loader alone gets one of its own
    assert re.search(r"loader alone +\d+\.\d\d batches/s" + CPU + r"  \[\d/5 runs, \d+ s, ", p.stdout), p.stdout
    assert json.loads((out / "async.loader.json").read_text())["after_window"] is False
    assert (out / "async.run1.json").read_text() == first and (out / "async.run2.json").exists()
    assert not (out / "INCOMPLETE").exists() and "| async |" in (out / "results.md").read_text()
    p = run_script("./run_all.sh", "--resume", str(out), "--repeat", "1")
    assert p.returncode == 2 and "--resume takes one folder and no other option" in p.stderr


def test_ctrl_c_during_the_tables_marks_the_run_incomplete(tmp_path):
    """The interrupt lands while compare.py runs, after every variant: the folder is marked, exit 130."""
    out = tmp_path / "run"
    wrapper = tmp_path / "python"
    wrapper.write_text(f"""#!/usr/bin/env bash
# Ctrl-C reaches the whole foreground group: run_all.sh and compare.py, which dies of it
if [[ "$*" == *compare.py* ]]; then kill -INT $PPID; kill -INT $$; fi
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    p = run_script("./run_all.sh", "--repeat", "1", "--steps", "2", "--no-nsys", "--no-loader", "--variants",
                   "ceiling", "--out", str(out), env={"PYTHON": str(wrapper)}, timeout=300)
    assert p.returncode == 130, p.stdout + p.stderr
    assert "interrupted" in (out / "INCOMPLETE").read_text()
    assert f"./run_all.sh --resume {out}" in p.stdout


def test_the_inference_study_end_to_end(nsys, tmp_path):
    """--study infer: infer.py's variants and their ceiling, profiled, checked and tabulated like the
    training study's, with device-to-host columns."""
    out = tmp_path / "infer"
    p = run_script("./run_all.sh", "--study", "infer", "--repeat", "1", "--steps", "2", "--nsys-steps", "2",
                   "--variants", "baseline,streams,ceiling", "--out", str(out), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((out / "env.json").read_text())["study"] == "infer"
    assert json.loads((out / "streams.run1.json").read_text())["study"] == "infer"
    assert re.search(r"run 1/1 +\d+\.\d\d batches/s, on the output path \d+% of the window", p.stdout), p.stdout
    assert (out / "streams.nsys-rep").exists() and not (out / "streams.loader.json").exists()
    assert json.loads((out / "streams.output.json").read_text())["output_batches_per_s"] > 0
    table = (out / "results.md").read_text()
    assert "| variant | ran | runs x window | nsys report | batches in its trace |" in table
    assert re.search(r"^\| ceiling( \[\d+\])* \| yes \| 1 x 2 batches \|", table, re.M)  # footnoted if not settled
    assert "D2H ms/batch" not in table and "batches/s" not in table  # a CPU run's figures are left out
    assert "copy output" in (out / "streams_steps.csv").read_text().splitlines()[0].replace("_", " ")
    # this nsys's NVTX warning is harmless: said once a run, in the output and in one log, not in every log
    assert p.stdout.count("said once a run") <= 1
    assert sum("nvtxDomainIsEnabled" in log.read_text() for log in (out / "logs").glob("*.nsys.log")) <= 1


@pytest.mark.parametrize("script", [train, infer])
def test_the_groups_run_all_expands_are_the_scripts_presets(script):
    """run_all.sh takes its variant groups from the script (GROUPS): every name is a preset or a preset's
    ceiling, and "all" runs every preset."""
    names = script.GROUPS["all"].split(",")
    assert len(names) == len(set(names))
    assert all(v == "ceiling" or v.removeprefix("ceiling-") in script.PRESETS for v in names)
    assert {v for v in names if not v.startswith("ceiling")} == set(script.PRESETS)


@pytest.fixture
def small_disk(tmp_path):
    """A 256 kB tmpfs (CI runs as root), or a skip where the machine does not allow one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("no tmpfs here (mount needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_an_out_that_cannot_be_written_is_one_line_and_leaves_nothing(small_disk):
    """A full disk or a read-only one, before anything runs: exit 2, one line naming what and why, and the
    folder it had made is gone, so that the same --out starts anew once there is room."""
    with contextlib.suppress(OSError), open(small_disk / "filler", "wb") as f:  # every last block
        while True:
            f.write(b"x" * 4096)
            f.flush()
    out = small_disk / "run"
    p = run_script("./run_all.sh", "--no-nsys", "--variants", "ceiling", "--out", str(out))
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.strip() == \
        f"run_all: cannot write INCOMPLETE into {out} (the disk is full): the folder is removed again"
    assert not out.exists() and "Traceback" not in p.stderr
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    p = run_script("./run_all.sh", "--no-nsys", "--variants", "ceiling", "--out", str(out))
    assert p.returncode == 2 and p.stderr.strip() == f"run_all: --out {out} cannot be made: Read-only file system"


def test_sigterm_to_run_all_alone_stops_its_run_at_once(tmp_path):
    """As `kill PID` sends it: run_all.sh passes it to the run under way, which ends in seconds (not at the
    end of its window), and exits 143 with the folder marked for --resume; no process is left."""
    out = tmp_path / "run"
    p = subprocess.Popen(["./run_all.sh", "--no-nsys", "--no-loader", "--repeat", "1", "--variants", "ceiling",
                          "--out", str(out), "--", "--steps", "100000"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    log = out / "logs" / "ceiling.run1.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "warm-up" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert log.exists(), p.stdout.read() if p.poll() is not None else "no run started"
    time.sleep(2)  # into the window
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    took = time.monotonic() - sent
    assert p.returncode == 143 and took < 15, (took, p.stdout.read())
    assert "interrupted" in (out / "INCOMPLETE").read_text() and "terminated (SIGTERM)" in log.read_text()
    # on a loaded machine a process of the run that is exiting may still be listed just after run_all.sh
    # exits: they get a few seconds, and the failure names any that stay
    deadline = time.monotonic() + 10
    while (left := subprocess.run(["pgrep", "-a", "-f", str(out)], capture_output=True, text=True).stdout) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == "", left


def test_resume_refuses_a_folder_whose_records_disagree_with_its_options(tmp_path):
    """A part-2 folder whose env.json was edited to say part 1, one whose records name a variant it does
    not list, one run on another count of GPUs: refused before anything runs, with the reason."""
    from starvation import plan
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run-h200", run)
    variants = ["baseline", "async", "ceiling"]
    env = json.loads((run / "env.json").read_text())
    (run / "env.json").write_text(json.dumps(dict(env, study="train", gpus=1)))
    assert plan.resumable(run, "train", 1, variants) is None
    assert plan.resumable(run, "infer", 1, variants) == \
        "its env.json says study 'train', its recorded options give 'infer'"
    assert "its env.json says variants" in plan.resumable(run, "train", 1, ["async"])
    record = json.loads((run / "async.run1.json").read_text())
    (run / "async.run1.json").write_text(json.dumps(dict(record, study="infer")))
    assert "a record of infer.py's study in a folder of train.py's" in plan.resumable(run, "train", 1, variants)
    (run / "async.run1.json").write_text(json.dumps(dict(record, world_size=2)))
    assert plan.resumable(run, "train", 1, variants) == ("async's records include one of train.py on 2 GPU(s), "
                                                         "and the folder is train.py's on 1")
    (run / "async.run1.json").write_text(json.dumps(record))
    shutil.copy(run / "async.run1.json", run / "streams.run1.json")
    assert plan.resumable(run, "train", 1, variants) == "it holds records of streams, which its env.json does not list"
    # end to end: the study its options give is part 2's, its env.json and records part 1's
    (run / "streams.run1.json").unlink()
    (run / "env.json").write_text(json.dumps(dict(env, gpu="cpu", study="train", gpus=1,
                                                  variants=["baseline", "ceiling"], argv=["--study", "infer"])))
    (run / "INCOMPLETE").write_text("interrupted\n")
    p = run_script("./run_all.sh", "--resume", str(run))
    assert p.returncode == 2 and "its env.json says study 'train', its recorded options give 'infer'" in p.stderr
    assert sorted(f.name for f in run.iterdir()) == ["INCOMPLETE", "async.run1.json", "baseline.run1.json",
                                                     "ceiling.run1.json", "diagnosis.json", "env.json"]
