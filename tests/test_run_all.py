"""run_all.sh end to end on the CPU, with the real nsys that tests/run.sh fetches."""
import json

from conftest import run_script


def test_every_variant_gets_a_report_csvs_and_a_row(nsys, tmp_path):
    out = tmp_path / "run"
    p = run_script("./run_all.sh", "--repeat", "1", "--out", str(out), timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no CUDA GPU visible: doing a small CPU run" in p.stdout
    variants = json.loads((out / "env.json").read_text())["variants"]
    assert variants == ["baseline", "workers", "async", "streams", "prefetch", "ceiling"]
    md = (out / "results.md").read_text()
    for i, v in enumerate(variants, 1):
        assert f"[{i}/6] {v}" in p.stdout
        assert (out / f"{v}.nsys-rep").stat().st_size > 0
        assert (out / f"{v}_nvtx_sum.csv").stat().st_size > 0 and (out / f"{v}_osrt_sum.csv").exists()
        assert json.loads((out / f"{v}.run1.json").read_text())["steps_per_s"] > 0
        row = next(line for line in md.splitlines() if line.startswith(f"| {v} |"))
        assert "%" in row  # the nsys column holds a figure, not a dash
    assert (out / "steps_per_s.png").exists()


def test_a_failing_variant_is_reported_and_the_others_still_run(tmp_path):
    out = tmp_path / "run"
    # --prefetch-factor without workers is an error for the baseline only
    p = run_script("./run_all.sh", "--repeat", "1", "--no-nsys", "--variants", "baseline,workers",
                   "--out", str(out), "--", "--prefetch-factor", "2", timeout=600)
    assert p.returncode == 1
    assert "1 failure(s):" in p.stdout and "baseline: run 1 exited 2" in p.stdout
    assert "logs/baseline.run1.log" in p.stdout
    assert "need worker processes" in (out / "logs" / "baseline.run1.log").read_text()
    assert (out / "workers.run1.json").exists()
    md = (out / "results.md").read_text()
    assert "baseline: run 1 exited 2" in md and "| workers |" in md


def test_bad_options_are_named(tmp_path):
    p = run_script("./run_all.sh", "--variants", "baseline,turbo", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "unknown variant(s): turbo" in p.stderr
    p = run_script("./run_all.sh", "--repeat", "0")
    assert p.returncode == 2 and "--repeat needs a positive integer" in p.stderr
    p = run_script("./run_all.sh", "--frobnicate")
    assert p.returncode == 2 and "unknown option: --frobnicate" in p.stderr


def test_an_existing_run_folder_is_never_overwritten(tmp_path):
    p = run_script("./run_all.sh", "--no-nsys", "--out", str(tmp_path))
    assert p.returncode == 2 and "exists: runs are never overwritten" in p.stderr
