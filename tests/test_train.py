"""train.py on the CPU, at tiny sizes: every preset, the ceiling, verify, bad input, profilers."""
import json
import math
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import replace

import pytest
import torch

import train
from conftest import ROOT, TINY, refusal, run_profiled, run_script
from starvation import data, decoders, measure, pool
from starvation import profiling
from starvation import records, runtime, thresholds, writes


def run_inprocess(*args: str, tmp_path, after_tiny: bool = False) -> dict:
    out = tmp_path / "run.json"
    argv = [*TINY, *args] if after_tiny else [*args, *TINY]
    cfg = train.parse_config([*argv, "--json", str(out)])
    assert train.main(cfg) == 0
    return json.loads(out.read_text())


def run_after_tiny(*args: str, tmp_path) -> dict:
    """As run_inprocess, with args that override TINY's (--steps, say)."""
    return run_inprocess(*args, tmp_path=tmp_path, after_tiny=True)


# the compiled presets compile the step on the CPU (C++ through inductor), tens of seconds each: end to end
@pytest.mark.parametrize("variant", [pytest.param(v, marks=pytest.mark.e2e) if preset.get("compile") else v
                                     for v, (preset, _) in train.PRESETS.items()])
def test_every_preset_runs_verified_and_writes_json(variant, tmp_path):
    if train.PRESETS[variant][0].get("compile") and not shutil.which("c++"):
        pytest.skip("torch.compile on the CPU needs a C++ compiler (c++)")
    if train.PRESETS[variant][0].get("jpeg") and not decoders.installed("skimage"):
        pytest.skip("the default photos need scikit-image (requirements.txt)")
    r = run_inprocess("--variant", variant, "--workers", "0" if variant == "baseline" else "2", "--verify",
                      tmp_path=tmp_path)
    assert r["preset"] == variant and not r["data_on_gpu"]
    assert r["steps"] == 3 and r["steps_per_s"] > 0 and r["images_per_s"] == pytest.approx(4 * r["steps_per_s"])
    assert r["step_ms_min"] <= r["step_ms_median"] <= r["step_ms_max"]
    assert r["verified_batches"] == 4 and r["verify_mismatches"] == []
    for key in ("device_name", "torch", "cpu_count", "data_wait_ms_median", "settings", "compute_key"):
        assert key in r
    assert r["cuda_work_queues"] == os.environ["CUDA_DEVICE_MAX_CONNECTIONS"]  # what the run's CUDA would use
    # the step is compiled before the warm-up, on a batch of zeros, and the record says how long it took
    assert (r["compile_s"] is not None and r["compile_s"] > 0) == r["compute_key"].endswith("+compiled") \
        == bool(train.PRESETS[variant][0].get("compile"))


