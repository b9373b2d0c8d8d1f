"""compare.py on real nsys output from the H200, and on broken run folders."""
import json
import re
import shutil

import pytest

import compare
from conftest import FIXTURES, run_script
from starvation import records, writes


DEEP = "a JSON list nested 100,000 deep"  # stands for itself in a test's name, made only in its body


def tabulate(run_dir) -> str:
    """compare.py on one run folder, in-process: the results.md it wrote."""
    assert compare.main([str(run_dir)]) == 0
    return (run_dir / "results.md").read_text()


def rows_of(md: str, variant: str) -> list[str]:
    """The variant's rows: in the headline table, then in the trace table."""
    return [line for line in md.splitlines() if line.startswith(f"| {variant} ")]


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run-h200"
    shutil.copytree(FIXTURES / "run-h200", d)
    for f in (FIXTURES / "nsys-2023.4-h200-async").iterdir():
        shutil.copy(f, d)
    return d


def test_golden_results_md(run_dir):
    p = run_script("compare.py", str(run_dir))
    assert p.returncode == 0, p.stderr
    written = (run_dir / "results.md").read_text()
    assert written == (FIXTURES / "golden-run-h200.md").read_text()
    assert p.stdout.strip() == f"compare.py: {run_dir / 'results.md'}"  # the table is in the file, not the log
    assert (run_dir / "steps_per_s.png").stat().st_size > 1000


def test_what_a_report_lacks_is_named_not_a_blank(run_dir):
    """The fixture's report lost the nvtx package's ranges to this nsys: analyze.py said so in
    diagnosis.json, and the table names it on the variant."""
    v = records.load_variant(run_dir, "async", json.loads((run_dir / "diagnosis.json").read_text()),
                             run_dir / "diagnosis.json")
    assert v.problems[0].startswith("no NVTX 'Batch i' ranges") and "0.2.12" in v.problems[0]
    assert records.load_variant(run_dir, "baseline", {}, run_dir / "diagnosis.json").problems == ["no nsys report"]


def test_trace_figures_are_analyze_pys(run_dir):
    """compare.py reads no trace: H2D and kernel time per step, GB/s and the copy kinds are the ones
    analyze.py put in diagnosis.json."""
    per_step = dict(steps=10, h2d_ms=3.61, h2d_gb_per_s=55.43, kernel_ms=60.12, h2d_pageable_copies=0,
                    h2d_pinned_copies=2)
    metrics = dict(gpu_idle_pct=3.0, h2d_overlap_pct=0.0)
    (run_dir / "diagnosis.json").write_text(json.dumps({"async": dict(
        name="async", verdict="copy not overlapped", why="w", change="c", metrics=metrics, per_step=per_step,
        problems=[])}))
    record = json.loads((run_dir / "async.run1.json").read_text())
    (run_dir / "async.nsys.json").write_text(json.dumps(dict(record, profiled="nsys")))
    md = tabulate(run_dir)
    headline, traced = rows_of(md, "async")
    assert traced.endswith("| 3.6 | 55.4 | 60.1 | 0 / 2 | 3% | 0% |") and headline.endswith("| copy not overlapped |")


def test_missing_pieces_are_footnoted_not_crashes(run_dir):
    (run_dir / "async.run1.json").unlink()
    (run_dir / "failures.tsv").write_text("async\trun 1 exited 1\tlogs/async.run1.log\n")
    md = tabulate(run_dir)
    md = (run_dir / "results.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| async ["))
    cells = row.strip("| ").split(" | ")[1:]
    k = cells[0].split("[")[1].rstrip("]")
    assert set(cells) == {f"- [{k}]"} and f"[{k}] async: run 1 exited 1" in md


