"""
On a GPU only (skipped elsewhere): each job of tests/jobs gets the verdict it was written to have, from traces
without the study's names, five ways: nsys with the steps found from its CUDA calls, nsys with its own NVTX
ranges (--step-range), torch.profiler's ProfilerStep#N, torch.profiler with its own labels, and torch.profiler
held around the whole job without prof.step(). The DDP job needs two GPUs. Each way prints its verdict lines
(pytest -s shows them).

    tests/run.sh tests/test_jobs_on_a_gpu.py -s    # on a GPU machine: about 3 minutes a job on an H200
"""
import os
import re
import signal
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, WRITTEN_TO

# one at a time, in turn with the other tests that run nsys (tests/run.sh runs the suite in several processes):
# two jobs at once would share the GPU and the cores, and each verdict would be of that
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("nsys"),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="the jobs' verdicts need a GPU")]

WAYS = {  # how the job is traced: nsys or torch.profiler, and whether --step-range names the job's own ranges
    "nsys-calls": ("nsys", False),  # steps from the CUDA calls that repeat once a step
    "nsys-ranges": ("nsys", True),
    "torch-steps": ("torch", False),  # torch.profiler's ProfilerStep#N
    "torch-labels": ("torch", True),
    "torch-plain": ("torch-plain", False),  # every step, no schedule, no prof.step(): steps from the CUDA calls
}
SKIP, WINDOW = 15, 5  # --run: seconds left out (imports, cuDNN's autotuning, the first batches), then traced


def run(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run, but a command that runs past its time is killed with all it started (nsys and the job
    under it), so that nothing is left running on the GPU."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         **kwargs)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def verdicts(job: list[str], way: str, tmp_path, env: dict, request) -> list[tuple[str, str]]:
    """Trace the job one way and analyze it: (verdict, the change it names) for each process with steps."""
    tool, own = WAYS[way]
    mine = (["--nvtx"], ["--step-range", "^train_step"]) if own else ([], [])
    if tool == "nsys":
        request.getfixturevalue("nsys")  # (skips where there is none)
        out = tmp_path / "nsys"
        p = run([sys.executable, str(ROOT / "analyze.py"), "--run", "--skip", str(SKIP), "--window", str(WINDOW),
                 *mine[1], "--out", str(out), "--", *job, "--steps", "100000", *mine[0]], SKIP + WINDOW + 180, env=env)
        text = (out / "results.md").read_text() if (out / "results.md").exists() else ""
    else:
        traces = tmp_path / "traces"
        flag = "--torch-profile" if tool == "torch" else "--torch-trace"
        p = run([*job, "--steps", "30", flag, str(traces), *mine[0]], 300, env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        p = run([sys.executable, str(ROOT / "analyze.py"), *mine[1], str(traces)], 120)
        text = p.stdout
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    lines = re.findall(r"^\S+: (.+?) -- .*?Next: (.*)$", text, flags=re.M)
    print(f"\n{' '.join(job[1:])} ({way}):\n" + "\n".join(f"  {v} -- {c}" for v, c in lines))
    return lines


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """decode_jpeg's photos, made once (a step's run) for every way it is traced, outside any window."""
    env = {**os.environ, "JOB_PHOTOS": str(tmp_path_factory.mktemp("job-photos"))}
    run([sys.executable, str(ROOT / "tests" / "jobs" / "decode_jpeg.py"), "--steps", "1"], 300, env=env)
    return env


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("job", WRITTEN_TO)
def test_each_job_gets_the_verdict_it_was_written_to_have(job, way, tmp_path, env, request):
    verdict, change = WRITTEN_TO[job]
    lines = verdicts([sys.executable, str(ROOT / "tests" / "jobs" / f"{job}.py")], way, tmp_path, env, request)
    assert len(lines) == 1 and lines[0][0] == verdict and change in lines[0][1], lines


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a DDP job of two ranks needs two GPUs")
@pytest.mark.parametrize("way", WAYS)
def test_the_ddp_jobs_starved_rank_is_loading_bound_and_the_other_waits_for_it(way, tmp_path, env, request):
    job = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           str(ROOT / "tests" / "jobs" / "ddp_starved_rank.py")]
    lines = verdicts(job, way, tmp_path, env, request)
    assert sorted(v for v, _ in lines) == ["loading-bound", "waiting for another rank"], lines
