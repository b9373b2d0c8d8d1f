"""A user's folder as it comes: the survey of its files' headers, --gpu-decode's routing of each file to the
decoder that is fast for it, the packed pool, camera-size files decoded scaled, other formats, and the faults
of real folders (links that loop, odd names, empty files, a copy changed after it was made)."""
import gzip
import json
import multiprocessing
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from starvation import cache as photo_cache, decoders, photos, trace
from starvation import folder as folders
import train
from conftest import ROOT

SMALL = ["--device", "cpu", "--img-size", "32", "--batch-size", "4", "--steps", "3", "--warmup", "1"]


def save(path, size=(96, 64), mode="RGB", seed=0, **options) -> None:
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (size[1], size[0], 3), dtype=torch.uint8, generator=g).numpy()
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).convert(mode).save(path, **options)


@pytest.fixture
def mixed(tmp_path):
    """An ImageFolder like a user's: baseline 4:2:0 and 4:4:4, progressive, grey, CMYK and a PNG."""
    root = tmp_path / "mixed"
    save(root / "a" / "base.jpg", quality=90)
    save(root / "a" / "full.jpg", subsampling=0, quality=90, seed=1)
    save(root / "a" / "prog.jpg", progressive=True, quality=90, seed=2)
    save(root / "b" / "grey.jpg", mode="L", seed=3)
    save(root / "b" / "cmyk.jpg", mode="CMYK", seed=4)
    save(root / "b" / "shot.png", seed=5)
    return root


def test_the_survey_counts_each_kind_and_the_record_keeps_it(mixed, tmp_path, capsys):
    p = photos.Photos(mixed, False, False)
    assert p.survey.kinds() == {"CMYK": 1, "PNG": 1, "baseline 4:2:0": 1, "baseline 4:4:4": 1, "grey": 1,
                                "progressive": 1}
    out = tmp_path / "run.json"
    assert train.main(train.parse_config(["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(mixed),
                                          "--verify", *SMALL, "--no-compile", "--json", str(out)])) == 0
    err = capsys.readouterr().err
    assert f"photos: 6 files in 2 classes (ImageFolder layout) in {mixed}: 1 CMYK, 1 PNG, 1 baseline 4:2:0" in err
    assert "the workers decode 1 CMYK, 1 PNG, 1 progressive" in err
    r = json.loads(out.read_text())
    assert r["photos"]["progressive_share"] == round(1 / 6, 3) and r["photos"]["bits_per_pixel"] > 0
    assert r["photos"]["to_workers"] == 3 and r["verify_mismatches"] == [] and r["verified_batches"] == 4


def test_progressive_files_and_other_formats_go_to_the_workers_and_the_rest_is_packed(mixed):
    p = photos.Photos(mixed, False, False)
    names = [f.name for f in p.files]
    routing = p.survey.routing(4, 0, 10**9, sequential=True)
    assert [names[i] for i, w in enumerate(routing.workers) if w] == ["prog.jpg", "cmyk.jpg", "shot.png"]
    assert routing.slot_bytes == 4 * max(n for n, w in zip(p.survey.sizes, routing.workers) if not w)
    mine, device = routing.split(list(range(6)))
    assert sorted(names[i] for i in mine) == ["cmyk.jpg", "prog.jpg", "shot.png"] and len(device) == 3
    # the most any batch of 4, read in order round the folder, gives the workers
    assert routing.decoded_rows == 3
    # a slot too small for two of the device's files: what does not fit goes to the workers, and is counted
    small = p.survey.routing(4, 0, max(p.survey.sizes) + 1, sequential=True)
    mine, device = small.split(list(range(6)))
    assert sum(p.survey.sizes[i] for i in device) <= small.slot_bytes and len(mine) + len(device) == 6
    assert small.overflow == 1 and small.decoded_rows == 3
    # the largest batch's device files, and the prefetch factor whose fewer slots (in the same bytes) hold them
    sizes = p.survey.sizes
    largest = max(sum(sizes[f] for f in [(s + j) % 6 for j in range(4)] if not small.workers[f]) for s in (0, 2, 4))
    assert small.batch_bytes == largest > small.slot_bytes and routing.room(11, 2, 3) is None
    fit = (40 * small.slot_bytes // largest - 3) // 2
    assert fit >= 1 and small.room(40, 2, 3).endswith(f"--prefetch-factor {fit} gives fewer slots, each large "
                                                      "enough, in the same pinned memory")
    assert small.room(4, 2, 3).endswith("fewer --workers, or --resized-cache, would make room")
    # under torchrun the order is another: a slot holds a row for every image
    assert p.survey.routing(4, 0, 10**9, sequential=False).decoded_rows == 4


def test_a_packed_slot_that_overflows_is_verified(mixed, tmp_path, monkeypatch, capsys):
    """The pool's slots are sized from the folder; a batch whose files do not fit is decoded by the workers, and
    the log says what would make room."""
    monkeypatch.setattr(photos, "POOL_BYTES", 11 * 3000)  # 11 slots of 3 kB: one file or two a slot
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(mixed), "--verify",
                              *SMALL, "--no-compile", "--json", str(out)])
    assert train.main(cfg) == 0
    r = json.loads(out.read_text())
    assert r["verify_mismatches"] == [] and r["photos"]["to_workers_why"].get("beyond a slot's bytes")
    assert "the workers decode 2 of the device's files because a batch's files outgrow its slot (0.0 MB over 11 " \
           "slots" in capsys.readouterr().err