def test_every_script_asks_the_driver_for_32_work_queues_unless_told():
    # set on importing starvation.runtime, which every script does before torch: CUDA reads it when it starts
    code = "import os, starvation.runtime; print(os.environ['CUDA_DEVICE_MAX_CONNECTIONS'])"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    for given, expected in ((None, "32"), ("8", "8")):
        run_env = env if given is None else dict(env, CUDA_DEVICE_MAX_CONNECTIONS=given)
        p = subprocess.run([sys.executable, "-c", code], env=run_env, cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        assert p.stdout.strip() == expected, p.stderr[-2000:]


@pytest.mark.parametrize("variant", ["prefetch", "channels-last", "fast"])
def test_ceiling_uses_the_variants_compute(variant, tmp_path):
    r = run_inprocess("--variant", variant, "--data-on-gpu", tmp_path=tmp_path)
    preset = dict(train.TRAIN_DEFAULTS, **train.PRESETS[variant][0])
    assert r["data_on_gpu"] and r["data_wait_ms_median"] == 0
    assert r["settings"]["amp"] == preset["amp"] and r["settings"]["uint8"] == preset["uint8"]
    assert r["compute_key"] == train.parse_config(["--variant", variant]).compute_key


def test_explicit_flags_override_the_preset():
    cfg = train.parse_config(["--variant", "async", "--workers", "3", "--no-pin-memory"])
    assert (cfg.workers, cfg.pin_memory, cfg.non_blocking) == (3, False, True)


def test_the_design_cards_command_runs_the_studys_step():
    """The study's steps are cumulative: --streams alone is its streams step, pinned and non_blocking."""
    cfg = train.parse_config(["--streams", "--workers", "8"])
    assert (cfg.variant, cfg.workers, cfg.pin_memory, cfg.non_blocking, cfg.streams) == ("streams", 8, True, True, True)
    cfg = train.parse_config(["--prefetcher"])
    assert (cfg.variant, cfg.pin_memory, cfg.prefetcher, cfg.streams) == ("prefetch", True, True, False)
    cfg = train.parse_config(["--streams", "--no-pin-memory"])  # an explicit flag still wins
    assert (cfg.variant, cfg.pin_memory, cfg.non_blocking) == ("streams", False, True)
    cfg = train.parse_config(["--pool", "--streams"])  # the pool's step, with the study's streams instead
    assert (cfg.variant, cfg.pool, cfg.pin_memory, cfg.streams, cfg.prefetcher) == ("pool", True, False, True, False)
    cfg = train.parse_config(["--variant", "prefetch", "--streams"])
    assert (cfg.streams, cfg.prefetcher) == (True, False)
    cfg = train.parse_config(["--variant", "fast", "--pool"])
    assert (cfg.variant, cfg.pool, cfg.pin_memory, cfg.uint8) == ("fast", True, False, True)
    assert train.parse_config(["--pin-memory"]).variant == "async"
    assert train.parse_config(["--workers", "4"]).variant == "workers"
    assert train.parse_config([]).variant == "baseline"
    assert "furthest step of the study" in train.build_parser().format_help()


def test_warmup_covers_the_workers_initial_queue():
    """10 steps, then the queued batches are dropped and as many steps again let the workers settle."""
    cfg = train.parse_config(["--variant", "workers"])
    assert (cfg.warmup, measure.drain_at(cfg)) == (26, 10)
    cfg = train.parse_config(["--variant", "fast", "--workers", "4"])
    assert (cfg.warmup, measure.drain_at(cfg)) == (26, 10)
    cfg = train.parse_config(["--variant", "baseline"])
    assert (cfg.warmup, measure.drain_at(cfg)) == (10, None)
    cfg = train.parse_config(["--variant", "workers", "--warmup", "3"])
    assert (cfg.warmup, measure.drain_at(cfg)) == (3, 0)
    assert train.parse_config(["--variant", "fast", "--data-on-gpu"]).warmup == 10


@pytest.mark.parametrize("args, message", [
    (["--streams", "--prefetcher"], "--streams and --prefetcher"),
    (["--pool", "--pin-memory"], "drop --pin-memory"),
    (["--variant", "prefetch", "--loader-only", "--verify"], "--loader-only measures one process"),
    (["--variant", "prefetch", "--loader-only", "--data-on-gpu"], "--loader-only measures one process"),
    (["--variant", "fast", "--compile", "--loader-only"], "--compile compiles the training step"),
    (["--steps", "0"], "must be a positive integer"),
    (["--batch-size", "-1"], "must be a positive integer"),
    (["--img-size", "0"], "must be a positive integer"),
    (["--workers", "-2"], "must be 0 or more"),
    (["--device", "cuda"], "no CUDA device"),
    (["--profile", "nsys"], "--profile nsys needs CUDA"),
    (["--amp", "fp8"], "invalid choice"),
    (["--prefetch-factor", "2"], "--prefetch-factor needs worker processes: add --workers N"),
    (["--variant", "baseline", "--persistent-workers"], "--persistent-workers needs worker processes: add --workers N"),
    (["--data-on-gpu", "--verify"], "--data-on-gpu makes none"),
    (["--variant", "fast", "--data-on-gpu", "--workers", "4"],
     "--workers shapes the input pipeline, and --data-on-gpu has none: drop it"),
    (["--data-on-gpu", "--batched-fetch", "--streams"], "--streams --batched-fetch shape the input pipeline"),
    (["--profile-steps", "5"], "--profile-steps 5 needs --profile"),
    (["--profile", "torch", "--steps", "4", "--profile-steps", "5"], "at most --steps (4)"),
    (["--profile-stack"], "--profile-stack records Python's frames in torch.profiler's trace: add --profile torch"),
    (["--inject-fault", "rank-hang"], "needs torchrun with 2 or more processes"),
    (["--worker-nice", "5"], "--workers 0 has none: add --workers N"),
    (["--workers", "2", "--worker-nice", "20"], "nice values go up to 19"),
])
def test_contradictions_exit_2_naming_the_fix(args, message, capsys):
    if "cuda" in " ".join(args) and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(SystemExit) as e:
        train.parse_config(args)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_run_all_s_ceilings_leave_out_the_pipeline_flags_it_passes_every_variant(tmp_path, capsys):
    """./run_all.sh --variants jpeg,ceiling-jpeg -- --data-dir DIR: the ceiling runs, without the folder,
    and says so; by hand, --data-on-gpu still refuses it."""
    photos_dir = tmp_path / "photos"
    photos_dir.mkdir()
    cfg = train.parse_config(["--variant", "jpeg", "--data-on-gpu", "--drop-pipeline-flags", "--data-dir",
                              str(photos_dir), "--workers", "4", *TINY])
    assert cfg.data_dir is None and cfg.workers == 0 and train.prepare(cfg).record()["photos"] is None
    assert "--workers --data-dir left out: the ceiling (--data-on-gpu) has no input pipeline" in capsys.readouterr().err
    code, error = refusal(capsys, "train.py", "--variant", "jpeg", "--data-on-gpu", "--data-dir", str(photos_dir))
    assert code == 2 and "--data-dir shapes the input pipeline" in error


def test_warnings_name_only_what_the_user_asked_for(tmp_path, capsys):
    r = run_inprocess("--variant", "async", "--workers", "0", tmp_path=tmp_path)
    assert "--pin-memory" not in capsys.readouterr().err  # the preset's, not the user's
    assert r["requested"]["pin_memory"] and not r["settings"]["pin_memory"]  # asked, and what ran
    run_inprocess("--variant", "workers", "--workers", "0", "--pin-memory", tmp_path=tmp_path)
    assert "--pin-memory without an accelerator: ignored" in capsys.readouterr().err


def test_output_paths_are_checked_before_the_run(tmp_path, capsys):
    for args, line in [
        (["--json", str(tmp_path / "no" / "r.json")], f"--json '{tmp_path}/no/r.json': no folder {tmp_path}/no"),
        (["--json", ""], "--json '': an empty path"),
        (["--json", str(tmp_path)], "a folder"),
        (["--profile", "torch", "--profile-dir", str(tmp_path / "f" / "x")], "/f is not a writable folder"),
    ]:
        (tmp_path / "f").write_text("a file")
        code, error = refusal(capsys, "train.py", *TINY, *args)
        assert code == 2 and line in error and not (tmp_path / "no").exists()


def test_the_record_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    out.write_text('{"old": true}')

    def full(fd):  # the disk fills as the half-written file goes to it
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writes.os, "fsync", full)
    with pytest.raises(OSError, match=f"No space left on device: '{out}'"):
        records.write_json(str(out), {"new": True})
    assert json.loads(out.read_text()) == {"old": True} and list(tmp_path.iterdir()) == [out]