@pytest.mark.parametrize("name, content, message", [
    ("baseline.run1.json", "{not json", "baseline.run1.json: not valid JSON"),
    ("baseline.run1.json", '{"schema": 2, "steps_per_s": 1}', "baseline.run1.json: no key 'images_per_s'"),
    # a record of an older schema: part 2's figures were named in part 1's words
    ("async.run1.json", {"schema": 1}, "async.run1.json: a record of schema 1, and compare.py reads schema 2"),
    ("diagnosis.json", '{"async": {"verdict": "GPU-bound"}}', "diagnosis.json: no key 'why'"),
    ("diagnosis.json", "[]", "diagnosis.json: expected a JSON object"),
    ("failures.tsv", "just one field\n", "failures.tsv: expected"),
    ("async.run1.json", None, "async.run1.json: 'steps_per_s' should be a positive number, got \"fast\""),
    ("async.run1.json", {"steps_per_s": None}, "'steps_per_s' should be a positive number, got null"),
    ("ceiling.run1.json", {"data_on_gpu": "false"}, "ceiling.run1.json: 'data_on_gpu' should be true or false"),
    ("async.run1.json", {"data_wait_share": "5%"}, "'data_wait_share' should be a number, got \"5%\""),
    ("env.json", {"gpu": 3}, "env.json: 'gpu' should be a string, got 3"),
    ("baseline.run1.json", b"\xff\xfe\x00garbage", "baseline.run1.json: not valid JSON"),
    ("async.loader.json", '{"schema": 2, "loader_batches_per_s": -1}', "'loader_batches_per_s' should be a positive number"),
    # nested fields, named by their path (a per-step entry without its kernel time was a KeyError)
    ("diagnosis.json", json.dumps({"async": dict(
        verdict="GPU-bound", why="w", change="c", metrics=dict(gpu_idle_pct=3.0, h2d_overlap_pct=0.0),
        per_step=dict(h2d_ms=3.6, h2d_gb_per_s=55.4, h2d_pageable_copies=0, h2d_pinned_copies=2))}),
     "diagnosis.json: 'async.per_step' has no key 'kernel_ms'"),
    ("env.json", {"variants": ["async", 2]}, "env.json: 'variants' should be a list of strings"),
    ("env.json", '{"variants": ["async"]}', "env.json: no key 'gpu'"),
    ("async.run1.json", {"study": "infer"}, "a record of infer.py's study in a folder of train.py's"),
    ("env.json", "[1, 2]", "env.json: expected a JSON object"),
    ("async.run1.json", DEEP, "async.run1.json: nested too deep to be a record"),
])
def test_a_malformed_file_stops_with_one_line(run_dir, name, content, message):
    path = run_dir / name
    if content == DEEP:
        content = "[" * 100_000 + "]" * 100_000
    if content is None:  # the one that reads like a word
        content = dict(json.loads(path.read_text()), steps_per_s="fast")
    if isinstance(content, dict):
        content = json.dumps(dict(json.loads(path.read_text()), **content))
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    p = run_script("compare.py", str(run_dir))
    assert p.returncode == 2
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_two_studies_never_share_a_table(run_dir, tmp_path):
    other = tmp_path / "infer-run"
    shutil.copytree(run_dir, other)
    env = json.loads((other / "env.json").read_text())
    (other / "env.json").write_text(json.dumps(dict(env, study="infer", variants=[])))
    for record in other.glob("*.run*.json"):
        record.unlink()
    p = run_script("compare.py", str(run_dir), str(other))
    assert p.returncode == 2 and "one study per table" in p.stderr and f"{other} is infer.py's" in p.stderr


def test_not_a_run_folder(tmp_path):
    p = run_script("compare.py", str(tmp_path))
    assert p.returncode == 2 and "no env.json" in p.stderr


def test_several_runs_side_by_side(run_dir, tmp_path):
    other = tmp_path / "run-b"
    shutil.copytree(run_dir, other)
    out = tmp_path / "both.md"
    p = run_script("compare.py", str(run_dir), str(other), "-o", str(out))
    assert p.returncode == 0, p.stderr
    table = out.read_text()
    assert "run-h200 steps/s" in table and "run-b steps/s" in table
    assert "| async | 15.78 | 1010 | 94% | 15.78 | 1010 | 94% | 1.00 |" in table