def test_a_camera_size_jpeg_decodes_scaled_and_close_to_a_whole_decode(tmp_path):
    """DCT-domain scaling (PIL's draft) where the shorter side is at least twice --img-size; the guard holds."""
    big = tmp_path / "big.jpg"
    save(big, size=(400, 300), quality=95)
    data, header = folders.read_checked(big, folders.MAX_PIXELS)
    scaled = decoders.fit(decoders.decode_scaled(data, big, header, 64), 64)
    whole = decoders.fit(decoders.decode_whole(torch.frombuffer(bytearray(data), dtype=torch.uint8), big), 64)
    assert scaled.shape == whole.shape == (3, 64, 64)
    assert (scaled.float() - whole.float()).abs().mean() < 40  # noise pictures: the two resamplings differ
    assert torch.equal(decoders.decode(big, 64), scaled)
    big.write_bytes(data[:len(data) // 2])
    with pytest.raises(folders.BadImage, match="cut short"):
        decoders.decode(big, 64)


def test_the_pixel_limit_follows_pil_a_warning_past_it_a_refusal_past_twice(tmp_path, capsys):
    d = tmp_path / "big"
    save(d / "a.jpg", size=(100, 100))
    save(d / "b.jpg", size=(40, 40))
    cfg = train.parse_config(["--variant", "jpeg", "--workers", "1", "--data-dir", str(d), *SMALL,
                              "--max-image-pixels", "6000"])
    assert train.main(cfg) == 0  # 10,000 pixels: past the limit, not past twice
    assert "warning: 1 files have more pixels than the limit of 6,000: decoded all the same" in capsys.readouterr().err
    with pytest.raises(folders.BadImage, match="more than twice the limit of 4,000"):
        decoders.decode(d / "a.jpg", 32, 4000)


def test_png_files_are_read_and_an_empty_file_is_called_empty(tmp_path, capsys):
    d = tmp_path / "shots"
    save(d / "cats" / "1.png")
    save(d / "cats" / "2.jpg")
    (d / "dogs").mkdir()
    save(d / "dogs" / "3.webp")
    (d / "dogs" / "empty.jpg").write_bytes(b"")
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-pool", "--workers", "1", "--data-dir", str(d), "--skip-bad-images",
                              *SMALL, "--json", str(out)])
    assert train.main(cfg) == 0
    err = capsys.readouterr().err
    assert "skipped 1 of 4 files, which do not decode: dogs/empty.jpg" in err
    with pytest.raises(folders.BadImage, match="empty.jpg: an empty file"):
        decoders.decode(d / "dogs" / "empty.jpg", 32)


def test_a_link_that_loops_into_another_class_is_left_out(tmp_path, capsys):
    """cat/up -> .. would lead the walk into dog, and read dog's photos again labelled cat."""
    root = tmp_path / "pets"
    for cls in ("cat", "dog"):
        for k in range(2):
            save(root / cls / f"{k}.jpg", seed=k)
    (root / "cat" / "up").symlink_to("..")
    (root / "cat" / "dogs").symlink_to(root / "dog")
    files, labels, classes, left_out = folders.find_photos(root)
    assert [f.relative_to(root).as_posix() for f in files] == ["cat/0.jpg", "cat/1.jpg", "dog/0.jpg", "dog/1.jpg"]
    assert labels == [0, 0, 1, 1] and sorted(left_out) == ["cat/dogs", "cat/up"]