def test_a_record_follows_a_link_and_is_written_into_a_pipe(tmp_path):
    """A link's target is what changes, and a pipe (a shell's >(cat)) is written directly: neither can be
    replaced by a renamed temporary file."""
    target, link = tmp_path / "kept" / "r.json", tmp_path / "r.json"
    target.parent.mkdir()
    target.write_text("{}")
    link.symlink_to(target)
    records.write_json(str(link), {"new": True})
    assert link.is_symlink() and json.loads(target.read_text()) == {"new": True}
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text()))
    reader.start()
    records.write_json(str(fifo), {"piped": True})
    reader.join(timeout=10)
    assert json.loads(read[0]) == {"piped": True} and sorted(p.name for p in tmp_path.iterdir()) == \
        ["kept", "pipe", "r.json"]


@pytest.mark.parametrize("errno_, why", [(28, "No space left on device"), (30, "Read-only file system")])
def test_a_record_that_cannot_be_written_is_not_lost(tmp_path, monkeypatch, capsys, errno_, why):
    """A full or read-only disk at the end of a finished run: one line names the path and the cause, the
    record goes to stderr instead, and the exit status is 1."""
    def refused(*args):
        raise OSError(errno_, why)
    cfg = train.parse_config(["--variant", "workers", "--workers", "0", *TINY, "--json", str(tmp_path / "r.json")])
    monkeypatch.setattr(writes.os, "fsync", refused)
    assert train.main(cfg) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-2] == f"error: could not write the record to {tmp_path / 'r.json'} ({why}); here it is:"
    assert json.loads(err[-1])["steps"] == 3 and "Traceback" not in "\n".join(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, code, line", [
    (["--variant", "baseline", "--img-size", "60000", "--steps", "1", "--warmup", "0"], 3,
     "error: this process ran out of host memory (43.2 GB asked): each batch is --batch-size 4 at --img-size 60000"),
    (["--variant", "workers", "--workers", "1", "--img-size", "60000", "--steps", "1", "--warmup", "0"], 3,
     "error: a DataLoader worker ran out of host memory (43.2 GB asked)"),
    (["--batch-size", "1"], 2, "--batch-size 1: BatchNorm in training needs 2 or more images per batch"),
])
def test_known_failures_end_in_one_line_not_a_traceback(args, code, line):
    p = run_script("train.py", *TINY, *args, timeout=180)
    assert p.returncode == code, p.stderr[-2000:]
    assert line in p.stderr.strip().splitlines()[-1 - (code == 2)], p.stderr[-2000:]  # a refusal's hint follows
    if "DataLoader worker" not in line:
        assert "Traceback" not in p.stderr