def test_a_run_carried_by_queued_batches_is_footnoted(run_dir):
    path = run_dir / "async.run1.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps(dict(record, fell_behind=True, steps_per_s_second_half=11.5)))
    md = tabulate(run_dir)
    note = next(line for line in md.splitlines() if "throughput fell during the window" in line)
    k = note.split()[0]  # "[k] async: in 1 of 1 runs ..."
    assert note.startswith(f"{k} async: in 1 of 1 runs throughput fell during the window (second half: 11.50 steps/s)")
    assert k in rows_of(md, "async")[0].split("|")[1]  # flagged on the variant's name


def test_a_run_that_never_settled_is_footnoted(run_dir):
    path = run_dir / "async.run1.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), slid_steps=100, settled=False)))
    md = tabulate(run_dir)
    note = next(line for line in md.splitlines() if "halves still differed" in line)
    k = note.split()[0]
    assert note.startswith(f"{k} async: in 1 of 1 runs the window's halves still differed by more than 3% after "
                           "the window slid 100 steps: no steady state")
    assert note.endswith("no steady state within the run; run more --steps")  # its 30 steps were --steps 30
    assert k in rows_of(md, "async")[0].split("|")[1]


def test_every_footnote_is_referenced_in_the_table(run_dir):
    """A footnote is written only for a cell, or a name, that points at it."""
    md = tabulate(run_dir)
    lines = md.splitlines()
    table = "\n".join(line for line in lines if line.startswith("| "))
    notes = [line.split()[0] for line in lines if re.match(r"\[\d+\] ", line)]
    assert notes, "the fixture run should have some footnotes"
    assert [k for k in notes if k not in table] == []


def test_ranks_and_scaling_across_gpu_counts(run_dir, tmp_path):
    """A --gpus 2 run folder: per-rank data wait, and img/s compared with the 1-GPU run."""
    two = tmp_path / "run-x2"
    shutil.copytree(run_dir, two)
    env = json.loads((two / "env.json").read_text())
    (two / "env.json").write_text(json.dumps(dict(env, gpus=2)))
    for path in two.glob("*.run1.json"):
        r = json.loads(path.read_text())
        ranks = [dict(rank=k, data_wait_ms_median=1.0 + k) for k in (0, 1)]
        path.write_text(json.dumps(dict(r, world_size=2, images_per_s=1.9 * r["images_per_s"], ranks=ranks)))
    p = run_script("compare.py", str(run_dir), str(two))
    assert p.returncode == 0, p.stderr
    md = (two / "results.md").read_text()
    assert "2 x NVIDIA H200 (torchrun, one DDP process per GPU)" in md
    assert "data wait ms/step, rank 0 / 1" in md and "| 1.0 / 2.0 |" in md
    assert "run-x2 (2 GPUs) steps/s" in p.stdout and "img/s, run-x2 / run-h200" in p.stdout
    assert "| async | 15.78 | 1010 | 94% | 15.78 | 1918 | 94% | 1.90 |" in p.stdout


def test_every_row_has_every_column(run_dir):
    """A variant with no unprofiled run, in a diagnosed run: dashes across the diagnosis columns too."""
    (run_dir / "async.run1.json").unlink()
    (run_dir / "diagnosis.json").write_text(json.dumps({"baseline": {"name": "baseline", "error": "no trace"}}))
    md = tabulate(run_dir)
    tables = [block.splitlines() for block in re.findall(r"(?m)(?:^\| .*\n)+", md)]
    assert len(tables) == 2  # the headline, then the traces
    for rows in tables:
        assert len({row.count(" | ") for row in rows}) == 1, rows


