"""train.py under torchrun on the CPU (gloo), two ranks at tiny sizes: every preset, faults, nsys per rank."""
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

import train
from conftest import ROOT, TINY, run_profiled, run_script
from starvation import runtime

pytestmark = pytest.mark.e2e  # whole scripts, end to end

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def torchrun(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return run_script(*TORCHRUN, "train.py", *args, *TINY, timeout=timeout)


# Each source on two ranks (random images, photos the workers decode, bytes the device decodes), with and
# without the pool, and every setting of every preset in one of them (the test below checks it): jpeg-gpu
# holds the whole of fast-pool and compile, streams the pin-memory thread. Every preset runs on one rank in
# test_train.py. (Each DDP job costs 15 s or more on a 2-core machine, a cold compile 100.)
ON_TWO_RANKS = ["baseline", "streams", "pool", "jpeg-pool", "jpeg-gpu"]


def test_the_presets_on_two_ranks_hold_every_setting():
    held = {setting for name in ON_TWO_RANKS for setting in train.PRESETS[name][0].items()}
    for name, (preset, _) in train.PRESETS.items():
        assert set(preset.items()) <= held, f"{name}'s {set(preset.items()) - held} run on two ranks in no listed preset"


@pytest.mark.parametrize("variant", ON_TWO_RANKS + ["ceiling"])
def test_presets_on_two_ranks_verified(variant, tmp_path):
    out = tmp_path / "run.json"
    args = ["--variant", "prefetch", "--data-on-gpu"] if variant == "ceiling" else \
        ["--variant", variant, "--verify", "--workers", "0" if variant == "baseline" else "1"]
    p = torchrun(*args, "--json", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["world_size"] == 2 and [x["rank"] for x in r["ranks"]] == [0, 1]
    assert r["slowest_rank"] in (0, 1)
    assert r["images_per_s"] == pytest.approx(2 * 4 * r["steps"] / r["window_s"])
    assert r["images_per_s_per_gpu"] == pytest.approx(r["images_per_s"] / 2)
    assert r["steps_per_s"] <= min(x["steps_per_s"] for x in r["ranks"]) + 1e-9  # the job goes at the slowest pace
    if variant != "ceiling":
        # every batch of both ranks, warm-up included, identical on host and device
        assert r["verified_batches"] == 2 * (r["warmup"] + r["steps"]) and r["verify_mismatches"] == []
    assert "on 2 ranks" in p.stdout and "rank 1 (cpu" in p.stdout


def as_rank(monkeypatch, place: runtime.Dist) -> None:
    """This process as a rank of a job: every module reads the one runtime.DIST."""
    for key, value in vars(place).items():
        monkeypatch.setattr(runtime.DIST, key, value)


def test_each_rank_gets_its_own_data(monkeypatch):
    """A DistributedSampler shard and a per-rank seed: rank 1 must not train on rank 0's samples or images."""
    cfg = train.parse_config(["--variant", "workers", "--workers", "0", *TINY])
    first = {}
    for rank in (0, 1):
        as_rank(monkeypatch, runtime.Dist(rank=rank, world_size=2, local_world_size=2, launched=True))
        images, labels = next(iter(train.make_loader(cfg, train.prepare(cfg))))
        first[rank] = (labels.tolist(), images.sum().item())
    assert first[0][0] == [0, 2, 4, 6] and first[1][0] == [1, 3, 5, 7]
    assert first[0][1] != first[1][1]


def test_a_hung_rank_is_named_and_nobody_waits_forever():
    t0 = time.monotonic()
    p = torchrun("--variant", "prefetch", "--workers", "0", "--steps", "6", "--dist-timeout", "5",
                 "--inject-fault", "rank-hang")
    assert p.returncode != 0 and time.monotonic() - t0 < 90
    assert "rank 1 did not check in for its step's compute within --dist-timeout (5 s)" in p.stderr
    # torchrun then stops rank 1, which prints where it hung (faulthandler, on SIGTERM)
    assert re.search(r"in rank_fault\s", p.stderr), p.stderr[-3000:]


def test_a_dead_rank_stops_the_job_and_torchrun_names_it():
    t0 = time.monotonic()
    p = torchrun("--variant", "async", "--workers", "0", "--steps", "6", "--inject-fault", "rank-exit")
    assert p.returncode != 0 and time.monotonic() - t0 < 90
    assert "[rank 1] injected fault: rank-exit" in p.stderr
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)\s+exitcode\s*:\s*5", p.stderr), p.stderr[-2000:]


def test_a_dead_rank_is_named_without_torchrun(tmp_path):
    """Started by hand (as on several nodes, where no one launcher sees every rank): gloo's error says only
    "Connection reset by peer"; the check-in names the rank."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
        procs.append(subprocess.Popen(
            [sys.executable, "train.py", "--variant", "async", "--workers", "0", *TINY, "--steps", "6",
             "--dist-timeout", "5", "--inject-fault", "rank-exit"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    assert procs[0].returncode == 4, outs[0][1][-2000:]
    assert "rank 1 did not check in" in outs[0][1]


def test_more_processes_than_gpus_is_refused(monkeypatch, capsys):
    four = runtime.Dist(rank=0, local_rank=0, world_size=4, local_world_size=4, launched=True)
    as_rank(monkeypatch, four)
    monkeypatch.setenv("MASTER_ADDR", "localhost")  # as torchrun sets it
    monkeypatch.setattr(train.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(train.torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SystemExit) as e:
        train.parse_config([])
    assert e.value.code == 2
    assert "torchrun started 4 processes on this host, but torch sees 2 GPU(s)" in capsys.readouterr().err


def test_run_all_refuses_gpus_without_cuda(tmp_path):
    p = run_script("./run_all.sh", "--gpus", "2", "--out", str(tmp_path / "x"), env={"PYTHON": sys.executable})
    assert p.returncode == 2 and "--gpus 2 needs CUDA GPUs" in p.stderr
    p = run_script("./run_all.sh", "--gpus", "0")
    assert p.returncode == 2 and "--gpus needs a positive integer" in p.stderr


def test_one_nsys_report_per_rank_with_the_ranks_in_the_ranges(nsys, tmp_path):
    """What run_all.sh --gpus does, on the CPU: nsys inside torchrun, its output named by %q{RANK}."""
    p = run_profiled(*TORCHRUN, "--no-python", nsys, "profile", "--force-overwrite=true", "--trace=nvtx,osrt",
                     "-o", str(tmp_path / "streams.rank%q{RANK}"), sys.executable, "train.py", "--variant", "streams",
                     "--workers", "0", *TINY, "--json", str(tmp_path / "streams.nsys.json"), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    for rank in (0, 1):
        assert (tmp_path / f"streams.rank{rank}.nsys-rep").exists()
    (tmp_path / "env.json").write_text(json.dumps(dict(gpu="cpu", gpus=2, variants=["streams"])))
    p = run_script("analyze.py", str(tmp_path))
    assert p.returncode == 0, p.stderr
    diagnosis = json.loads((tmp_path / "diagnosis.json").read_text())
    assert sorted(diagnosis) == ["streams.rank0", "streams.rank1"]
    for rank in (0, 1):
        rows = (tmp_path / f"streams.rank{rank}_steps.csv").read_text().splitlines()
        # a header, then one row per measured step (the record says how many warm-up steps to leave out):
        # the "Batch i (rank k)" ranges were found
        assert len(rows) == 1 + 3
