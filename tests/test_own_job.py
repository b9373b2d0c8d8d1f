"""analyze.py on a training job we did not write: its steps found without the study's names (torch.profiler's
ProfilerStep#N, or --step-range), the DataLoader's wait standing for "get batch", and the change named in
the job's own code. Traces made here, as torch.profiler writes them (the GPU's rows as its CUDA traces hold
them), and one recorded on the CPU from a plain PyTorch loop."""
import json
import subprocess
import sys

import pytest

import analyze
from conftest import ROOT

STEPS = 10


def job_trace(path, step_name="ProfilerStep#{k}", wait_ms=0, kernel=(0, 99), copy=None, sync=None):
    """A chrome trace of STEPS steps of 100 ms: the main thread's step range, the DataLoader's __next__ for
    wait_ms, kernels over `kernel` ms of each step, an H2D copy ((start, end, pageable)), a sync call."""
    events = []
    for k in range(STEPS):
        t = 100_000 * k
        events.append(dict(ph="X", cat="user_annotation", name=step_name.format(k=k), ts=t, dur=100_000, tid=1))
        if wait_ms:
            events.append(dict(ph="X", cat="user_annotation", ts=t, dur=1000 * wait_ms, tid=1,
                               name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"))
        events.append(dict(ph="X", cat="kernel", name="sgemm", ts=t + 1000 * kernel[0],
                           dur=1000 * (kernel[1] - kernel[0]), tid=7))
        if copy:
            kind = "Pageable" if copy[2] else "Pinned"
            events.append(dict(ph="X", cat="gpu_memcpy", name=f"Memcpy HtoD ({kind} -> Device)", ts=t + 1000 * copy[0],
                               dur=1000 * (copy[1] - copy[0]), tid=7, args=dict(bytes=50_000_000)))
        if sync:
            events.append(dict(ph="X", cat="cuda_runtime", name="cudaStreamSynchronize", ts=t + 1000 * sync[0],
                               dur=1000 * (sync[1] - sync[0]), tid=1))
    path.write_text(json.dumps(dict(traceEvents=events)))
    return path


@pytest.mark.parametrize("shape, verdict, change", [
    (dict(wait_ms=70, kernel=(72, 95)), "loading-bound", "num_workers=N"),
    (dict(kernel=(45, 95), copy=(5, 40, True), sync=(5, 40)), "synchronous pageable copy", "pin_memory=True"),
    (dict(kernel=(60, 80), sync=(10, 60)), "a sync every step", ".item()"),
    (dict(kernel=(0, 99)), "GPU-bound", "look at the model"),
])
def test_a_job_of_our_own_gets_the_verdict_it_was_written_to_have(shape, verdict, change, tmp_path, capsys):
    trace = job_trace(tmp_path / "job.pt.trace.json", **shape)
    assert analyze.main([str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"job: {verdict} -- "), out
    assert change in out and "(steps: torch.profiler's ProfilerStep#N)" in out
    assert (tmp_path / "job_steps.csv").exists() and (tmp_path / "job_timeline.png").exists()


def test_steps_of_the_users_own_names_are_found_by_step_range(tmp_path, capsys):
    trace = job_trace(tmp_path / "mine.pt.trace.json", step_name="train_step {k}", wait_ms=70, kernel=(72, 95))
    assert analyze.main([str(trace)]) == 1
    assert "--step-range REGEX names a range of yours" in capsys.readouterr().err
    assert analyze.main(["--step-range", r"^train_step \d+$", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mine: loading-bound -- ") and "(steps: ranges matching '^train_step \\\\d+$')" in out
    with pytest.raises(SystemExit) as e:
        analyze.main(["--step-range", "(", str(trace)])
    assert e.value.code == 2
    assert "'(' is no regular expression" in capsys.readouterr().err


PLAIN_JOB = '''
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
data = DataLoader(TensorDataset(torch.randn(64, 16), torch.randint(0, 2, (64,))), batch_size=8)
model, loss = nn.Linear(16, 2), nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=4),
                            on_trace_ready=torch.profiler.tensorboard_trace_handler(OUT, use_gzip=True)) as prof:
    for x, y in data:
        opt.zero_grad(); loss(model(x), y).backward(); opt.step(); prof.step()
'''


def test_a_plain_pytorch_job_recorded_on_the_cpu_gives_its_steps_and_says_what_a_cpu_trace_lacks(tmp_path):
    out = tmp_path / "traces"
    p = subprocess.run([sys.executable, "-c", f"OUT = {str(out)!r}\n" + PLAIN_JOB], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), str(out)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "CPU ranges only" in p.stdout and "(steps: torch.profiler's ProfilerStep#N)" in p.stdout
    assert "no CUDA kernels or copies" in p.stderr