def test_only_a_workers_failure_gets_the_workers_advice():
    cfg = train.parse_config(["--variant", "workers", *TINY])
    nccl = RuntimeError("NCCL error in: ProcessGroupNCCL.cpp, unhandled system error, NCCL_SHM_DISABLE=0 shm open failed")
    assert runtime.failure_advice(nccl, cfg) is None  # not a loader problem: its traceback stays
    shm = RuntimeError("DataLoader worker (pid 7) is killed by signal: Bus error. It is possible that dataloader's "
                       "workers are out of shared memory")
    assert "shared memory (/dev/shm) ran out" in runtime.failure_advice(shm, cfg)
    for died in ("DataLoader worker (pid 7) is killed by signal: Killed.",
                 "DataLoader worker (pid(s) 7, 8) exited unexpectedly"):  # the two ways torch reports a SIGKILL
        assert runtime.failure_advice(RuntimeError(died), cfg).startswith("a DataLoader worker died")
    raised = RuntimeError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ...")
    assert runtime.failure_advice(raised, cfg).startswith("a DataLoader worker failed: Caught ValueError")


@pytest.mark.e2e
def test_ctrl_c_is_one_line_and_exit_130():
    import signal
    import subprocess
    import time
    from conftest import ROOT
    proc = subprocess.Popen([sys.executable, "train.py", *TINY, "--variant", "workers", "--workers", "1",
                             "--steps", "100000"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # once the loop runs: a Ctrl-C during `import torch` can be swallowed by a library's bare except
    lines = []
    while "(measured)" not in (line := proc.stderr.readline()) and line:
        lines.append(line)
    time.sleep(1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    err = "".join(lines) + line + err
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == "interrupted: no record written" and "Traceback" not in err


def test_list_variants_shows_every_preset():
    table = train.list_variants()
    for name in train.PRESETS:
        assert f"\n{name} " in table


def test_a_dead_worker_is_named_with_the_flag_to_change():
    import subprocess
    marker = "--seed=424242"  # forked workers share the command line: this finds any left behind
    p = run_script("train.py", "--variant", "workers", "--workers", "2", *TINY, marker, "--inject-fault",
                   "worker-crash", timeout=120)
    assert p.returncode == 3, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: a DataLoader worker died") and "--workers" in last
    assert "Traceback" not in p.stderr
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == [], "workers outlived the process"


def test_verify_catches_a_batch_that_is_not_what_the_host_loaded(monkeypatch, tmp_path, capsys):
    real = train.to_device

    def corrupting(*args, **kwargs):
        batch = real(*args, **kwargs)
        batch.images = batch.images.clone()
        batch.images.view(-1)[0] += 1  # one value of the first sample, as a half-done copy would leave it
        return batch
    monkeypatch.setattr(train, "to_device", corrupting)
    cfg = train.parse_config(["--variant", "streams", "--workers", "2", *TINY, "--verify"])
    assert train.main(cfg) == 1
    assert "verify: step 0: 1 of 4 samples" in capsys.readouterr().err


def test_torch_profiler_writes_a_trace_with_the_nvtx_names(tmp_path):
    trace_dir = tmp_path / "trace"
    run_inprocess("--variant", "streams", "--workers", "2", "--profile", "torch", "--profile-dir", str(trace_dir),
                  tmp_path=tmp_path)
    traces = list(trace_dir.glob("*.pt.trace.json"))
    assert len(traces) == 1
    events = json.loads(traces[0].read_text())["traceEvents"]
    assert {"get batch", "copy batch", "Compute", "Batch 1"} <= {e.get("name") for e in events}
    assert not any(e.get("cat") == "python_function" for e in events)  # (Python's frames: --profile-stack)


def test_profile_stack_adds_pythons_frames_to_the_trace(tmp_path):
    trace_dir = tmp_path / "trace"
    run_inprocess("--variant", "baseline", "--profile", "torch", "--profile-stack", "--profile-dir", str(trace_dir),
                  tmp_path=tmp_path)
    events = json.loads(next(trace_dir.glob("*.pt.trace.json")).read_text())["traceEvents"]
    assert any(e.get("cat") == "python_function" for e in events)


def test_profile_steps_records_only_the_last_measured_steps(tmp_path):
    trace_dir = tmp_path / "trace"
    r = run_inprocess("--variant", "prefetch", "--workers", "1", "--profile", "torch", "--profile-dir",
                      str(trace_dir), "--profile-steps", "2", tmp_path=tmp_path)
    assert r["steps"] == 3 and r["profiled_steps"] == 2 and r["profiled_steps_per_s"] > 0
    names = {e.get("name") for e in json.loads(next(trace_dir.glob("*.pt.trace.json")).read_text())["traceEvents"]}
    assert {"Batch 2", "Batch 3"} <= names and "Batch 1" not in names  # warm-up 1, then steps 1..3


def test_a_window_carried_by_queued_batches_is_flagged(capsys):
    steady = dict(steps=100, steps_per_s=16.0, steps_per_s_second_half=15.2)
    assert not measure.fell_behind(steady)
    assert measure.fell_behind(dict(steady, steps_per_s_second_half=11.0))
    assert not measure.fell_behind(dict(steady, steps=10, steps_per_s_second_half=11.0))  # too few steps to tell


def test_a_window_that_did_not_settle_is_told_the_flag_that_lengthens_it():
    """Where --window-s closed the window, more --steps alone changes nothing: --steps N alone asks for a
    window of N steps, about a minute's worth, or twice a window that was a minute already (never the window
    the run had)."""
    by_time = dict(steps=58, window_s=9.54, settings=dict(steps=100, window_s=10.0))
    assert thresholds.longer_window(by_time) == ("run --steps 400 for a window of about a minute (this one "
                                                 "closed after 10 s, at 58 steps)")
    assert thresholds.longer_window(dict(by_time, steps=100)) == "run more --steps"  # --steps closed it
    a_minute = dict(steps=360, window_s=60.1, settings=dict(steps=1000, window_s=60.0))
    assert thresholds.longer_window(a_minute) == ("run --steps 800 for a window of about 120 s (this one closed "
                                                  "after 60 s, at 360 steps)")
    assert thresholds.longer_window(dict(steps=30, window_s=1.9, settings=dict(steps=30))) == "run more --steps"


def test_uint8_normalized_on_the_device_equals_host_float32():
    images = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8)
    mean = torch.tensor(data.MEAN).view(1, 3, 1, 1)
    std = torch.tensor(data.STD).view(1, 3, 1, 1)
    on_host = (images.numpy().astype("float32") / 255.0 - mean.numpy()) / std.numpy()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    on_device = data.Normalize(torch.device(device))(images.to(device)).cpu()
    torch.testing.assert_close(on_device, torch.from_numpy(on_host), rtol=1e-6, atol=1e-6)


def test_bf16_autocast_loss_stays_finite_and_close_to_fp32():
    def losses(amp: str) -> list[float]:
        cfg = train.parse_config(["--variant", "prefetch", "--amp", amp, "--device", "cpu"])
        torch.manual_seed(0)
        model = train.torchvision.models.resnet18(num_classes=10)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)  # small steps: the two paths stay comparable
        step = train.make_step(cfg, model, opt, torch.device("cpu"))
        g = torch.Generator().manual_seed(1)
        batch = train.Batch(torch.randn(8, 3, 32, 32, generator=g), torch.arange(8) % 10)
        return [step(batch).item() for _ in range(5)]
    fp32, bf16 = losses("none"), losses("bf16")
    assert all(math.isfinite(x) for x in bf16)
    assert bf16 == pytest.approx(fp32, rel=0.05)
    assert bf16[-1] < bf16[0]  # and it trains


def test_nvtx_fallback_when_the_profiler_disables_the_domain(monkeypatch, capsys):
    nvtx = pytest.importorskip("nvtx")
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/nonexistent/libinjection.so")

    class DummyDomain:  # what nvtx>=0.2.12 hands out when the tool says the domain is disabled
        pass
    monkeypatch.setattr(nvtx, "get_domain", lambda name=None: DummyDomain())
    assert profiling.nvtx_backend(True) == "torch"
    assert "nvtxDomainIsEnabled" in capsys.readouterr().err
    monkeypatch.delenv("NVTX_INJECTION64_PATH")
    assert profiling.nvtx_backend(True) == "nvtx"  # no tool attached: nothing to lose, keep the colours
    assert profiling.nvtx_backend(False) == "off"


@pytest.mark.e2e
def test_nvtx_ranges_survive_real_nsys(nsys, tmp_path):
    """The trap, end to end: the study's ranges must be in the report that this nsys writes."""
    import sqlite3
    rep = tmp_path / "streams"
    p = run_profiled(nsys, "profile", "--force-overwrite=true", "--trace=nvtx,osrt", "-o", str(rep),
                     sys.executable, "train.py", "--variant", "streams", "--workers", "2", *TINY, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_script(nsys, "export", "--type", "sqlite", "-o", str(tmp_path / "streams.sqlite"), f"{rep}.nsys-rep")
    assert p.returncode == 0, p.stdout + p.stderr
    con = sqlite3.connect(tmp_path / "streams.sqlite")
    names = {row[0] for row in con.execute(
        "SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id")}
    assert {"get batch", "copy batch", "Compute", "Batch 0", "Batch 3"} <= names


def test_the_queue_is_drained_before_the_clock_and_the_wait_is_reported(monkeypatch, tmp_path):
    drained = []
    real = train.Loader.drain

    def counting(self):
        drained.append(self.queued)
        real(self)
    monkeypatch.setattr(train.Loader, "drain", counting)
    r = run_inprocess("--variant", "prefetch", "--workers", "2", "--prefetch-factor", "3", tmp_path=tmp_path)
    assert drained == [6] and r["drained"] == 6
    assert 0 <= r["data_wait_ms_median"] <= r["data_wait_ms_p90"]
    assert r["data_wait_ms_mean"] >= 0 and 0 <= r["data_wait_share"] < 1


@pytest.mark.parametrize("args", [
    ["--variant", "pool"],
    ["--variant", "pool", "--uint8", "--prefetch-depth", "2"],
    ["--pool", "--streams"],
    ["--variant", "pool", "--no-prefetcher", "--batched-fetch"],
    ["--variant", "fast-pool", "--prefetch-depth", "2"],
])
def test_the_pool_hands_every_batch_over_intact(args, tmp_path):
    """On the CPU the slots are plain shared memory; every batch must be the one its worker wrote, so
    a slot refilled too early shows as a mismatch."""
    out = tmp_path / "run.json"
    assert train.main(train.parse_config([*args, *TINY, "--workers", "3", "--verify", "--steps", "24", "--json",
                                          str(out)])) == 0
    r = json.loads(out.read_text())
    assert r["settings"]["pool"] and not r["settings"]["pin_memory"]
    assert r["verified_batches"] == 25 + r["slid_steps"] and r["verify_mismatches"] == []


def test_worker_nice_lowers_the_workers_priority_not_the_loops(monkeypatch):
    cfg, loop = train.parse_config([*TINY, "--workers", "2", "--worker-nice", "3"]), os.nice(0)
    monkeypatch.setattr(train.FakeDataset, "fill", lambda self, images, indices, batched: images.fill_(os.nice(0)))
    images, _ = next(iter(train.make_loader(cfg, train.prepare(cfg))))  # each image filled with its worker's nice value
    assert images.unique().tolist() == [loop + 3] and os.nice(0) == loop


def test_the_pool_that_does_not_fit_stops_before_training(monkeypatch, capsys):
    monkeypatch.setattr(pool, "free_bytes", lambda path: 10**4)
    cfg = train.parse_config(["--variant", "pool", "--workers", "2", *TINY])
    assert train.main(cfg) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[1].startswith("error: the pinned pool needs 0.3 MB and /dev/shm has 0.0 MB free")
    assert "--workers or --prefetch-factor shrink it (7 slots = 2 workers x 2 queued + 3 in flight)" in err[1]


def test_the_pool_leaves_nothing_in_dev_shm(tmp_path):
    from pathlib import Path
    before = set(Path("/dev/shm").iterdir())
    run_inprocess("--variant", "pool", "--workers", "2", tmp_path=tmp_path)
    p = run_script("train.py", "--variant", "pool", "--workers", "2", *TINY, "--inject-fault", "worker-crash",
                   timeout=120)
    assert p.returncode == 3 and "DataLoader worker" in p.stderr
    assert set(Path("/dev/shm").iterdir()) <= before


def test_loader_alone_measures_the_pipeline_and_the_workers(tmp_path, monkeypatch, capsys):
    from starvation import measure
    monkeypatch.setattr(measure, "PROGRESS_S", 0)  # (a slow folder's loader: a line every 10 s)
    r = run_inprocess("--variant", "pool", "--workers", "2", "--loader-only", tmp_path=tmp_path)
    assert r["loader_only"] and r["loader_batches_per_s"] > 0 and r["workers_batches_per_s"] > 0
    assert r["loader_batches_per_s_second_half"] > 0 and "steps_per_s" not in r
    said = capsys.readouterr().err
    assert "  the loader: batch 1 (" in said and "  the workers alone: batch 1 (" in said and "(measured)" in said
    r = run_inprocess("--variant", "workers", "--workers", "2", "--loader-only", tmp_path=tmp_path)
    assert r["loader_batches_per_s"] > 0 and r["workers_batches_per_s"] is None  # nothing pins: one stage


def test_then_alone_measures_the_loader_after_the_window_in_one_process(tmp_path, monkeypatch):
    """--then-alone: the window's record, then the loader alone on the very feeder that fed it, half as
    many batches as the window held (whole rounds of the workers), then the workers alone; two records."""
    made, fed = [], []
    real_feeder, real_sustained = train.make_feeder, train.sustained
    monkeypatch.setattr(train, "make_feeder", lambda *a: made.append(real_feeder(*a)) or made[-1])
    monkeypatch.setattr(train, "sustained", lambda cfg, source, take, device: fed.append((cfg.steps, source))
                        or real_sustained(cfg, source, take, device))
    cfg = train.parse_config(["--variant", "pool", "--workers", "2", "--then-alone", "--verify", *TINY,
                              "--json", str(tmp_path / "r.{}.json")])
    assert train.main(cfg) == 0
    run, loader = (json.loads((tmp_path / f"r.{n}.json").read_text()) for n in ("run1", "loader"))
    assert not run["loader_only"] and run["verified_batches"] >= run["steps"] and run["verify_mismatches"] == []
    half = (run["steps"] + 1) // 2
    assert loader["loader_only"] and loader["after_window"] and loader["steps"] == half
    assert loader["loader_batches_per_s"] > 0 and loader["workers_batches_per_s"] > 0  # the pool pins: two stages
    assert len(made) == 1 and fed[0] == (half, made[0].source)  # no second pipeline for the loader
    # where the process's time went, start-up (imports included) first
    assert set(run["process_s"]) == {"setup", "warmup", "measured", "after"}
    assert all(t > 0 for t in run["process_s"].values()) and run["process_s"]["setup"] > run["process_s"]["measured"]
    assert measure.alone_batches(cfg.workers, 5) == 8 and measure.alone_batches(0, 5) == 6


@pytest.mark.parametrize("extra, message", [
    (["--json", "r.json"], "put {} in the path"),
    (["--loader-only"], "--then-alone measures the loader after a training window"),
    (["--data-on-gpu"], "--then-alone measures the loader after a training window"),
])
def test_then_alone_refuses_what_it_cannot_measure(extra, message, capsys):
    with pytest.raises(SystemExit) as e:
        train.parse_config(["--variant", "async", "--then-alone", *extra])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_halves_of_the_window():
    marks = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 9.0, 11.0, 13.0]  # 4 fast steps, then 4 slow: a window of 8
    assert measure.halves(marks, 8) == (pytest.approx(4 / 4), pytest.approx(4 / 8))
    assert not measure.unsettled(marks[:6], 4, torch.device("cpu"))
    assert measure.unsettled(marks, 8, torch.device("cpu"))


def test_a_window_record_from_its_marks():
    """Both studies' windows make their figures alike (measure.window_record): from the marks, the waits,
    how far the window slid and whether its halves agreed, which the caller judged or left open."""
    marks = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 9.0, 11.0, 13.0]
    cfg = train.parse_config(["--batch-size", "2"])
    r = measure.window_record(cfg, marks[1:], [0.5] * 8, slid=4, settled=measure.halves_agree(marks[1:], 8))
    assert r["steps"] == 8 and r["steps_per_s"] == pytest.approx(8 / 12) and r["slid_steps"] == 4
    assert r["steps_per_s_halves"] == [pytest.approx(4 / 4), pytest.approx(4 / 8)] and r["settled"] is False
    assert r["data_wait_share"] == pytest.approx(4 / 12) and r["step_ms_max"] == pytest.approx(2000)
    assert measure.halves_agree(marks[:5], 4)
    one = measure.window_record(cfg, [0.0, 1.0], [0.0], slid=0, settled=None)
    assert one["steps_per_s_halves"] == [] and one["settled"] is None  # a window of one step has no halves