def test_verdicts_from_measured_rates_name_the_cap(tmp_path):
    """Real H200 records (16 workers): prefetch's loop waits and its loader alone is below the ceiling,
    with the workers alone well above it, so pinning is the cap; the pool's loader keeps up."""
    d = tmp_path / "steady"
    shutil.copytree(FIXTURES / "run-h200-steady", d)
    md = tabulate(d)
    rows = {v: rows_of(md, v)[0] for v in ("prefetch", "pool", "ceiling")}
    assert "| 13.1 (workers alone 24.0) | 69% (54.8) |" in rows["prefetch"]
    assert rows["prefetch"].endswith("| loader-bound: pinning caps it |")
    assert rows["pool"].endswith("| at its ceiling |")
    assert rows["ceiling"].endswith("| the ceiling |")
    assert "- **prefetch: loader-bound: pinning caps it.** the loader alone delivers 13.1 batches/s and the GPU " \
           "trains 16.7 (ceiling); the loop waits for data 69% of the window" in md


@pytest.mark.parametrize("loader, workers, verdict, why", [
    (13.1, None, "loader-bound", "which of its stages caps it, the rates do not say (no workers-alone figure)"),
    (15.0, 16.5, "loader-bound", "which of its stages caps it, the rates do not say (the workers alone make "
                                 "16.5 batches/s, neither short of the ceiling nor well above the pipeline)"),
    (13.1, 14.0, "loader-bound: making the batches caps it", "the workers alone make 14.0 batches/s, so making "
                                                             "the batches is the cap"),
])
def test_the_cap_is_named_only_when_the_workers_alone_show_it(tmp_path, loader, workers, verdict, why):
    """A loader alone short of the ceiling includes its copies: only the workers alone, measured short
    of the ceiling too, say that making the batches is the cap (as the H200 showed, the unpinned
    `workers` step's loader alone was short while its workers made 25 batches/s)."""
    d = tmp_path / "steady"
    shutil.copytree(FIXTURES / "run-h200-steady", d)
    path = d / "prefetch.loader.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), loader_batches_per_s=loader,
                                    workers_batches_per_s=workers)))
    md = tabulate(d)
    assert rows_of(md, "prefetch")[0].endswith(f"| {verdict} |")
    assert f"- **prefetch: {verdict}.** the loader alone delivers {loader} batches/s" in md and why in md


def test_a_cpu_run_shows_what_it_proves_and_no_throughput(run_dir):
    """A CPU run's figures are noise, ratios and changes under nsys included: its one table says that each
    variant ran, over how many runs and steps, and that its profile holds the study's ranges."""
    env = json.loads((run_dir / "env.json").read_text())
    (run_dir / "env.json").write_text(json.dumps(dict(env, gpu="cpu")))
    path = run_dir / "ceiling.run1.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), steps_per_s=1.0)))  # faster than its ceiling
    (run_dir / "diagnosis.json").write_text(json.dumps({"async": dict(
        name="async", verdict="no GPU activity", why="w", change="c", metrics=dict(steps=6, gpu_idle_pct=None))}))
    md = tabulate(run_dir)
    assert "Its throughput would be noise, and says nothing about a GPU, so it is left out" in md
    assert "steps/s" not in md and "%" not in md and "## Diagnosis" not in md
    assert not (run_dir / "steps_per_s.png").exists()  # what it can show: the share of each window it waited
    assert (run_dir / "data_wait.png").stat().st_size > 1000 and "](data_wait.png)" in md
    (table,) = re.findall(r"(?m)(?:^\| .*\n)+", md)
    assert table.splitlines()[0] == "| variant | ran | runs x window | nsys report | steps in its trace |"
    assert rows_of(md, "async")[0] == "| async | yes | 1 x 30 steps | async.nsys-rep | 6 |"
    assert rows_of(md, "ceiling")[0].startswith("| ceiling | yes | 1 x 30 steps | - [")


