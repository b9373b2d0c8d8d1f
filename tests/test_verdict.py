"""One verdict per variant: vd.decide() weighs the measured rates first, then the trace, and
analyze.py's lines, diagnosis.json, and results.md's table and sections all say what it says. Run
folders are built here where the rates and the trace disagree, with traces written as the SQLite that
nsys exports (the tables and columns analyze.py reads)."""
import itertools
import json
import os
import re
import shutil
import sqlite3

import pytest

import infer
import train
from conftest import FIXTURES, run_script
from starvation import ranges, records
from starvation import trace as tr
from starvation import verdict as vd

# ---- traces, as nsys exports them


def write_trace(path, steps: int, step_ms: float, phases: dict, kernels: tuple, copies: tuple, kind: int):
    """An nsys-like SQLite export: `steps` "Batch i" ranges of step_ms each, phase ranges and kernels at
    (start, end) ms offsets within each step, and copies (start, end, pinned) of copyKind `kind` (1: to
    the device, 2: to the host), 100 MB each."""
    ns = lambda ms: int(ms * 1e6)  # noqa: E731
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE NVTX_EVENTS (text TEXT, textId INTEGER, start INTEGER, end INTEGER, globalTid INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, shortName INTEGER, streamId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, copyKind INTEGER, srcKind INTEGER,
                                                 dstKind INTEGER, bytes INTEGER, streamId INTEGER);
        INSERT INTO StringIds VALUES (1, 'sm90_xmma_conv');
    """)
    for i in range(steps):
        t0 = i * step_ms
        con.execute("INSERT INTO NVTX_EVENTS VALUES (?, NULL, ?, ?, 7)", (f"Batch {i}", ns(t0), ns(t0 + step_ms)))
        for name, (a, b) in phases.items():
            con.execute("INSERT INTO NVTX_EVENTS VALUES (?, NULL, ?, ?, 7)", (name, ns(t0 + a), ns(t0 + b)))
        for a, b in kernels:
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 1, 7)", (ns(t0 + a), ns(t0 + b)))
        for a, b, pinned in copies:
            host = 1 if pinned else 0
            src, dst = (host, 2) if kind == 1 else (2, host)
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, ?, ?, ?, 7)",
                        (ns(t0 + a), ns(t0 + b), kind, src, dst, 100_000_000))
    con.commit()
    con.close()


def add_trace(run_dir, variant: str, **trace) -> None:
    """VARIANT.nsys-rep beside its export, which analyze.py reads as it is (it is newer than the report)."""
    rep = run_dir / f"{variant}.nsys-rep"
    rep.write_bytes(b"a report")
    os.utime(rep, (1, 1))
    write_trace(run_dir / f"{variant}.sqlite", **trace)
    path = run_dir / f"{variant}.run1.json"
    record = records.from_file(json.loads(path.read_text()), path)
    (run_dir / f"{variant}.nsys.json").write_text(json.dumps(records.for_file(dict(
        record, profiled="nsys", profiled_steps=10, profiled_steps_per_s=record["steps_per_s"]))))


# what every section says about a variant: analyze.py's line, diagnosis.json, the table's cell, the section

def verdicts(run_dir, variant: str) -> dict:
    analyzed = run_script("analyze.py", str(run_dir))
    assert analyzed.returncode == 0, analyzed.stderr
    compared = run_script("compare.py", str(run_dir))
    assert compared.returncode == 0, compared.stderr
    md = (run_dir / "results.md").read_text()
    line = next(x for x in analyzed.stdout.splitlines() if x.startswith(f"{variant}: "))
    row = next(x for x in md.splitlines() if x.startswith(f"| {variant} "))  # the headline's
    section = next(x for x in md.splitlines() if x.startswith(f"- **{variant}: "))
    return dict(analyze=line.split(" -- ")[0][len(variant) + 2:],
                record=json.loads((run_dir / "diagnosis.json").read_text())[variant]["verdict"],
                table=re.sub(r"^\[(.*)\]\(.*\)$", r"\1", row.rstrip(" |").split(" | ")[-1]),
                section=section[len(variant) + 6:].split(".** ")[0], line=line, section_line=section)


@pytest.fixture
def loader_bound_run(tmp_path):
    """H200 records (16 workers): prefetch's loop waits 69% of the window and its loader alone makes 13.1
    batches/s against a ceiling of 16.7; its 10 traced steps, fed from the queue, look GPU-bound."""
    d = tmp_path / "train-run"
    shutil.copytree(FIXTURES / "run-h200-steady", d)
    add_trace(d, "prefetch", steps=12, step_ms=60, kind=1, kernels=((1, 59.8),), copies=((0.5, 4.1, True),),
              phases={"get batch": (0, 0.6), "Compute": (0.7, 59)})
    return d


def test_loader_bound_rates_outrank_a_gpu_bound_trace_everywhere(loader_bound_run):
    said = verdicts(loader_bound_run, "prefetch")
    assert said["analyze"] == said["record"] == said["table"] == said["section"] == "loader-bound: pinning caps it"
    # one sentence gives both figures: the window's wait, and what the traced steps looked like
    assert "the loop waits for data 69% of the window" in said["section_line"]
    assert "the profiled steps were fed from what was queued and look GPU-bound (the GPU is busy" in said["line"]
    assert "Next: let the workers write into page-locked shared memory (--pool)" in said["section_line"]
    assert "--amp" not in said["section_line"]


def infer_record(variant: str, rate: float, wait: float, **settings) -> dict:
    """A part-2 record as infer.py writes it, with the fields the table and the verdict read."""
    return records.for_file(dict(study="infer", variant=variant, preset=variant, data_on_gpu=variant.startswith("ceiling"),
                compute_key="segmentation, fp32 scores out", steps=40, warmup=17, steps_per_s=rate,
                images_per_s=16 * rate, data_wait_ms_mean=wait * 1e3 / rate, data_wait_ms_median=wait * 1e3 / rate,
                data_wait_ms_p90=wait * 1e3 / rate, data_wait_share=wait, settled=True, cpu_count=16,
                settings=dict(dict(workers=0, pool=False, pinned=False, streams=False, uint8_out=False), **settings)))


@pytest.fixture
def output_bound_run(tmp_path):
    """Part 2 as the H200 measured it: streams makes 2.6 batches/s, its 4 workers alone process 2.6, the GPU
    makes 27.3; its device-to-host copy is pinned and 91% under kernels, and 'copy output' holds the loop
    while no buffer is free."""
    d = tmp_path / "infer-run"
    d.mkdir()
    (d / "env.json").write_text(json.dumps(dict(gpu="NVIDIA H200", study="infer",
                                                variants=["baseline", "streams", "ceiling"])))
    streams = dict(workers=4, pool=True, pinned=True, streams=True)
    for name, record in (("baseline", infer_record("baseline", 1.0, 0.99)),
                         ("streams", infer_record("streams", 2.6, 0.9, **streams)),
                         ("ceiling", infer_record("ceiling", 27.3, 0.0, **streams))):
        (d / f"{name}.run1.json").write_text(json.dumps(record))
    for name, rate in (("streams", 2.6), ("baseline", 1.3)):
        (d / f"{name}.output.json").write_text(json.dumps(records.for_file(dict(output_batches_per_s=rate,
                                                                                output_only=True))))
    add_trace(d, "streams", steps=12, step_ms=380, kind=2, kernels=((0, 36), (40, 42)), copies=((30, 36.4, True),),
              phases={"Compute": (0, 30), "copy output": (30, 256)})
    return d


def test_an_output_bound_variant_is_told_its_workers_are_the_cap(output_bound_run):
    said = verdicts(output_bound_run, "streams")
    verdict = "output processing caps it: 4 workers process 2.60 batches/s, the GPU makes 27.30"
    assert said["analyze"] == said["record"] == said["table"] == said["section"] == verdict
    assert "Next: more output workers (--workers 8)" in said["section_line"]
    assert "--pinned" not in said["section_line"] and "--streams" not in said["section_line"]
    md = (output_bound_run / "results.md").read_text()
    assert "Loader-bound" not in md and "waits for data" not in md  # part 2 has no loader
    assert "- **baseline: output processing on the main thread.**" in md
    assert "processes every batch, at 1.30 batches/s when it does nothing else" in md


def test_part_2s_ceiling_is_not_told_to_try_part_1s_flags(output_bound_run):
    assert run_script("compare.py", str(output_bound_run)).returncode == 0
    line = next(x for x in (output_bound_run / "results.md").read_text().splitlines() if x.startswith("- **ceiling: "))
    assert line.startswith("- **ceiling: the ceiling.**") and "--amp" not in line and "--channels-last" not in line


def test_a_loader_that_pins_nothing_is_not_said_to_lack_a_workers_alone_figure():
    """The study's workers step on the H200: its loader alone (12.2 batches/s, pageable copies included) is
    short of the ceiling; with no pinning stage there is no workers-alone rate to set one apart."""
    r = vd.Rates("train", 7.57, ceiling=16.55, alone=12.2, wait_share=0.01, settings=dict(workers=16))
    said = vd.decide(r, None)
    assert said["verdict"] == "loader-bound" and "workers-alone" not in said["why"] and "stages" not in said["why"]


@pytest.mark.parametrize("rate, alone, verdict", [
    (27.2, None, "at its ceiling"),       # uint8 on the H200: its own ceiling's rate, the loop hardly on the path
    (2.6, 2.6, "output processing caps it: 4 workers process 2.60 batches/s, the GPU makes 27.30"),
    (2.6, 9.0, "output-path-bound"),      # its workers keep up: the rates do not name the stage
    # streams and pinned on the H200, process to process: the band holds them all (NEAR_ALONE)
    *[(rate, alone, f"output processing caps it: 4 workers process {alone:.2f} batches/s, the GPU makes 27.30")
      for rate, alone in ((11.56, 14.96), (12.55, 13.82), (11.92, 13.07), (14.30, 13.06), (10.60, 12.42))],
    (2.6, 1.9, "output-path-bound"),      # alone well below the run: measured low, it proves nothing
])
def test_part_2_rates_alone(rate, alone, verdict):
    r = vd.Rates("infer", rate, ceiling=27.3, alone=alone, wait_share=0.01 if rate > 27 else 0.9, cpus=16,
                      settings=dict(workers=4, pool=True, pinned=True, streams=True, uint8_out=rate > 27))
    assert vd.decide(r, None)["verdict"] == verdict

# ---- the advice: a step not taken, with a flag its script has


def flags_of(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


SCRIPTS = {"train": (train.PRESETS, train.TRAIN_DEFAULTS, flags_of(train.build_parser())),
           "infer": (infer.PRESETS, infer.INFER_DEFAULTS, flags_of(infer.preset_parser("infer.py",
               "", infer.InferConfig, infer.PRESETS, "", "baseline", infer.GROUPS)))}
CAUSES = sorted({c for c in vd.TRACE_CAUSES.values()} | {"pinning", "making", None}, key=str)


@pytest.mark.parametrize("study, variant, cause", [
    (study, variant, cause) for study, (presets, _, _) in SCRIPTS.items()
    for variant, cause in itertools.product(presets, CAUSES)])
def test_advice_names_a_step_not_taken_with_a_flag_the_script_has(study, variant, cause):
    presets, defaults, flags = SCRIPTS[study]
    settings = dict(defaults, **presets[variant][0])
    advice = vd.next_step(cause, study, settings, cpus=16)
    named = re.findall(r"--[a-z0-9-]+", advice)
    assert set(named) <= flags, advice
    assert "--variant" not in named and f"({variant})" not in advice
    for flag in named:  # a switch it already has on, or the value it already runs, is no next step
        key = flag[2:].replace("-", "_")
        value = re.search(rf"{flag} (\S+?)\)?(?:[ ,:)]|$)", advice)
        if isinstance(settings.get(key), bool):
            assert not settings[key], f"{variant} already has {flag}: {advice}"
        elif value and value.group(1) != "N":
            assert str(settings.get(key)) != value.group(1), f"{variant} already runs {flag} {value.group(1)}"


def test_the_phase_names_are_the_scripts_ranges():
    """analyze.py reads the ranges train.py and infer.py write, by name, and draws them in their colours: a
    renamed range would vanish from every diagnosis without a word."""
    import inspect

    written = set()
    for script in (train, infer):
        written |= set(re.findall(r'mark\(f?"([a-zA-Z ]+)', inspect.getsource(script)))
    assert written - {"Batch "} == set(tr.PHASES) and set(ranges.RANGES) == {"Batch"} | set(tr.PHASES)
    for name, drawn in tr.PHASES.items():
        assert drawn == ranges.RANGES[name] or (ranges.RANGES[name], drawn) == ("yellow", "gold"), name


@pytest.mark.parametrize("settings, change", [
    (dict(gpu_decode=True), "--resized-cache"),
    (dict(gpu_decode=True, resized_cache=True), "decode the copy in the workers (--no-gpu-decode)"),
    (dict(gpu_decode=True, resized_cache=True, augment=True), "(--gpu-decoder nvjpeg --cpu-decoded auto, sized"),
    (dict(gpu_decode=True, resized_cache=True, cpu_decoded=16), "--no-gpu-decode"),
    (dict(gpu_decode=True, resized_cache=True, augment=True, img_size=512, cpu_decoded=32),
     "a smaller copy (--cache-size 640)"),
    (dict(gpu_decode=True, resized_cache=True, augment=True, img_size=512, cpu_decoded=32, cache_size=640),
     "a smaller copy (--cache-size 512)"),
    ({}, "workers where cores are spare"),
])
def test_work_beside_the_step_is_moved_off_the_gpu_or_made_smaller(settings, change):
    """The GPU's decode and crops run on streams of their own, beside the step: the next step lessens them. On two
    H100 hosts (results/20261207T1017Z-NVIDIA-H100-acceptance, results/20261207T1407Z-NVIDIA-H100-second-host) 16
    workers decoded the copy at the training size at 1.00 of the ceiling, against the device's 0.97; with
    --augment, 32 images of each batch to them made 0.97 on one host and 0.76-0.85 on the other, whose cores were
    slower, so the share is sized from the rates a run measures (--cpu-decoded auto)."""
    t = vd.verdict(dict(step_ms=22.5, gpu_busy_pct=92.0, gpu_idle_pct=8.0, kernel_busy_pct=91.0, h2d_ms=0.6,
                        h2d_overlap_pct=94.0, pageable_copies=0, pinned_copies=65, blocked_in_copy_ms=0.0,
                        munmap_in_copy_ms=None, get_batch_ms=3.2, side_kernel_ms=2.0))
    assert t["verdict"] == "GPU work beside the step" and "2.0 of 22 ms per step (9%)" in t["why"]
    r = vd.Rates("train", 44.4, ceiling=47.3, wait_share=0.02, settings=dict(settings, jpeg=True, workers=16), cpus=16)
    assert change in vd.decide(r, t)["change"]


def test_cpu_decoded_auto_that_chose_none_is_not_proposed_again():
    """The record keeps the N that --cpu-decoded auto chose, 0 where the workers' rates leave them nothing to
    take, and its photos the line that says how: the next step is then the smaller copy, not auto again."""
    s = dict(gpu_decode=True, resized_cache=True, augment=True, img_size=512, cpu_decoded=0, workers=16)
    assert "--cpu-decoded auto" in vd.next_step("decoding", "train", s, 16, dict(cpu_decoded_auto=None))
    said = dict(cpu_decoded_auto="--cpu-decoded auto: 0 of each batch to the workers, from rates measured now")
    for cause in ("decoding", "decode thread", "beside"):
        assert vd.next_step(cause, "train", s, 16, said).startswith("a smaller copy (--cache-size"), cause


@pytest.mark.parametrize("settings, alone, workers, verdict, change", [
    # the GPU decodes (the loader alone includes it); the workers only read bytes, far faster
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=16), 15.2, 250.0,
     "decoding caps it: 973 images/s, the step takes 3335 images/s", "--resized-cache"),
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=16, resized_cache=True), 15.2, 250.0,
     "decoding caps it: 973 images/s, the step takes 3335 images/s", "--no-gpu-decode"),
    # fewer than 16 workers (8 fell behind on one H100 host's cores), or --augment's crops of a copy at twice the
    # size: the workers take a share of each batch, sized from measured rates
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=4, resized_cache=True), 15.2, 250.0,
     "decoding caps it: 973 images/s, the step takes 3335 images/s", "(--cpu-decoded auto,"),
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=8, resized_cache=True), 15.2, 250.0,
     "decoding caps it: 973 images/s, the step takes 3335 images/s", "(--cpu-decoded auto,"),
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=16, resized_cache=True, augment=True, img_size=512), 15.2,
     250.0, "decoding caps it: 973 images/s, the step takes 3335 images/s", "--gpu-decoder nvjpeg --cpu-decoded auto"),
    (dict(jpeg=True, gpu_decode=True, pool=True, workers=16, resized_cache=True, cpu_decoded=16), 15.2, 250.0,
     "decoding caps it: 973 images/s, the step takes 3335 images/s", "--no-gpu-decode"),
    # the workers decode on the CPU, and alone make fewer batches than the step takes
    (dict(jpeg=True, pool=True, workers=8), 27.9, 27.0,
     "decoding caps it: 1728 images/s, the step takes 3335 images/s", "--gpu-decode"),
])
def test_decoding_that_cannot_keep_up_is_named_with_its_rates_and_fix(settings, alone, workers, verdict, change):
    """Camera-size photos: the decoder, not the copies or the pool, caps the pipeline; the verdict says so
    with the images/s on each side, and names the fix that exists."""
    r = vd.Rates("train", min(alone, workers) * 0.98, ceiling=52.11, alone=alone, workers_alone=workers,
                 wait_share=0.6, settings=dict(settings, batch_size=64), cpus=16, batch=64)
    d = vd.decide(r, None)
    assert d["verdict"] == verdict and d["cause"] == "decoding" and change in d["change"]


def test_a_cpu_decoder_far_below_the_step_is_named_though_the_loader_alone_came_out_low():
    """4032x3024 photos on the H200, decoded on 16 CPU workers: the window (still settling) made 2.00 steps/s,
    the loader alone 1.69 and the workers alone 1.66, against a ceiling of 52.58: the decoder is the cap."""
    r = vd.Rates("train", 2.00, ceiling=52.58, alone=1.69, workers_alone=1.66, wait_share=0.98,
                 settings=dict(jpeg=True, pool=True, workers=16, batch_size=64), cpus=16, batch=64)
    d = vd.decide(r, None)
    assert d["verdict"] == "decoding caps it: 106 images/s, the step takes 3365 images/s"
    assert "--gpu-decode" in d["change"]
    # with the record's survey of the folder, the reason says what makes the photos costly to decode
    photos = dict(median_pixels="4032x3024", bits_per_pixel=2.2, progressive_share=0.1)
    d = vd.decide(vd.Rates(**{**r.__dict__, "photos": photos}), None)
    assert ("so decoding the photos is the cap (median 4032x3024, 2.2 bits a pixel, 10% progressive)"
            in d["why"])


def test_a_folder_like_a_users_whose_workers_cap_the_gpu_path_is_told_what_they_do_and_the_copy():
    """A camera-like folder on the H200 (results/20261204T0240Z-NVIDIA-H200-real-folders, records run3-*: 640
    files, 10% progressive, 2.15 bits a pixel): jpeg-gpu on 16 cores made 35.36 steps/s against a ceiling of
    51.79, its loader alone 36.55 batches/s and its workers alone 38.91. The workers are the cap: the verdict
    says what they do for a batch (the routing in the record), and the change is the copy of its progressive
    files as baseline ones (on an H100, 0.72-0.73 of the ceiling against 0.67 on 16 cores, 0.66 against 0.42-0.47
    on 8: results/20261206T1900Z-NVIDIA-H100-kinds-baseline-copy), then the copy at the training size."""
    folder = FIXTURES.parent.parent / "results" / "20261204T0240Z-NVIDIA-H200-real-folders" / "records"
    run = json.loads((folder / "run3-cam16.json").read_text())
    alone = json.loads((folder / "run3-cam16-alone.json").read_text())
    ceiling = json.loads((folder / "run3-ceiling.json").read_text())
    r = vd.Rates("train", run["steps_per_s"], ceiling=ceiling["steps_per_s"], alone=alone["loader_batches_per_s"],
                 workers_alone=alone["workers_batches_per_s"], wait_share=run["data_wait_share"],
                 settings=run["settings"], cpus=run["cpu_count"], batch=64, photos=run["photos"])
    d = vd.decide(r, None)
    assert d["verdict"] == "loader-bound: making the batches caps it" and d["cause"] == "making"
    assert ("they read every file's bytes (778 kB on average) and decode 65 of the 640 files themselves (64 "
            "progressive, 4 beyond a slot's bytes, 1 PNG)") in d["why"]
    assert d["change"].startswith("read the 64 progressive files from a copy made once as baseline files "
                                  "(--baseline-copy)")
    r.settings = dict(r.settings, baseline_copy=True)
    assert "--resized-cache" in vd.decide(r, None)["change"]


@pytest.mark.parametrize("settings, thread, change", [
    # the camera-like folder with --baseline-copy on the H200 (results/20261206T2130Z-NVIDIA-H100-planes-copy,
    # records cam-3-baseline and cam-2-planes-pf3: 34.89 and 41.71 steps/s against a ceiling of 52.50)
    (dict(), dict(threads=1, busy_share=0.99, busy_ms_median=31.9, cpu_ms_median=31.7), "--gpu-decoder nvjpeg"),
    (dict(gpu_decoder="nvjpeg"), dict(threads=1, busy_share=0.99, busy_ms_median=22.6, cpu_ms_median=22.4),
     "--decode-threads 3"),
    (dict(gpu_decoder="nvjpeg", decode_threads=2), dict(threads=2, busy_share=0.95, busy_ms_median=23.0,
                                                        cpu_ms_median=22.0), "--decode-threads 3"),
    (dict(gpu_decoder="nvjpeg", decode_threads=3), dict(threads=3, busy_share=0.95, busy_ms_median=139.1,
                                                        cpu_ms_median=137.2), "--resized-cache"),
    # the copy with --augment on an H100 (results/20261207T0822Z-NVIDIA-H100-augment-targets, records
    # cam-copy-1-copy768-augment): one thread busy 98%, most of it the copy's decode; nor does a missing copy
    # ask for threads
    # ... and the next step is the planes with a share of each batch to the workers, sized from measured rates
    # (32 of 64 made 0.972 on one H100 host and 0.76-0.85 on another: results/20261207T1407Z-NVIDIA-H100-second-
    # host), then a smaller copy
    (dict(resized_cache=True, augment=True, img_size=512), dict(threads=1, busy_share=0.98, busy_ms_median=22.0,
                                                                cpu_ms_median=16.1),
     "--gpu-decoder nvjpeg --cpu-decoded auto"),
    (dict(resized_cache=True, augment=True, img_size=512, gpu_decoder="nvjpeg"),
     dict(threads=1, busy_share=0.98, busy_ms_median=22.0, cpu_ms_median=16.1), "(--cpu-decoded auto,"),
    (dict(resized_cache=True, augment=True, img_size=512, gpu_decoder="nvjpeg", cpu_decoded=32),
     dict(threads=1, busy_share=0.98, busy_ms_median=22.0, cpu_ms_median=16.1), "a smaller copy (--cache-size"),
    (dict(resized_cache=True, augment=True, img_size=512, cache_size=512, gpu_decoder="nvjpeg", cpu_decoded=32),
     dict(threads=1, busy_share=0.98, busy_ms_median=22.0, cpu_ms_median=16.1), "fewer or smaller photos"),
    (dict(augment=True, gpu_decoder="nvjpeg"), dict(threads=1, busy_share=0.98, busy_ms_median=22.0,
                                                    cpu_ms_median=16.1), "--resized-cache"),
])
def test_a_decoding_thread_busy_the_whole_window_is_named_before_the_workers(settings, thread, change):
    """The decoding thread's own time, in the record, says what the alone rates can only infer: busy 99% of the
    window, its host work capped the path. The change is a decoder whose calls hold it for less (measured
    1.17-1.28 times torchvision's rate there), then more threads to share the planes' host work, then the copy;
    a thread with time to spare names nothing."""
    r = vd.Rates("train", 34.89, ceiling=52.50, alone=None, workers_alone=None, wait_share=0.60,
                 settings=dict(settings, jpeg=True, gpu_decode=True, pool=True, workers=16, batch_size=64,
                               baseline_copy=True), cpus=16, batch=64, decode_thread=thread)
    d = vd.decide(r, None)
    whose = (f"the host work of its {thread['threads']} decoding threads" if thread["threads"] > 1
             else "the decoding thread's host work")
    assert d["verdict"] == f"decoding caps it: {whose}" and d["cause"] == "decode thread"
    assert f"busy {thread['busy_share']:.0%} of the window, {thread['busy_ms_median']:.1f} ms a batch" in d["why"]
    assert change in d["change"]
    idle = vd.decide(vd.Rates(**{**r.__dict__, "decode_thread": dict(thread, busy_share=0.5)}), None)
    assert idle["cause"] != "decode thread"