def test_the_loop_wraps_both_studies(monkeypatch, capsys):
    """measure.Loop: nsys's capture range opens where the script says and closes after the last batch,
    the device synchronized first; a progress line every 10 s, warm-up or measured."""
    calls = []
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: calls.append("start"))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: calls.append("stop"))
    monkeypatch.setattr(measure, "device_sync", lambda device: calls.append("sync"))
    cfg = replace(train.parse_config(["--warmup", "2"]), profile="nsys")
    with measure.Loop(cfg, torch.device("cpu"), total=6, capture_from=4, unit="batch") as loop:
        assert loop.prof is None and loop.capture_from == 4  # torch.profiler only for --profile torch
        loop.capture()
        loop.stepped(0, 6)
        loop.last_print -= 11
        loop.stepped(1, 6)
        loop.last_print -= 11
        loop.stepped(2)
        loop.end()
    assert calls == ["start", "sync", "stop"]
    err = capsys.readouterr().err
    assert "  batch 2/6 (warm-up)" in err and "  batch 3 (measured)" in err and "batch 1/" not in err


@pytest.mark.parametrize("differ", [False, True])
def test_the_window_slides_while_its_halves_disagree(differ, monkeypatch, tmp_path, capsys):
    """Halves that disagree make the first half warm-up, half a window at a time, up to --settle steps;
    the figures are the last --steps steps'."""
    monkeypatch.setattr(measure, "unsettled", lambda marks, steps, device: differ)
    r = run_after_tiny("--variant", "prefetch", "--workers", "2", "--verify", "--steps", "10", "--settle", "12",
                       tmp_path=tmp_path)
    assert r["slid_steps"] == (12 if differ else 0) and r["settled"] is (not differ)
    assert r["steps"] == 10 and r["verified_batches"] == r["warmup"] + 10 + r["slid_steps"]
    assert len(r["steps_per_s_halves"]) == 2 and r["steps_per_s"] == pytest.approx(10 / r["window_s"])
    line = capsys.readouterr().out
    assert ("window slid 12 steps and its halves still differ" in line and "not a steady state" in line) is differ
    assert ("not a steady state; run more --steps" in line) is differ  # --steps 10 closed it