def test_a_loader_alone_slower_than_the_training_it_fed_proves_nothing(tmp_path):
    """As async measured on the H200: 15.6 steps/s without waiting, its loader alone 14.7 batches/s."""
    d = tmp_path / "steady"
    shutil.copytree(FIXTURES / "run-h200-steady", d)
    path = d / "prefetch.run1.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), steps_per_s=15.6, data_wait_share=0.001)))
    path = d / "prefetch.loader.json"
    path.write_text(json.dumps(dict(json.loads(path.read_text()), loader_batches_per_s=14.7)))
    md = tabulate(d)
    row = rows_of(md, "prefetch")[0]
    assert row.endswith("| not bound by its rates |")
    path.write_text(json.dumps(dict(json.loads(path.read_text()), loader_batches_per_s=15.2)))
    row = rows_of(tabulate(d), "prefetch")[0]
    assert row.endswith("| loader-bound: pinning caps it |")  # 15.2 x 1.03 covers 15.6: consistent, a bound


def test_unwritable_outputs_end_in_one_line(run_dir, tmp_path):
    p = run_script("compare.py", str(run_dir), str(run_dir), "-o", str(tmp_path / "missing" / "both.md"))
    assert p.returncode == 2 and f"no folder {tmp_path / 'missing'}" in p.stderr and "Traceback" not in p.stderr
    (run_dir / "results.md").mkdir()  # results.md cannot be written: a folder stands there
    p = run_script("compare.py", str(run_dir))
    assert p.returncode == 2 and "compare.py: cannot write" in p.stderr and "Traceback" not in p.stderr


def test_an_interrupted_run_says_its_profiles_are_still_to_come(run_dir):
    (run_dir / "INCOMPLETE").write_text("interrupted\n")
    md = tabulate(run_dir)
    md = (run_dir / "results.md").read_text()
    assert "the run was interrupted" in md and "baseline: not profiled yet (the run was interrupted)" in md
    assert "--no-nsys, or no nsys found" not in md


def test_the_ceiling_is_known_by_its_record_not_its_name(run_dir):
    """A ceiling run under another name (a user's own folder) is still the ceiling: data_on_gpu says so."""
    shutil.move(run_dir / "ceiling.run1.json", run_dir / "resident.run1.json")
    env = json.loads((run_dir / "env.json").read_text())
    (run_dir / "env.json").write_text(json.dumps(dict(env, variants=[
        "resident" if v == "ceiling" else v for v in env["variants"]])))
    run = records.load_run(run_dir)
    resident = next(v for v in run.variants if v.name == "resident")
    assert resident.is_ceiling
    assert records.ceiling_for(next(v for v in run.variants if v.name == "async"), run.variants) is resident


def test_a_folder_that_is_a_link_loop_is_one_line(tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert compare.main([str(loop)]) == 2
    assert capsys.readouterr().err.strip() == f"compare.py: {loop}: not a folder"


def test_a_full_disk_names_the_file_it_could_not_write(run_dir, monkeypatch, capsys):
    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writes.os, "fsync", full)
    assert compare.main([str(run_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"compare.py: cannot write {run_dir / 'steps_per_s.png'} (No space left on device)"]
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_results_md_names_the_photo_folder_its_kinds_and_the_decoder(run_dir):
    """A run on a user's photos: results.md says what the folder held and which decoder read it."""
    record = run_dir / "async.run1.json"
    r = json.loads(record.read_text())
    r.update(data_dir="/data/mine", photos=dict(files=640, kinds={"baseline 4:2:0": 576, "progressive": 64},
                                                median_pixels="1600x1200", bits_per_pixel=2.15, to_workers=65,
                                                decoder="GPU (torchvision), 65 files to the workers"))
    record.write_text(json.dumps(r))
    md = tabulate(run_dir)
    assert ("Photos: `/data/mine`, 640 files (576 baseline 4:2:0, 64 progressive), median 1600x1200 pixels, 2.15 "
            "bits a pixel; decoded by async: GPU (torchvision), 65 files to the workers") in md
