"""analyze.py on a training job we did not write: its steps found without the study's names (torch.profiler's
ProfilerStep#N, or --step-range), the DataLoader's wait standing for "get batch", and the change named in
the job's own code. Traces made here, as torch.profiler writes them (the GPU's rows as its CUDA traces hold
them), one recorded on the CPU from a plain PyTorch loop, and real GPU traces of our jobs (tests/fixtures)."""
import csv
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

import analyze
from conftest import ROOT, WRITTEN_TO, failing_nsys, run_profiled
from starvation import trace as tr

STEPS = 10
# --run and the jobs take the GPU where there is one: these tests are of what a machine without one shows (on a
# GPU, tests/test_jobs_on_a_gpu.py runs the jobs)
NO_GPU = pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="shows what a machine without a GPU records")


def job_trace(path, step_name="ProfilerStep#{k}", wait_ms=0, kernel=(0, 99), copy=None, sync=None, nccl=None,
              stream=None):
    """A chrome trace of STEPS steps of 100 ms: the main thread's step range, the DataLoader's __next__ for
    wait_ms, kernels over `kernel` ms of each step, an H2D copy ((start, end, pageable)), a sync call, an NCCL
    kernel (DDP's all-reduce); with `stream`, the kernels on stream 7 and the copy on that one."""
    kernel_args, copy_args = (dict(stream=7), dict(stream=stream)) if stream else ({}, {})
    events = []
    for k in range(STEPS):
        t = 100_000 * k
        events.append(dict(ph="X", cat="user_annotation", name=step_name.format(k=k), ts=t, dur=100_000, tid=1))
        if wait_ms:
            events.append(dict(ph="X", cat="user_annotation", ts=t, dur=1000 * wait_ms, tid=1,
                               name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"))
        events.append(dict(ph="X", cat="kernel", name="sgemm", ts=t + 1000 * kernel[0],
                           dur=1000 * (kernel[1] - kernel[0]), tid=7, args=kernel_args))
        if copy:
            kind = "Pageable" if copy[2] else "Pinned"
            events.append(dict(ph="X", cat="gpu_memcpy", name=f"Memcpy HtoD ({kind} -> Device)", ts=t + 1000 * copy[0],
                               dur=1000 * (copy[1] - copy[0]), tid=7, args=dict(copy_args, bytes=50_000_000)))
        if sync:
            events.append(dict(ph="X", cat="cuda_runtime", name="cudaStreamSynchronize", ts=t + 1000 * sync[0],
                               dur=1000 * (sync[1] - sync[0]), tid=1))
        if nccl:
            events.append(dict(ph="X", cat="kernel", name="ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                               ts=t + 1000 * nccl[0], dur=1000 * (nccl[1] - nccl[0]), tid=9))
    path.write_text(json.dumps(dict(traceEvents=events)))
    return path


@pytest.mark.parametrize("shape, verdict, change", [
    (dict(wait_ms=70, kernel=(72, 95)), "loading-bound", "num_workers=N"),
    (dict(kernel=(45, 95), copy=(5, 40, True), sync=(5, 40)), "synchronous pageable copy", "pin_memory=True"),
    (dict(kernel=(60, 80), sync=(10, 60)), "a sync every step", ".item()"),
    (dict(kernel=(0, 99)), "GPU-bound", "look at the model"),
    # DDP: a rank fed in time whose all-reduce waits 40 ms for a starved one; one whose all-reduce hides under its
    # backward is GPU-bound
    (dict(kernel=(2, 50), copy=(0, 2, False), nccl=(30, 90)), "waiting for another rank", "the slowest rank's own"),
    (dict(kernel=(0, 99), nccl=(40, 95)), "GPU-bound", "look at the model"),
])
def test_a_job_of_our_own_gets_the_verdict_it_was_written_to_have(shape, verdict, change, tmp_path, capsys):
    trace = job_trace(tmp_path / "job.pt.trace.json", **shape)
    assert analyze.main([str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"job: {verdict} -- "), out
    assert change in out and "(steps: torch.profiler's ProfilerStep#N)" in out
    assert (tmp_path / "job_steps.csv").exists() and (tmp_path / "job_timeline.png").exists()


@pytest.mark.parametrize("kernel, stacks, change", [
    ("sgemm", False, "torch.compile (mode='reduce-overhead'"),
    ("triton_poi_fused_add_relu_0", True, "its step is compiled already"),
])
def test_a_launch_bound_job_is_told_what_it_lacks_and_what_its_trace_costs(kernel, stacks, change, tmp_path, capsys):
    """Steps of 20 kernels of 0.25 ms, 0.25 ms apart: the GPU idles half of each step in gaps too short for host work.
    A job whose kernels torch.compile made is not told to compile; a trace with Python's frames says what they cost."""
    events = []
    for k in range(STEPS):
        t = 10_000 * k
        events.append(dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{k}", ts=t, dur=10_000, tid=1))
        events += [dict(ph="X", cat="kernel", name=kernel, ts=t + 500 * j, dur=250, tid=7) for j in range(20)]
        if stacks:
            events.append(dict(ph="X", cat="python_function", name="train.py(12): step", ts=t, dur=9_000, tid=1))
    path = tmp_path / "job.pt.trace.json"
    path.write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job: launch-bound -- ") and change in out, out
    assert ("with_stack=True" in out) == stacks


def test_a_jobs_decoder_on_streams_of_its_own_is_named_as_work_beside_the_step(tmp_path, capsys):
    """The step's kernels keep stream 7 busy; a GPU decoder's colour conversion runs 15 ms of each step on two
    streams of its own, beside them: the verdict names it, by its kernel's short name, and where to move it."""
    path = job_trace(tmp_path / "job.pt.trace.json", kernel=(0, 99), stream=7)
    trace = json.loads(path.read_text())
    name = "void nvjpeg::rgba2rgb<(nvjpegOutputFormat_t)3, nvjpeg::RGBAType>(nvjpeg::ImageDesc, int)"
    for k in range(STEPS):
        trace["traceEvents"] += [dict(ph="X", cat="kernel", name=name, ts=100_000 * k + 30_000 + 5_000 * j,
                                      dur=7_500, tid=20 + j, args=dict(stream=20 + j)) for j in range(2)]
    path.write_text(json.dumps(trace))
    assert analyze.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job: GPU work beside the step -- kernels of other streams than the step's run during "
                          "12.5 of 100 ms per step (12%)"), out
    assert "nvjpeg::rgba2rgb 15.0 ms a step" in out and "in the DataLoader's workers" in out
    assert "other streams' kernels 12.5 ms" in out


@pytest.mark.parametrize("first", [0, 13])
def test_a_whole_jobs_slow_first_steps_are_left_out_as_warm_up(first, tmp_path, capsys):
    """A profile held around a whole job: its first two steps take a second each, the GPU idle (cuDNN's set-up,
    say), and then 18 of 100 ms keep it busy. Over all 20 the GPU would idle over half the time. A schedule that
    skipped the job's first 13 steps numbers its first ProfilerStep#13: its slow steps are the job's own."""
    events, t = [], 0
    for k in range(20):
        length = 1_000_000 if k < 2 else 100_000
        events.append(dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{first + k}", ts=t, dur=length, tid=1))
        events.append(dict(ph="X", cat="kernel", name="sgemm", ts=t + length - 99_000, dur=99_000, tid=7))
        t += length
    (tmp_path / "job.pt.trace.json").write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main([str(tmp_path / "job.pt.trace.json")]) == 0
    out = capsys.readouterr().out
    if first:
        assert not out.startswith("job: GPU-bound -- ") and "mean of 20 traced steps" in out and "warm-up" not in out
    else:
        assert out.startswith("job: GPU-bound -- ") and "mean of 18 traced steps" in out, out
        assert "the first 2, each over twice the median step, left out as warm-up" in out


@pytest.mark.parametrize("loader_ranges", [True, False])
def test_a_torch_trace_without_prof_step_is_read_by_its_repeating_cuda_calls(loader_ranges, tmp_path, capsys):
    """A profile held around a few steps of a loop that never calls prof.step(): no ProfilerStep#N, so the steps
    come from the main thread's CUDA calls, matched to their kernels and copies by kineto's correlation ids, as in
    an nsys report: the main thread's, not the autograd thread's that launches the backward, and launches more.
    'get batch' is the DataLoader's __next__ where the trace has it, else the loop's wait up to its copy."""
    events, corr = [], 0
    for k in range(STEPS):
        t = 100_000 * k
        if loader_ranges:
            events.append(dict(ph="X", cat="user_annotation", ts=t + 1000, dur=69_000, tid=1,
                               name="enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"))
        for j, (cat, name) in enumerate([("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)")] + [("kernel", "sgemm")] * 5):
            corr += 1
            api = "cudaMemcpyAsync" if cat == "gpu_memcpy" else "cudaLaunchKernel"
            events.append(dict(ph="X", cat="cuda_runtime", name=api, ts=t + 70_000 + 100 * j, dur=50, pid=1, tid=1,
                               args=dict(correlation=corr)))
            span = (70_000, 2000) if cat == "gpu_memcpy" else (72_000 + 4600 * (j - 1), 4600)
            events.append(dict(ph="X", cat=cat, name=name, ts=t + span[0], dur=span[1], tid=7,
                               args=dict(correlation=corr, stream=7, bytes=50_000_000)))
        events += [dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=t + 75_000 + 100 * j, dur=50, pid=1,
                        tid=2) for j in range(10)]  # (the backward's launches; their kernels are left out)
    (tmp_path / "job.pt.trace.json").write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main([str(tmp_path / "job.pt.trace.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job: loading-bound -- 'get batch' takes ") and "(steps: CUDA calls that repeat once a" in out
    rows = list(csv.DictReader(open(tmp_path / "job_steps.csv")))  # (the first step's wait is not in the trace)
    assert len(rows) == STEPS - 1 and all(abs(float(r["step_ms"]) - 100) < 0.1 for r in rows[:-1]), rows
    # (without the DataLoader's range: from the end of the loop's last launch to the next copy, 99.45 ms of 100)
    assert all(abs(float(r["get_batch_ms"]) - (69 if loader_ranges else 99.45)) < 0.1 for r in rows), rows


@pytest.mark.parametrize("stream, said, change", [
    (7, "on the compute stream", "copy the next batch on a side stream"),
    (13, "on a side stream", "its copies run on a side stream already"),
    (None, "under kernels)", "copy the next batch on a side stream"),  # (a trace that names no stream)
])
def test_a_copy_not_overlapped_is_told_by_the_stream_it_runs_on(stream, said, change, tmp_path, capsys):
    trace = job_trace(tmp_path / "job.pt.trace.json", kernel=(10, 90), copy=(2, 10, False), stream=stream)
    assert analyze.main([str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job: copy not overlapped -- ") and said in out and change in out, out


def test_steps_of_the_users_own_names_are_found_by_step_range(tmp_path, capsys):
    trace = job_trace(tmp_path / "mine.pt.trace.json", step_name="train_step {k}", wait_ms=70, kernel=(72, 95))
    assert analyze.main([str(trace)]) == 1
    assert ("--step-range REGEX can name a range of its own that holds each step ('train_step N', "
            "'enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__')") in capsys.readouterr().err
    assert analyze.main(["--step-range", r"^train_step \d+$", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mine: loading-bound -- ") and "(steps: ranges matching '^train_step \\\\d+$')" in out
    with pytest.raises(SystemExit) as e:
        analyze.main(["--step-range", "(", str(trace)])
    assert e.value.code == 2
    assert "'(' is no regular expression" in capsys.readouterr().err


def test_a_step_range_that_also_matches_ranges_inside_each_step_takes_the_outermost(tmp_path, capsys):
    """--step-range step: the job's 'train_step N' and, inside each, torch.profiler's Optimizer.step#SGD.step
    (ProfilerStep#N's capital S matches not). Taken both, each step would be cut in two."""
    trace = job_trace(tmp_path / "job.pt.trace.json", wait_ms=70, kernel=(72, 95))
    events = json.loads(trace.read_text())["traceEvents"]
    for k in range(STEPS):
        t = 100_000 * k
        events += [dict(ph="X", cat="user_annotation", name=f"train_step {k}", ts=t + 70_000, dur=29_000, tid=1),
                   dict(ph="X", cat="user_annotation", name="Optimizer.step#SGD.step", ts=t + 90_000, dur=5_000, tid=1)]
    trace.write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main(["--step-range", "step", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("job: loading-bound -- ") and f"mean of {STEPS} traced steps" in out, out


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
    # (a note may follow the steps' source: on a busy machine a slow first step is left out as warm-up)
    assert "CPU ranges only" in p.stdout and "(steps: torch.profiler's ProfilerStep#N" in p.stdout
    assert "no CUDA kernels or copies" in p.stderr


# ---- nsys reports read as a job of the user's own: steps from the CUDA calls that repeat once a step

REFERENCE = ROOT / "results" / "20261130T182151Z-NVIDIA-H200"  # README's reference run of part 1, on the H200
# what each report says read as a plain job. The five steps of the study are loader-bound by their measured rates,
# and pinning caps async, streams and prefetch (their workers alone are faster): their pin-memory thread runs all
# the time. Async too, though its median step (with the ranges) looks only unoverlapped: over the window it waits
PINNING = "loading-bound: pinning caps it"
PLAIN_VERDICTS = {"baseline": "loading-bound", "workers": "synchronous pageable copy", "async": PINNING,
                  "streams": PINNING, "prefetch": PINNING, "pool": "GPU-bound", "ceiling": "GPU-bound"}


def without_ranges(nsys, report, folder):
    """The report's SQLite export with its NVTX ranges dropped: what a script without any would give."""
    db = folder / (report.stem + ".sqlite")
    subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(db), str(report)],
                   capture_output=True, check=True, timeout=120)
    con = sqlite3.connect(db)
    con.execute("DROP TABLE NVTX_EVENTS")
    con.commit()
    con.close()
    return db


def test_the_reference_runs_reports_without_their_ranges_get_their_verdicts_from_the_cuda_calls(nsys, tmp_path):
    """Real H200 reports of train.py, stripped of every NVTX range: the steps come from the repeating CUDA calls,
    "get batch" from the loop's waits up to its copy to the device, and each verdict is the one the run's
    measured rates give: one engine, whichever way the steps were found."""
    dbs = [without_ranges(nsys, REFERENCE / f"{v}.nsys-rep", tmp_path) for v in PLAIN_VERDICTS]
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), *map(str, dbs)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [line for line in p.stdout.splitlines() if not line.startswith(" ")]
    assert [line.split(" -- ")[0] for line in lines] == [f"{v}: {w}" for v, w in PLAIN_VERDICTS.items()]
    # (10 steps profiled: the first one's wait for its batch may lie before the capture, and it is left out)
    assert set(re.findall(r"mean of (\d+) traced steps", p.stdout)) <= {"9", "10"}
    assert p.stdout.count("CUDA calls that repeat once a step") == 7
    steps = {v: list(csv.DictReader(open(tmp_path / f"{v}_steps.csv"))) for v in PLAIN_VERDICTS}
    # the baseline's loader: the ranges' "get batch" took 312 ms of a 374 ms step (README's reference run)
    wait = sum(float(r["get_batch_ms"]) for r in steps["baseline"]) / len(steps["baseline"])
    assert 280 < wait < 345, wait
    # the resident batch of the ceiling waits for nothing: none of its host work ends at a copy to the device
    assert all(float(r["get_batch_ms"]) == 0 for r in steps["ceiling"])
    assert "DataLoader worker processes" in p.stdout.split("baseline: ")[1].splitlines()[0]
    # the pin-memory thread, from nsys's context switches: on a CPU 96% of the time or more where it capped the loader
    for v in ("async", "streams", "prefetch"):
        line = p.stdout.split(f"{v}: ")[1].splitlines()[0]
        assert re.search(r"pin-memory thread ran on a CPU (9[6-9]|100)% of the time\. Next: pin in the workers", line)
    assert "pin-memory" not in p.stdout.split("workers: ")[1].splitlines()[0]
    # README's example is this output, word for word
    baseline = " ".join(p.stdout.split("baseline: ")[1].split("\nworkers: ")[0].split())
    assert f"baseline: {baseline}" in " ".join((ROOT / "README.md").read_text().split())


def loop_calls(waits_ms: list[float], host_ms: float) -> list:
    """A loop's CUDA calls, a step per wait: the wait for the batch, its copy to the device, two launches, a copy back
    with its sync (.item()), host_ms of host work on what came back, another copy back; each call 0.1 ms, 0.2 ms
    apart."""
    calls, t = [], 0
    for wait in waits_ms:
        t += int(wait * 1e6)
        for what, after_ms in (("cudaMemcpyAsync::1", 0.2), ("cudaLaunchKernel:conv:", 0.2),
                               ("cudaLaunchKernel:sgd:", 0.2), ("cudaMemcpyAsync::2", 0.2),
                               ("cudaStreamSynchronize::", host_ms), ("cudaMemcpyAsync::2", 0.2)):
            calls.append(tr.Call(t, t + 100_000, what, what.endswith(":1")))
            t += 100_000 + int(after_ms * 1e6)
    return calls


def test_a_loaders_bursts_and_host_work_after_a_sync_are_told_apart():
    """Workers that deliver in bursts leave most waits short: each step still starts where the loop waits for its
    batch, before the copy to the device, the place it waits most on average (not by the median). Host work on
    what a sync read back (ranking the predictions) ends at a copy back: it is not loading."""
    waits = [300, 0.5, 0.5, 0.5] * 4
    calls = loop_calls(waits, host_ms=5)
    steps = tr.repeating_steps(calls)
    assert len(steps) == len(waits) - 1  # (the first wait has no call before it; the last ends with its launches)
    for k, (_, (lo, hi)) in enumerate(steps, start=1):  # step k: from the call before its wait to the next one's
        assert (lo, hi) == (calls[6 * k - 1].end, calls[6 * k + 5].end if k < len(steps) else calls[-4].end)
    assert tr.host_gaps(calls) == [(calls[6 * k - 1].end, calls[6 * k].start) for k in (4, 8, 12)]


def test_a_loss_logged_every_few_steps_leaves_the_steps_found():
    """A loop that logs its loss every 4th step (.item(): a copy back and a sync) makes two calls more in those steps,
    which would shift every call after them by two; its first step makes the optimizer's state, and its launches
    repeat within a step (as identical layers' do). The steps are still found, one a batch, each from the end of
    the call before its copy to the device."""
    calls, t, first = [], 0, []
    for step in range(30):
        t += 20_000_000  # the wait for the batch
        first.append(len(calls))
        work = ["cudaMemcpyAsync::1"] + [f"cudaLaunchKernel:k{k % 7}:" for k in range(20)]
        work += [f"cudaLaunchKernel:zeros{k}:" for k in range(5)] if step == 0 else []  # (the optimizer's state)
        for what in work + (["cudaMemcpyAsync::2", "cudaStreamSynchronize::"] if step % 4 == 3 else []):
            calls.append(tr.Call(t, t + 100_000, what, what.endswith(":1")))
            t += 300_000
    steps = tr.repeating_steps(calls)
    assert [lo for _, (lo, _) in steps] == [calls[j - 1].end for j in first[1:]]
    assert [hi for _, (_, hi) in steps] == [calls[j - 1].end for j in first[2:]] + [calls[-1].end]  # (none logged)


def test_a_deep_stack_of_identical_blocks_is_not_taken_for_the_step():
    """A transformer-like loop of 24 identical blocks (three launches each way), its batch made on the GPU: nothing
    copied to the device. One block's launches repeat for 94% of the calls, the step's for all of them: the step
    is the period."""
    calls, t, first = [], 0, []
    for step in range(12):
        first.append(len(calls))
        work = ["cudaLaunchKernel:randn:", "cudaLaunchKernel:embed:"] + \
            ["cudaLaunchKernel:gemm:", "cudaLaunchKernel:softmax:", "cudaLaunchKernel:gemm2:"] * 24 + \
            ["cudaLaunchKernel:loss:", "cudaLaunchKernel:loss_backward:"] + \
            ["cudaLaunchKernel:gemm2_bw:", "cudaLaunchKernel:softmax_bw:", "cudaLaunchKernel:gemm_bw:"] * 24 + \
            ["cudaLaunchKernel:adam:"]
        for what in work:
            calls.append(tr.Call(t, t + 10_000, what, False))
            t += 30_000
    steps = tr.repeating_steps(calls)
    assert len(steps) >= 10 and {hi - lo for _, (lo, hi) in steps} == {(len(calls) // 12) * 30_000}, steps[:3]


def test_a_step_whose_launches_repeat_inside_it_is_cut_once_a_step():
    """No copies, and a step of 121 launches that cycle through 13 kernels: the calls that open a step follow
    inside it too, every 13 calls, but a step is cut only a period after the last cut."""
    calls, t = [], 0
    for step in range(30):
        for what in ["cudaLaunchKernel:randn:"] + [f"cudaLaunchKernel:k{k % 13}:" for k in range(120)]:
            calls.append(tr.Call(t, t + 10_000, what, False))
            t += 30_000
    steps = tr.repeating_steps(calls)
    assert len(steps) == 29 and {hi - lo for _, (lo, hi) in steps} == {121 * 30_000}


def test_a_loop_that_launches_more_every_tenth_step_keeps_a_step_a_batch():
    """A loop that copies its batch and, every 10th step, launches three kernels more (its accuracy): the cycle of
    ten steps repeats better than a step does, but a step is one batch."""
    calls, t, first = [], 0, []
    for step in range(40):
        t += 5_000_000  # the wait for the batch
        first.append(len(calls))
        work = ["cudaMemcpyAsync::1"] + [f"cudaLaunchKernel:k{k}:" for k in range(30)]
        work += ["cudaLaunchKernel:argmax:", "cudaLaunchKernel:eq:", "cudaLaunchKernel:sum:"] if step % 10 == 9 else []
        for what in work:
            calls.append(tr.Call(t, t + 10_000, what, what.endswith(":1")))
            t += 30_000
    steps = tr.repeating_steps(calls)
    assert [lo for _, (lo, _) in steps] == [calls[j - 1].end for j in first[1:]]


# ---- bad input: one line each, and nothing written beside it

def test_a_trace_of_a_program_that_is_not_pytorch_is_one_line_and_exit_2(nsys, tmp_path):
    rep = tmp_path / "shell"
    p = run_profiled(nsys, "profile", "--trace=cuda,nvtx,osrt", "--force-overwrite=true", "-o", str(rep), "sh", "-c",
                     "sleep 0.2", timeout=120)
    assert p.returncode == 0, p.stderr
    other = tmp_path / "other.json"  # a chrome trace of something else
    other.write_text(json.dumps(dict(traceEvents=[dict(ph="X", cat="function", name="main", ts=0, dur=5, tid=1)])))
    for path in (f"{rep}.nsys-rep", other):
        p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), str(path)], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.count("\n") == 1 and "not a trace of a PyTorch job on a GPU" in p.stderr
    assert not list(tmp_path.glob("*.csv")) and not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("steps, message", [
    (1, "1 step found (torch.profiler's ProfilerStep#N): a verdict needs 3 or more"),
    (0, "its steps cannot be found: no torch.profiler ProfilerStep#N (prof.step() once a step makes them), and no "
        "range of its own for --step-range REGEX to name"),
])
def test_too_few_steps_or_none_is_one_line_and_exit_1(steps, message, tmp_path, capsys):
    events = [dict(ph="X", cat="kernel", name="sgemm", ts=0, dur=50_000, tid=7)] + [
        dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{k}", ts=100_000 * k, dur=100_000, tid=1)
        for k in range(steps)]
    trace = tmp_path / "short.pt.trace.json"
    trace.write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main([str(trace)]) == 1
    assert capsys.readouterr().err == f"analyze.py: {trace}: {message}" + (
        ": record more (torch.profiler: schedule(active=10); analyze.py --run: a longer --window)\n" if steps else "\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["short.pt.trace.json"]


@pytest.mark.parametrize("gap_us, verdict", [(60, "launch-bound"), (1500, "unclassified")])
def test_a_gpu_idle_between_many_short_kernels_is_launch_bound(gap_us, verdict, tmp_path, capsys):
    """Steps of 100 kernels of 40 us: 60 us apart, the GPU runs each as soon as the CPU launches it (a small model:
    launch-bound); 1.5 ms apart, the loop's thread does work of its own between them, which the trace does not
    name."""
    events, t = [], 0
    for k in range(STEPS):
        start = t
        for _ in range(100):
            events.append(dict(ph="X", cat="kernel", name="sgemm", ts=t, dur=40, tid=7))
            t += 40 + gap_us
        events.append(dict(ph="X", cat="user_annotation", name=f"ProfilerStep#{k}", ts=start, dur=t - start, tid=1))
    trace = tmp_path / "small_model.pt.trace.json"
    trace.write_text(json.dumps(dict(traceEvents=events)))
    assert analyze.main([str(trace)]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"^small_model: {verdict} -- ", out, flags=re.M), out
    if verdict == "launch-bound":
        assert "the GPU idles 60% of the step (6.0 ms), 5.9 ms of it in 99 gaps of under 1 ms between kernels" in out
        assert "Next: fewer, larger kernels: torch.compile (mode='reduce-overhead'" in out


def test_a_rank_without_steps_is_named_and_the_other_ranks_keep_their_verdicts(tmp_path, capsys):
    """A torchrun folder: rank 0's trace holds one step (its profiler was stopped early), rank 1's ten."""
    events = [dict(ph="X", cat="kernel", name="sgemm", ts=0, dur=50_000, tid=7),
              dict(ph="X", cat="user_annotation", name="ProfilerStep#0", ts=0, dur=100_000, tid=1)]
    (tmp_path / "rank0.100.pt.trace.json").write_text(json.dumps(dict(traceEvents=events)))
    job_trace(tmp_path / "rank1.100.pt.trace.json", wait_ms=70, kernel=(72, 95))
    assert analyze.main([str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "rank0.100.pt.trace.json: 1 step found" in err and err.count("\n") == 1
    assert re.search(r"^\S+\.rank1: loading-bound -- ", out, flags=re.M) and "rank0" not in out


def test_a_profiler_stopped_mid_cycle_leaves_a_short_trace_last_and_the_whole_one_is_read(tmp_path, capsys):
    """torch.profiler's schedule repeats: a loop that ends mid-cycle flushes a trace of a step or two, last."""
    whole = job_trace(tmp_path / "host_1.100.pt.trace.json", wait_ms=70, kernel=(72, 95))
    short = tmp_path / "host_1.200.pt.trace.json"
    short.write_text(json.dumps(dict(traceEvents=json.loads(whole.read_text())["traceEvents"][:2])))
    os.utime(whole, (1, 1))
    assert analyze.main([str(tmp_path)]) == 0
    assert f"mean of {STEPS} traced steps" in capsys.readouterr().out


def test_a_long_trace_is_read_for_its_middle_steps(nsys, tmp_path, capsys, monkeypatch):
    """A report of thousands of steps is read for MAX_STEPS of them, from its middle, and only their span of its
    activity is loaded: the line says which (results/20261204T2345Z-CPU-own-job-analysis: a 1.08 GB export)."""
    monkeypatch.setattr(tr, "MAX_STEPS", 4)
    db = without_ranges(nsys, REFERENCE / "baseline.nsys-rep", tmp_path)
    assert analyze.main([str(db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("baseline: loading-bound -- ")
    assert "mean of 4 traced steps" in out
    assert "(steps: CUDA calls that repeat once a step; the middle 4 of its 9)" in out
    trace = tr.load(db)
    assert [i for i, _ in trace.steps] == [2, 3, 4, 5] and trace.steps_found == 9
    lo, hi = trace.steps[0][1][0], trace.steps[-1][1][1]
    assert all(e > lo for _, e in trace.kernels) and all(s < hi for s, _ in trace.kernels)
    torch_trace = job_trace(tmp_path / "job.pt.trace.json", wait_ms=70, kernel=(72, 95))
    assert analyze.main([str(torch_trace)]) == 0
    assert f"(steps: torch.profiler's ProfilerStep#N; the middle 4 of its {STEPS})" in capsys.readouterr().out


# ---- analyze.py --run: a job under nsys, a window of it

@NO_GPU
@pytest.mark.e2e
def test_run_on_a_cpu_machine_says_what_its_report_can_show(nsys, tmp_path):
    """Without a GPU, the report of a window holds the job's own ranges and OS calls: its steps where --step-range
    names them, and results.md that says no verdict can come from it; a job that ends before its window, one line."""
    # (under `timeout`: nsys starts the job in a session of its own, so where nsys hangs past the test's timeout
    # nothing else would stop it, and it would keep a core of a small machine busy for the tests after this one)
    job = ["timeout", "110", sys.executable, str(ROOT / "tests" / "jobs" / "single_process.py"), "--steps", "100000",
           "--img-size", "32", "--batch-size", "4", "--nvtx", "--device", "cpu"]
    # (one thread for torch's ops: on a 2-core machine busy with other tests, two of them wait for each other and a
    # step takes a second, too slow for a window of seconds to hold three. The window is 6 s: on a busy 2-core machine
    # a 3-s window once held a single step, the job's start-up outlasting the 6 s skipped)
    for mine in ([], ["--step-range", "^train_step"]):
        out = tmp_path / ("mine" if mine else "plain")
        p = run_profiled("analyze.py", "--run", "--skip", "6", "--window", "6", *mine, "--out", str(out), "--", *job,
                         timeout=120, env={"OMP_NUM_THREADS": "1"})
        assert p.returncode == 0, p.stderr[-2000:]
        md = (out / "results.md").read_text()
        assert "on a machine without a GPU" in md and (out / "job.nsys-rep").exists()
        if mine:
            # (a note may follow the steps' source: on a busy machine a slow first step is left out as warm-up)
            assert "job: CPU ranges only -- mean of" in md and "(steps: ranges matching '^train_step'" in md, md
            assert (out / "job_steps.csv").exists()
        else:
            assert "no GPU here" in md and "--step-range REGEX names a range" in p.stdout
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), "--run", "--skip", "6", "--out", str(tmp_path / "x"),
                        "--", sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "before its window closed: --skip less, or run it for longer" in p.stderr


FAKE_TORCH = """
import time
T0 = time.monotonic()


class _Cudart:
    def cudaProfilerStart(self):
        print(f"start {time.monotonic() - T0:.2f}", flush=True)

    def cudaProfilerStop(self):
        print(f"stop {time.monotonic() - T0:.2f}", flush=True)


class cuda:
    started = False

    @staticmethod
    def is_initialized():
        return cuda.started

    @staticmethod
    def cudart():
        return _Cudart()
"""


@pytest.mark.parametrize("late", [None, 0, 2])
def test_the_window_opens_skip_seconds_after_start_up_or_after_cuda_starts_if_later(late, tmp_path):
    """starvation/window in a job's process, beside a stand-in for torch that says when CUDA started and prints the
    capture's start and stop: a job on the GPU from the start is captured SKIP seconds in; one that prepares its
    data first, SKIP seconds after CUDA starts; a process that never uses CUDA (a DataLoader worker), never. As the
    window closes, the file GPU_STARVATION_CLOSED names is made."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    job = "import time, torch" + ("" if late is None else f"; time.sleep({late}); torch.cuda.started = True") + (
        "; time.sleep(4)")
    path = os.pathsep.join([str(ROOT / "starvation" / "window"), str(tmp_path)])
    p = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": path, "GPU_STARVATION_WINDOW": "1,0.5",
                            "GPU_STARVATION_CLOSED": str(tmp_path / "closed")})
    assert p.returncode == 0, p.stderr
    said = dict(line.split() for line in p.stdout.splitlines())
    assert (tmp_path / "closed").exists() == (late is not None)  # (how analyze.py --run knows the window closed)
    if late is None:
        assert said == {}
    else:  # (the thread looks for CUDA every 0.5 s)
        opens = 1 if late == 0 else late + 1
        assert opens <= float(said["start"]) < opens + 1.5 and float(said["stop"]) >= float(said["start"]) + 0.5, said


@NO_GPU
@pytest.mark.parametrize("after", [False, True], ids=["at-start-up", "after-the-window"])
@pytest.mark.parametrize("fails", [1, 2])
def test_run_profiles_once_more_where_nsys_fails_by_itself(nsys, tmp_path, fails, after):
    """nsys 2023.4 at times fails by itself, at start-up or with the job run through its window and no report
    written: --run profiles the job once more, and a second failure is nsys's, exit 2, never the job's ending too
    soon. Here nsys is a wrapper whose first `fails` profiles fail, in words nsys had for such faults."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    words = ("Connection to Agent lost. This is most likely a bug." if after
             else "[QuadDCommon::tag_message*] = Local Endpoint is not available.")
    failing_nsys(bin_dir / "nsys", nsys, fails, words, status=0 if after else 1, after=after)
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), "--run", "--skip", "1", "--window", "1",
                        "--out", str(tmp_path / "out"), "--", sys.executable, "-c", "import time; time.sleep(4)"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    fault = ("nsys exited 0 without its report, though the job ran through its window" if after
             else "nsys exited 1 before the job started")
    assert p.stderr.count(f"analyze.py --run: {fault}") == fails, p.stderr
    assert "profiling it once more" in p.stderr
    if fails == 1:
        assert p.returncode == 0 and (tmp_path / "out" / "job.nsys-rep").exists(), p.stderr
    else:
        assert p.returncode == 2 and "before its window closed" not in p.stderr


@NO_GPU
@pytest.mark.e2e
def test_run_over_torchrun_reads_each_rank(nsys, tmp_path):
    """analyze.py --run -- torchrun ...: one nsys records both ranks' processes, and each is read on its own."""
    out = tmp_path / "ddp"
    job = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           str(ROOT / "tests" / "jobs" / "ddp_starved_rank.py"), "--steps", "100000", "--img-size", "32",
           "--batch-size", "4", "--nvtx"]
    # (a skip of 20 s: on a busy 2-core machine the window from 10 to 14 s once held no step of either rank)
    p = run_profiled("analyze.py", "--run", "--skip", "20", "--window", "6", "--step-range", "^train_step",
                     "--out", str(out), "--", *job, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    md = (out / "results.md").read_text()
    assert md.count("job.pid") >= 4 and md.count(": CPU ranges only -- mean of") == 2, md
    assert len(list(out.glob("job.pid*_steps.csv"))) == 2


JOBS = ["single_process", "few_workers", "pageable_copy", "item_sync", "gpu_bound", "launch_bound", "decode_jpeg",
        "ddp_starved_rank"]


@NO_GPU
@pytest.mark.e2e
@pytest.mark.parametrize("job", JOBS)
def test_each_job_of_our_own_runs_and_its_torch_profiler_trace_gives_its_steps(job, tmp_path):
    """On a CPU machine: the job as a user runs it (DDP under torchrun, two ranks), small, and its trace read rank by
    rank. Their verdicts need a GPU: results/ holds what each job got on the H200."""
    traces = tmp_path / "traces"
    args = [str(ROOT / "tests" / "jobs" / f"{job}.py"), "--steps", "24", "--img-size", "32", "--batch-size", "4",
            "--torch-profile", str(traces)]
    cmd = ([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"] if job.startswith("ddp") else
           [sys.executable])
    p = subprocess.run(cmd + args, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "JOB_PHOTOS": str(tmp_path / "photos")})
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), str(traces)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == (2 if job.startswith("ddp") else 1)
    # the profiler's 10 active steps, less any slow first one a busy machine makes, which the line then names
    traced = [re.search(r"CPU ranges only -- mean of (\d+) traced steps: .*\(steps: torch.profiler's ProfilerStep#N"
                        r"(; the first (\d+), each over twice the median step, left out as warm-up)?\)", line)
              for line in lines]
    assert all(m and int(m[1]) + int(m[3] or 0) == 10 for m in traced), p.stdout


@NO_GPU
@pytest.mark.e2e
def test_a_profile_held_around_a_whole_job_writes_a_trace_a_rank(tmp_path):
    """--torch-trace: torch.profiler around the whole loop, without prof.step(), a chrome trace a process. On a CPU
    it holds no CUDA calls to find the steps by, and analyze.py names the ranges --step-range could take."""
    traces = tmp_path / "traces"
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        str(ROOT / "tests" / "jobs" / "ddp_starved_rank.py"), "--steps", "6", "--img-size", "32",
                        "--batch-size", "4", "--torch-trace", str(traces)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(list(traces.glob("*.pt.trace.json"))) == 2
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), str(traces)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 1 and "its steps cannot be found" in p.stderr and "enumerate(DataLoader)" in p.stderr


def test_an_nsys_report_of_two_ranks_gives_each_its_own_verdict(nsys, tmp_path, capsys, monkeypatch):
    """One nsys over torchrun records every rank's process: each is read on its own, its GPU work apart from the
    other's, and named by its pid. Made from a real report: its process's rows again as a second process's, 150 ms
    later, so that the GPU would look busier than it is if either's kernels were counted as the other's."""
    db = without_ranges(nsys, REFERENCE / "baseline.nsys-rep", tmp_path)
    con = sqlite3.connect(db)
    one = 1 << 24  # nsys's globalTid: the process's id from bit 24, the thread's below; a main thread's are equal
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        moved = [f"globalTid + {one} + ((globalTid >> 24) & 16777215 = globalTid & 16777215)" if c == "globalTid"
                 else f"{c} + 150000000" if c in ("start", "end") else c for c in cols]
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(moved)} FROM {table}")
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        moved = [f"globalPid + {one}" if c == "globalPid" else f"{c} + 150000000" if c in ("start", "end") else c
                 for c in cols]
        con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(moved)} FROM {table}")
    con.commit()
    con.close()
    assert analyze.main([str(db)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert len(lines) == 2 and lines[0].split(".pid")[1] != lines[1].split(".pid")[1]
    assert all(line.startswith("baseline.pid") and ": loading-bound -- 'get batch' takes 311 of 374 ms per step (83%) "
               "while the GPU idles 75%" in line for line in lines), lines
    assert len(list(tmp_path.glob("baseline.pid*_steps.csv"))) == 2

    # where the second rank's steps cannot be read, it is named, and the first keeps its verdict
    def load(path, step_range=None, process=None):
        if process is not None:
            raise tr.NoData(f"{path}: 2 steps found")
        return tr.load(path, step_range)
    monkeypatch.setattr(analyze, "load", load)
    assert analyze.main([str(db)]) == 1
    out, err = capsys.readouterr()
    assert re.fullmatch(r"analyze\.py: baseline\.pid\d+: \S+baseline\.sqlite: 2 steps found\n", err), err
    assert out.count(": loading-bound -- 'get batch' takes 311 of 374 ms") == 1


def test_a_threads_time_on_a_cpu_is_read_from_its_context_switches():
    """nsys's SCHED_EVENTS: the pin-memory thread of the loop's process on a CPU from 0 to 30, and from 50 on (still
    running at the window's end): 80 of the window 20-120. The same name in another process is not its."""
    con = sqlite3.connect(":memory:")
    one = 1 << 24
    pin, other = 7 * one + 9, 8 * one + 9  # (processes 7 and 8)
    con.executescript(f"""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE ThreadNames (nameId INTEGER, priority INTEGER, globalTid INTEGER);
        CREATE TABLE SCHED_EVENTS (start INTEGER, cpu INTEGER, isSchedIn INTEGER, globalTid INTEGER);
        INSERT INTO StringIds VALUES (1, 'pt_data_pin');
        INSERT INTO ThreadNames VALUES (1, 0, {pin}), (1, 0, {other});
        INSERT INTO SCHED_EVENTS VALUES (0, 0, 1, {pin}), (30, 0, 0, {pin}), (50, 0, 1, {pin}), (0, 1, 1, {other});
    """)
    assert tr.thread_busy(con, "pt_data_pin", 7 * one, 20, 120) == pytest.approx(0.8)
    assert tr.thread_busy(con, "pt_data_pin", 9 * one, 20, 120) is None


JOBS_ON_A_GPU = ROOT / "tests" / "fixtures" / "jobs-gpu"  # real traces of jobs of tests/jobs, each on a GPU


@pytest.mark.xdist_group("nsys")  # (the nsys way exports the reports: in turn with the tests that run nsys)
@pytest.mark.parametrize("way", ["nsys", "torch"])
def test_real_gpu_traces_of_our_jobs_get_the_verdicts_they_were_written_to_have(way, tmp_path, request):
    """Each job's nsys report (analyze.py --run, its steps found from its CUDA calls) and torch.profiler trace
    (ProfilerStep#N), recorded on an H200 or H100, read here as the GPU's machine read them: the verdict the job
    was written to have, and the change it names."""
    shutil.copytree(JOBS_ON_A_GPU, tmp_path, dirs_exist_ok=True)  # (analyze.py writes its figures beside each)
    jobs = sorted(p.name for p in JOBS_ON_A_GPU.iterdir())
    if way == "nsys":
        request.getfixturevalue("nsys")  # (the report is exported to SQLite first)
        paths = [tmp_path / job / f"{job}.nsys-rep" for job in jobs]
    else:
        paths = [tmp_path / job for job in jobs]
    p = subprocess.run([sys.executable, str(ROOT / "analyze.py"), *map(str, paths)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    verdicts = {job: (verdict, change) for job, verdict, change in
                re.findall(r"^(\S+): (.+?) -- .*?Next: (.*)$", p.stdout, flags=re.M)}
    assert sorted(verdicts) == jobs and len(jobs) == 7, p.stdout
    for job, (verdict, change) in verdicts.items():
        assert verdict == WRITTEN_TO[job][0] and WRITTEN_TO[job][1] in change, (job, verdict, change)
    how = "CUDA calls that repeat once a step" if way == "nsys" else "torch.profiler's ProfilerStep#N"
    assert p.stdout.count(how) == 7, p.stdout