def test_the_last_window_is_judged_once_the_slides_are_spent(monkeypatch, tmp_path):
    """Halves that agree only in the window the figures come from: the record says settled (on the H200 a
    600-step window whose halves differed by 1.7% was reported as not a steady state)."""
    answers = iter([True, True, False])
    monkeypatch.setattr(measure, "unsettled", lambda marks, steps, device: next(answers))
    r = run_after_tiny("--variant", "prefetch", "--workers", "2", "--steps", "10", "--settle", "10",
                       tmp_path=tmp_path)
    assert r["slid_steps"] == 10 and r["settled"] is True and next(answers, None) is None


@pytest.mark.parametrize("args", [["--settle", "0"], ["--profile", "torch"], ["--steps", "9"]])
def test_the_window_stays_put(args, monkeypatch, tmp_path):
    """No sliding when asked, under a profiler (its capture is planned on a fixed window), or for a window
    too short to halve."""
    monkeypatch.setattr(measure, "unsettled", lambda marks, steps, device: True)
    r = run_after_tiny("--variant", "workers", "--workers", "0", "--steps", "10", *args,
                       "--profile-dir", str(tmp_path), tmp_path=tmp_path)
    assert r["slid_steps"] == 0 and r["settled"] is None


@pytest.mark.parametrize("settle", [None, "100000"])
@pytest.mark.parametrize("differ", [False, True])
def test_the_window_closes_by_time_and_slides_in_proportion(differ, settle, monkeypatch, tmp_path):
    """A window bounded by time closes once it has run --window-s seconds and holds --min-steps, long
    before --steps; it is that long from then on, and its slides shrink with it: by default one, half of
    what it holds; never further than it holds."""
    monkeypatch.setattr(measure, "unsettled", lambda marks, steps, device: differ)
    r = run_after_tiny("--variant", "workers", "--workers", "0", "--steps", "100000", "--window-s", "0.3",
                       "--min-steps", "4", *(["--settle", settle] if settle else []), tmp_path=tmp_path)
    assert 4 <= r["steps"] < 100000 and r["window_s"] >= 0.3 * 0.5
    slid = r["steps"] if settle else r["steps"] // 2
    assert r["slid_steps"] == (slid if differ else 0) and r["settled"] is (not differ)


def test_steps_alone_asks_for_that_many():
    """--steps N alone is a window of N steps (a 600-step check must not be cut at 10 s); with --window-s
    or --min-steps too, the time bound holds; the profilers keep the window fixed."""
    assert train.parse_config(["--steps", "600"]).min_steps == 600
    assert train.parse_config(["--steps", "600", "--window-s", "5"]).min_steps == 20
    assert train.parse_config(["--steps", "600", "--min-steps", "50"]).min_steps == 50
    cfg = train.parse_config([])  # without a GPU, 5 steps: the fewest is at most that
    assert cfg.window_s == 10 and cfg.min_steps == min(20, cfg.steps)
    assert not measure.timed(train.parse_config(["--profile", "torch"])) and measure.timed(train.parse_config([]))