def test_a_file_name_with_a_newline_is_named_on_one_line_with_its_folder(tmp_path, capsys):
    d = tmp_path / "odd"
    save(d / "ok.jpg")
    (d / "bad\nname.jpg").write_bytes(b"\xff\xd8 broken")
    p = subprocess.run([sys.executable, str(ROOT / "train.py"), "--variant", "jpeg", "--workers", "1",
                        "--data-dir", str(d), *SMALL], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3
    last = p.stderr.strip().splitlines()[-1]
    assert last == f"error: {d}/bad\\nname.jpg: a damaged or cut-short JPEG header", last


def test_a_copy_changed_after_it_was_made_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "big"
    for k in range(4):
        save(root / f"{k}.jpg", size=(96, 80), seed=k)
    args = ["--variant", "jpeg", "--workers", "1", "--data-dir", str(root), "--resized-cache", *SMALL]
    copy = train.prepare(train.parse_config(args)).photos.folder
    (copy / "2.jpg").unlink()
    again = train.prepare(train.parse_config(args)).photos
    assert again.resized["made"] and len(again.files) == 4 and (copy / "2.jpg").exists()
    (copy / "1.jpg").write_bytes(b"\xff\xd8 changed")
    assert train.prepare(train.parse_config(args)).photos.resized["made"]


def test_the_copys_builders_end_quietly(tmp_path):
    """Forked from train.py, the builders would run its SIGTERM handler when the pool stops them."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1, initializer=photo_cache.quiet_worker) as pool:
        handlers = pool.apply(signal_handlers)
    assert handlers == (signal.SIG_IGN, signal.SIG_DFL)


def signal_handlers():
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def test_a_gzipped_torch_profiler_trace_reads_as_the_plain_one(tmp_path):
    steps = [dict(ph="X", cat="user_annotation", name=f"Batch {i}", ts=1000 * i, dur=900, tid=1) for i in range(4)]
    text = json.dumps(dict(traceEvents=steps))
    (tmp_path / "plain").mkdir()
    (tmp_path / "gz").mkdir()
    (tmp_path / "plain" / "w.1.pt.trace.json").write_text(text)
    (tmp_path / "gz" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(text.encode()))
    plain, packed = trace.load(tmp_path / "plain"), trace.load(tmp_path / "gz" / "w.1.pt.trace.json.gz")
    assert plain.steps == packed.steps and trace.load(tmp_path / "gz").steps == plain.steps
    (tmp_path / "gz" / "w.1.pt.trace.json.gz").write_bytes(gzip.compress(text.encode())[:30])
    with pytest.raises(trace.Unreadable, match="not a torch.profiler chrome trace"):
        trace.load(tmp_path / "gz")


def test_the_record_goes_to_a_process_substitution(tmp_path):
    out = tmp_path / "record.json"
    cmd = (f"{sys.executable} {ROOT / 'train.py'} --variant workers --workers 1 {' '.join(SMALL)} "
           f"--json >(cat > {out})")
    p = subprocess.run(["bash", "-c", cmd + "; wait"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for _ in range(50):
        if out.exists() and out.read_text().endswith("\n"):
            break
        subprocess.run(["sleep", "0.1"])
    assert json.loads(out.read_text())["variant"] == "workers"


def test_the_baseline_copy_sends_the_progressive_files_to_the_device(mixed, tmp_path, monkeypatch, capsys):
    """--baseline-copy: a progressive file is read from a copy written once as a baseline JPEG at its own size
    and quantization, which the device decodes in its batches; the record's survey stays the folder's. A
    damaged progressive file stops the run naming it, and leaves no part of a copy."""
    from conftest import refusal
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = ["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(mixed), "--baseline-copy", *SMALL,
            "--no-compile"]
    out = tmp_path / "run.json"
    assert train.main(train.parse_config([*args, "--verify", "--json", str(out)])) == 0
    err = capsys.readouterr().err
    assert "photos: --baseline-copy: 1 progressive files read as baseline JPEGs at their own size" in err
    assert "(made now in" in err and "the workers decode 1 CMYK, 1 PNG (" in err
    r = json.loads(out.read_text())
    assert r["photos"]["kinds"]["progressive"] == 1 and r["photos"]["to_workers"] == 2
    assert r["photos"]["baseline_copy"]["files"] == 1 and r["verify_mismatches"] == []
    original = mixed / "a" / "prog.jpg"
    twin = Path(r["photos"]["baseline_copy"]["folder"]) / "a" / "prog.jpg"
    header = folders.jpeg_header(twin.read_bytes(), twin, folders.MAX_PIXELS)
    assert header.kind == "baseline 4:2:0" and (header.height, header.width) == (64, 96)
    a, b = (decoders.decode_whole(photo_cache.read_file(str(f)), f).float() for f in (original, twin))
    assert (a - b).abs().mean() < 20  # (random pixels at every level, clipped: a smooth picture, below, much less)
    y, x = torch.meshgrid(torch.arange(64.0), torch.arange(96.0), indexing="ij")
    smooth = torch.stack([x * 2.5, y * 3, (x + y) * 1.5]) + 8 * torch.randn(3, 64, 96, generator=torch.Generator())
    Image.fromarray(smooth.clamp(0, 255).to(torch.uint8).permute(1, 2, 0).numpy()).save(
        tmp_path / "smooth.jpg", progressive=True, quality=90)
    assert photo_cache.baseline_one((tmp_path / "smooth.jpg", tmp_path, tmp_path / "copy", folders.MAX_PIXELS))[0] \
        == "smooth.jpg"
    a, b = (decoders.decode_whole(photo_cache.read_file(str(d / "smooth.jpg")), d).float()
            for d in (tmp_path, tmp_path / "copy"))
    assert (a - b).abs().mean() < 0.2
    assert train.prepare(train.parse_config(args)).photos.baseline["made"] is False  # reused
    original.write_bytes(original.read_bytes()[:-100])
    code, line = refusal(capsys, "train.py", *args)
    assert code == 2 and line == f"train.py: error: --baseline-copy: {original}: cut short (its image data has no " \
                                 "end marker)"
    assert not list((tmp_path / "cache" / "gpu-starvation").glob("*.making-*"))

def test_the_survey_prints_the_folder_and_the_decoders_rates_and_runs_nothing(mixed, tmp_path, capsys):
    out = tmp_path / "survey.json"
    cfg = train.parse_config(["--survey", "--data-dir", str(mixed), *SMALL, "--json", str(out)])
    assert cfg.variant == "jpeg-gpu" and train.main(cfg) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"photos: 6 files in 2 classes (ImageFolder layout) in {mixed}: 1 CMYK, 1 PNG")
    assert lines[1].startswith("--gpu-decode: slots of") and "the workers decode 1 CMYK, 1 PNG, 1 progressive" in lines[1]
    assert lines[2].startswith("decoders, timed on 6 of the folder's files at --img-size 32: one CPU thread")
    assert "no GPU here to time its decoder" in lines[2] and lines[-1].startswith("flags: ")
    assert "--baseline-copy: 17% of the files are progressive" in lines[-1]
    r = json.loads(out.read_text())
    assert r["photos"]["kinds"]["progressive"] == 1 and r["routing"]["to_workers"] == 3 and r["cpu_ms_per_file"] > 0
    assert r["cpu_ms_per_baseline_file"] > 0 and r["balanced_cpu_decoded"] == 0  # (no device decoder to balance)


def test_the_survey_names_worker_nice_where_the_workers_take_every_core(mixed, capsys):
    from starvation.runtime import usable_cpus
    for nice, named in ((0, True), (5, False)):
        cfg = train.parse_config(["--survey", "--data-dir", str(mixed), *SMALL, "--workers", str(usable_cpus()),
                                  "--worker-nice", str(nice)])
        assert train.main(cfg) == 0
        assert ("--worker-nice 10, to time against 0" in capsys.readouterr().out.splitlines()[-1]) == named


def test_the_survey_of_the_copy_names_the_workers_where_enough_of_them_decode_it(mixed, tmp_path, monkeypatch,
                                                                                  capsys):
    """A copy at the training size: decoded by COPY_WORKERS or more workers (16: on three H100 hosts 1.00 of the
    ceiling against the device's 0.97; 8 fell behind on one of them) it leaves the GPU to the step, as the verdict
    says; with --augment's crops of a copy at twice the size, or fewer workers, the survey does not say so. (8
    here: this machine's CPUs refuse 16 workers.) A share of each batch to the workers (--cpu-decoded N), which
    needs a device's rate to size, is then named as the other way, on the GPU path."""
    from starvation import survey, thresholds
    monkeypatch.setattr(thresholds, "COPY_WORKERS", 8)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # a device decoder far slower than a core, as if timed: the balance gives the workers most of each batch
    monkeypatch.setattr(survey, "gpu_images_per_s", lambda p, files, size, device, decoder="torchvision":
                        50.0 if decoder == "torchvision" else None)
    for extra, named in ((["--workers", "8"], True), (["--workers", "8", "--augment"], False),
                         (["--workers", "4"], False)):
        cfg = train.parse_config(["--survey", "--data-dir", str(mixed), "--resized-cache", *SMALL, *extra])
        assert train.main(cfg) == 0
        flags = capsys.readouterr().out.splitlines()[-1]
        assert ("--no-gpu-decode where the CPU path's" in flags) == named, flags
        assert "--cpu-decoded " in flags and ("or, on the GPU path, --cpu-decoded " in flags) == named, flags


def test_cpu_decoded_auto_is_where_the_workers_and_the_device_take_as_long():
    from starvation.survey import Rates
    # a batch of 64, a tenth of it progressive (38 ms a file on a core), baseline 14 ms, the device 2400 images/s
    r = Rates(cpu_ms=16.0, workers_ms=38.0, baseline_ms=14.0, gpu_images_per_s=2400.0, share=0.1, cores=14, timed=48)
    n = r.balanced(64)
    assert r.gpu_path(64, n) > r.gpu_path(64) and r.gpu_path(64, n) >= max(r.gpu_path(64, k) for k in range(57))
    device_s, workers_s = (64 - 6.4 - n) / 2400, (6.4 * 38 + n * 14) / 1e3 / 14
    assert abs(device_s - workers_s) < 14 / 1e3 / 14 + 1 / 2400  # within a file of either side
    # cores already short, or no device timed: none
    assert Rates(16.0, 38.0, 14.0, 2400.0, 0.1, cores=2, timed=48).balanced(64) == 0
    assert Rates(16.0, 38.0, 14.0, None, 0.1, cores=14, timed=48).balanced(64) == 0
    # a device far slower than the cores: the workers take all but one of the batch
    assert Rates(16.0, None, 14.0, 10.0, 0.0, cores=14, timed=48).balanced(64) == 63
    # files a slot cannot hold are the workers' too, at a baseline file's cost: a fifth of them here, and the
    # workers are the slower side
    spilled = Rates(16.0, 38.0, 14.0, 2400.0, 0.1, cores=14, timed=48, spilled=0.2)
    assert spilled.gpu_path(64) == pytest.approx(1 / ((6.4 * 38 + 12.8 * 14) / 1e3 / 14))
    assert spilled.balanced(64) == 0


def test_cpu_decoded_auto_on_a_cpu_is_none_and_says_why(mixed, tmp_path, capsys):
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "1", "--data-dir", str(mixed), "--cpu-decoded",
                              "auto", *SMALL, "--no-compile", "--json", str(out)])
    assert train.main(cfg) == 0
    said = capsys.readouterr()
    assert "--cpu-decoded auto: 0, as no GPU decoder could be timed here" in said.out + said.err
    r = json.loads(out.read_text())
    assert r["settings"]["cpu_decoded"] == 0  # (the N it ran with)


def test_a_folder_of_pngs_alone_runs_on_the_gpu_path_its_workers_decoding_all(tmp_path):
    d = tmp_path / "pngs"
    for k in range(3):
        save(d / f"{k}.png", seed=k)
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "1", "--data-dir", str(d), "--verify", *SMALL,
                              "--no-compile", "--json", str(out)])
    assert train.main(cfg) == 0
    r = json.loads(out.read_text())
    assert r["photos"]["to_workers"] == 3 and r["verify_mismatches"] == []


def test_pils_own_pixel_limit_does_not_refuse_what_the_flag_allows(tmp_path, monkeypatch):
    """--max-image-pixels is the one limit: PIL's, fixed at its default, would refuse a larger photo first."""
    from PIL import Image
    big = tmp_path / "big.png"
    save(big, size=(120, 100))
    save(tmp_path / "big.jpg", size=(400, 300))
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # as if the photos were past PIL's default
    assert decoders.decode(big, 32).shape == (3, 32, 32)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)
    assert decoders.decode(tmp_path / "big.jpg", 64).shape == (3, 64, 64)  # (scaled by PIL: 300 >= 2 x 64)
