"""infer.py on the CPU, at tiny sizes: every preset verified, the ceiling, a dead output worker, bad input."""
import json

import pytest
import torch

import infer
from conftest import refusal, run_script
from starvation import pool, records

TINY = ["--device", "cpu", "--img-size", "32", "--batch-size", "2", "--classes", "4", "--steps", "4",
        "--warmup", "1"]


def run_inprocess(*args: str, tmp_path) -> dict:
    out = tmp_path / "run.json"
    assert infer.main(infer.parse_config([*args, *TINY, "--json", str(out)])) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("variant", list(infer.PRESETS))
def test_every_preset_processes_what_the_device_produced(variant, tmp_path):
    r = run_inprocess("--variant", variant, "--workers", "0" if variant == "baseline" else "2", "--verify",
                      tmp_path=tmp_path)
    assert r["study"] == "infer" and r["preset"] == variant and not r["outputs_on_gpu"]
    # every batch issued is checked: the warm-up's, the window's, and those in flight when it closed
    assert r["verified_batches"] >= 5 and r["verify_mismatches"] == []
    assert r["output_bytes_per_batch"] == 2 * 32 * 32 * (1 if variant == "uint8" else 4 * 4)
    # in part 2's words, of the schema compare.py reads
    assert r["schema"] == records.SCHEMA and r["batches_per_s"] > 0 and "steps_per_s" not in r
    assert r["batch_ms_min"] <= r["batch_ms_median"] <= r["batch_ms_max"] and 0 <= r["output_path_share"] <= 1
    records.checked(r, "run", tmp_path / "run.json")  # the table reads it as it reads train.py's


@pytest.mark.parametrize("variant", ["pinned", "uint8"])
def test_the_ceiling_keeps_the_forward_and_drops_the_output_path(variant, tmp_path):
    r = run_inprocess("--variant", variant, "--outputs-on-gpu", tmp_path=tmp_path)
    assert r["outputs_on_gpu"] and r["output_bytes_per_batch"] == 0 and r["output_path_ms_mean"] == 0
    assert r["compute_key"] == infer.parse_config(["--variant", variant]).compute_key


def test_the_unsafe_variant_is_hidden_and_runs(tmp_path):
    assert "unsafe" not in run_script("infer.py", "--help").stdout
    r = run_inprocess("--variant", "pinned", "--unsafe-no-wait", "--verify", tmp_path=tmp_path)
    assert r["settings"]["unsafe_no_wait"]  # on a GPU --verify catches it; on the CPU every copy is synchronous


def test_a_dead_output_worker_ends_the_run_with_one_line():
    p = run_script("infer.py", "--variant", "pool", "--workers", "1", *TINY, "--inject-fault", "worker-crash",
                   timeout=120)
    assert p.returncode == 3
    assert p.stderr.strip().splitlines()[-1].startswith("error: an output worker died (exit code 9)")


@pytest.mark.parametrize("args, message", [
    (["--pinned", "--no-pool"], "--pinned page-locks the pool's buffers: add --pool"),
    (["--variant", "pool", "--streams"], "--streams overlaps non_blocking copies"),
    (["--variant", "workers", "--outputs-on-gpu", "--verify"], "--outputs-on-gpu copies and processes nothing"),
    (["--steps", "0"], "must be a positive integer"),
    (["--json", "/nonexistent/r.json"], "--json '/nonexistent/r.json'"),
])
def test_bad_input_names_the_fix(args, message, capsys):
    code, line = refusal(capsys, "infer.py", *args)
    assert code == 2 and message in line


def test_an_output_pool_that_does_not_fit_stops_before_the_run(monkeypatch, capsys):
    monkeypatch.setattr(pool, "free_bytes", lambda path: 10**4)
    assert infer.main(infer.parse_config(["--variant", "pool", "--workers", "2", *TINY])) == 3
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: the output pool needs 0.2 MB and /dev/shm has 0.0 MB free: --workers shrinks it")


def test_the_class_map_is_argmax_first_maximum_winning():
    scores = torch.randn(3, 5, 7, 9)
    scores[0, 2] = scores[0, 4] = 10.0  # a tie: argmax keeps the first
    assert torch.equal(infer.class_map(scores), scores.argmax(dim=1).to(torch.uint8))


def test_repeats_and_the_alone_rate_come_from_one_process(tmp_path):
    out = tmp_path / "streams.{}.json"
    assert infer.main(infer.parse_config(["--variant", "streams", "--workers", "2", *TINY, "--min-steps", "4",
                                          "--repeat", "2", "--then-alone", "--verify", "--json", str(out)])) == 0
    runs = [json.loads((tmp_path / f"streams.{n}.json").read_text()) for n in ("run1", "run2")]
    alone = json.loads((tmp_path / "streams.output.json").read_text())
    for r in runs:  # each window holds whole rounds of the 2 workers, and the table reads it as a run
        assert not r["output_only"] and r["batches"] == 4 and r["verify_mismatches"] == []
        records.checked(r, "run", tmp_path / "run.json")
    assert alone["output_only"] and alone["output_batches_per_s"] == alone["batches_per_s"] > 0
    assert alone["verified_batches"] is None
    records.checked(alone, "output", tmp_path / "streams.output.json")


@pytest.mark.parametrize("args, message", [
    (["--repeat", "2", "--json", "r.json"], "put {} in the path"),
    (["--output-only", "--then-alone"], "--then-alone measures the output path alone after the variant"),
    (["--variant", "uint8", "--outputs-on-gpu", "--then-alone"], "drop --output-only and --outputs-on-gpu"),
])
def test_several_records_need_a_path_for_each(args, message, capsys):
    code, line = refusal(capsys, "infer.py", *args)
    assert code == 2 and message in line


def test_out_of_memory_names_the_classes_too(capsys):
    """Part 2's scores are batch x classes x H x W: its out-of-memory line names --classes beside the batch."""
    import torch
    from starvation import runtime
    cfg = infer.parse_config([*TINY, "--classes", "100000000"])
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 745.06 GiB.")
    assert runtime.failure_advice(oom, cfg) == (
        "the GPU ran out of memory: each batch is --batch-size 2 at --img-size 32 with --classes "
        "100000000; use a smaller --batch-size or --img-size or fewer --classes")
