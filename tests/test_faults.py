"""Faults, round 2: no worker outlives its run, however the run ends; a run folder in use is not taken
by a second run_all.sh; whole variant names only."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, refusal, run_script

CPU = ["--device", "cpu", "--img-size", "64", "--batch-size", "2", "--steps", "100000"]


def children(pid: int) -> list[int]:
    """The live processes whose parent is pid, from the process table."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(stat.parent.name))
    return kids


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


@pytest.mark.parametrize("worker", [False, True])
def test_a_handshake_the_stopped_parent_broke_off_prints_nothing_in_a_worker(worker):
    """A parent stopped while taking a batch's shared memory hangs up on the worker's resource sharer, whose
    thread then prints a traceback (half of one, as the worker dies with its parent). Here a process hangs
    up on its own sharer, as such a parent does: a worker (die_with_parent) stays quiet, any other process
    shows the error."""
    code = """import os, sys
from multiprocessing import connection, process, resource_sharer
from starvation.runtime import die_with_parent
if sys.argv[1] == "True":
    die_with_parent()
shared = resource_sharer.DupFd(os.open(os.devnull, os.O_RDONLY))
connection.Client(shared._id[0], authkey=process.current_process().authkey).close()
resource_sharer.stop(timeout=30)  # the sharer's thread takes the hang-up (EOFError), then this stop
"""
    p = subprocess.run([sys.executable, "-c", code, str(worker)], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert ("EOFError" in p.stderr) is not worker, p.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("script, args, sig, group, status", [
    ("train.py", ["--variant", "workers", "--workers", "2"], signal.SIGTERM, False, 143),
    # to the whole group, as timeout, systemd and Slurm send it: the workers die of it too, which is no crash
    ("train.py", ["--variant", "workers", "--workers", "2"], signal.SIGTERM, True, 143),
    ("infer.py", ["--variant", "workers", "--workers", "2", "--window-s", "1000"], signal.SIGTERM, False, 143),
    ("infer.py", ["--variant", "pool", "--workers", "2", "--window-s", "1000"], signal.SIGKILL, False, -9),
    ("infer.py", ["--variant", "workers", "--workers", "2", "--window-s", "1000"], signal.SIGINT, True, 130),
])
def test_no_worker_outlives_its_run(script, args, sig, group, status):
    """SIGTERM is handled as Ctrl-C is (one line, exit 143); after a SIGKILL, which runs no clean-up, the
    kernel ends the workers (PR_SET_PDEATHSIG); a Ctrl-C to the process group prints no worker's traceback."""
    p = subprocess.Popen([sys.executable, script, *args, *CPU], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(kids := children(p.pid)) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.5)
    time.sleep(3)  # the workers at work
    kids = children(p.pid)
    assert len(kids) >= 2, p.communicate()[1]
    if group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    time.sleep(5)
    assert [k for k in kids if alive(k)] == []
    assert p.returncode == status, err
    assert "Traceback" not in err, err
    if sig != signal.SIGKILL:
        assert err.strip().splitlines()[-1].endswith(": no record written")


@pytest.mark.e2e
def test_a_folder_in_use_is_refused(tmp_path):
    """Two run_all.sh on one folder would run the same variant together and overwrite each other's records."""
    out = tmp_path / "run"
    first = subprocess.Popen(["./run_all.sh", "--no-nsys", "--variants", "workers", "--steps", "300",
                              "--out", str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 120
    while not (out / "env.json").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        p = run_script("./run_all.sh", "--resume", str(out))
        assert p.returncode == 2 and "in use by another run_all.sh" in p.stderr, p.stdout + p.stderr
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130
    assert (out / "INCOMPLETE").exists()


@pytest.mark.e2e
def test_a_run_that_will_not_stop_is_killed(tmp_path):
    """Ctrl-C to run_all.sh: the run under way gets SIGTERM, and one whose shutdown hangs is killed once its
    grace has passed, so that run_all.sh still ends (130) and marks the folder. Here PYTHON runs train.py's
    variant as a process that ignores both signals."""
    python = tmp_path / "python"
    python.write_text(f"""#!/usr/bin/env bash
if [[ " $* " == *" --json "* ]]; then  # the variant's run, not run_all.sh's --facts
  exec {sys.executable} -c 'import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN); signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(600)'
fi
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    out = tmp_path / "run"
    first = subprocess.Popen(["./run_all.sh", "--no-nsys", "--variants", "workers", "--out", str(out)], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                             env=dict(os.environ, PYTHON=str(python), STOP_GRACE_S="3"))
    deadline = time.monotonic() + 120
    while not list(out.glob("logs/workers*.log")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1)
    os.killpg(first.pid, signal.SIGINT)
    said, _ = first.communicate(timeout=90)
    assert first.returncode == 130, said
    assert "the run under way had not ended 3 s after SIGTERM: killed" in said, said
    assert (out / "INCOMPLETE").read_text().startswith("interrupted")


def test_a_grace_that_is_not_seconds_is_one_line():
    p = run_script("./run_all.sh", "--no-nsys", env=dict(STOP_GRACE_S="30s"))
    assert p.returncode == 2 and p.stderr.strip() == "run_all: STOP_GRACE_S is seconds, a whole number: got '30s'"


@pytest.mark.parametrize("variants, message", [
    ("install", "unknown variant(s): install "),
    ("baseline,baseline", "'baseline' is named twice"),
    ("study,pool", "'pool' is named twice"),
])
def test_variants_are_whole_names_each_once(variants, message, capsys):
    """run_all.sh's --variants, as train.py --facts expands and checks it (run_all.sh says its error line:
    test_run_all.py)."""
    import train
    from starvation import cli
    assert cli.facts("train.py", train.PRESETS, train.GROUPS, variants) == 2
    assert message in capsys.readouterr().out


# ---- the launcher's environment and the machine's limits, checked where the flags are

@pytest.mark.parametrize("script, env, message", [
    ("train.py", dict(RANK="0", WORLD_SIZE="2"), "are set, but not MASTER_ADDR, so the ranks cannot meet"),
    ("train.py", dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="x"), "LOCAL_RANK='x': torchrun's variables must be"),
    ("infer.py", dict(RANK="0", WORLD_SIZE="2", MASTER_ADDR="localhost"), "infer.py runs as one process"),
])
def test_a_distributed_environment_without_its_launcher_is_one_line(script, env, message):
    p = run_script(script, "--device", "cpu", env=env, timeout=60)
    assert p.returncode == 2 and message in p.stderr.splitlines()[-2], p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 2


@pytest.mark.parametrize("script", ["train.py", "infer.py"])
def test_workers_are_bounded_by_the_cpus(script, capsys):
    code, line = refusal(capsys, script, "--variant", "workers", "--workers", "100000")
    assert code == 2 and "more than 4 per CPU" in line


@pytest.mark.parametrize("module, args", [
    ("train", ["--variant", "workers", "--workers", "2", "--img-size", "32", "--batch-size", "4", "--steps", "3"]),
    ("infer", ["--variant", "workers", "--workers", "2", "--img-size", "32", "--batch-size", "2", "--classes", "4",
               "--steps", "3"]),
])
def test_a_failed_fork_is_one_line(module, args, monkeypatch, capsys):
    import errno
    import importlib
    script = importlib.import_module(module)

    def no_fork():
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    cfg = script.parse_config(["--device", "cpu", *args])
    monkeypatch.setattr(os, "fork", no_fork)
    assert script.main(cfg) == 3
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "error: could not start a worker process (Resource temporarily unavailable)")


def test_a_script_started_without_its_packages_says_how_to_get_them():
    for script in ("train.py", "infer.py"):  # -S: no site-packages, so no torch
        p = subprocess.run([sys.executable, "-S", script, "--help"], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert p.stderr.startswith(f"{script}: no module named 'torch' here")
        assert "source .venv/bin/activate" in p.stderr


@pytest.mark.parametrize("script, args, small", [
    ("train.py", ["--streams", "--workers", "2", "--steps", "5"], "(--batch-size 8, --img-size 64)"),
    ("infer.py", ["--variant", "streams", "--workers", "2"], "(--batch-size 2, --img-size 64, --steps 5)"),
])
def test_a_by_hand_run_without_a_gpu_fits_the_machine(script, args, small):
    """The README's by-hand run, as a newcomer types it on a CPU machine: it took 12.5 minutes at full size."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the sizes stay full")
    p = run_script(script, *args, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith(f"no GPU: a small CPU run {small}, as run_all.sh makes it"), p.stderr


@pytest.mark.e2e
def test_ranks_that_never_come_are_one_line():
    """RANK, WORLD_SIZE and MASTER_ADDR set by hand for one process: it waited 66 s, then a DistStoreError. The
    wait is --dist-timeout and its backstop (3 s here)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = run_script("train.py", "--variant", "async", "--workers", "0", "--device", "cpu", "--dist-timeout", "1",
                   env=dict(RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)), timeout=180)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "error: the job's 2 ranks did not all come to 127.0.0.1" in p.stderr.strip().splitlines()[-1]


def test_a_truncated_env_json_is_named_as_such(tmp_path):
    """It was called 'written by an older run_all.sh'."""
    (tmp_path / "INCOMPLETE").write_text("interrupted\n")
    (tmp_path / "env.json").write_text('{"gpu": "cpu", "argv": [')
    p = run_script("./run_all.sh", "--resume", str(tmp_path))
    assert p.returncode == 2 and "env.json is not valid JSON (cut short?)" in p.stderr, p.stderr


@pytest.mark.parametrize("script, args, message", [
    ("train.py", ["--seed", "99999999999999999999999"], "argument --seed: must be 0 to 2**63 - 1"),
    ("infer.py", ["--seed", "-1"], "argument --seed: must be 0 to 2**63 - 1"),
    ("infer.py", ["--variant", "uint8", "--classes", "300"], "a uint8 class map holds at most 256 classes"),
    ("infer.py", ["--uint8-out", "--classes", "257"], "--uint8-out --classes 257"),
    ("train.py", ["--variant", "jpeg", "--workers", "0"],
     "--prefetch-factor and --persistent-workers need worker processes (preset jpeg sets them)"),
    ("train.py", ["--variant", "fast", "--workers", "0"], "(preset fast sets them)"),
    ("train.py", ["--workers", "0", "--prefetch-factor", "2"], "--prefetch-factor needs worker processes: add"),
    ("train.py", ["--variant", "jpeg", "--gpu-decoder", "nvimgcodec"], "--gpu-decoder picks --gpu-decode's decoder"),
])
def test_numbers_and_presets_are_named_in_one_line(script, args, message, capsys):
    """A number out of range is refused by the flag that takes it, and a refusal caused by a preset names it."""
    code, line = refusal(capsys, script, *args, "--device", "cpu")
    assert code == 2 and message in line, line


def test_the_out_of_memory_line_names_every_size_flag():
    from types import SimpleNamespace
    from starvation import runtime
    e = RuntimeError("CUDA out of memory. Tried to allocate 20000000000 bytes")
    cfg = SimpleNamespace(batch_size=16, img_size=512, classes=100000000, workers=0)
    assert "--batch-size 16 at --img-size 512 with --classes 100000000" in runtime.failure_advice(e, cfg)
    assert "--classes" not in runtime.failure_advice(e, SimpleNamespace(batch_size=64, img_size=512, workers=0))
