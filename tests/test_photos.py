"""--jpeg on the CPU: the default set of real photos, a user's folder, each decode path verified, and bad input."""
import contextlib
import json
import os
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch
from torchvision.io import encode_jpeg

from starvation import cache as photo_cache, decoders, photos, sources
from starvation import folder as folders
import train
from conftest import refusal, run_script

SMALL = ["--device", "cpu", "--img-size", "32", "--batch-size", "4", "--steps", "3", "--warmup", "1"]


def opened(args: list[str]) -> photos.Photos:
    """The folder a run with these flags reads, as train.py's prepare() opens it."""
    return train.prepare(train.parse_config(args)).photos


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The default set's cache, in a folder of the test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def folder(tmp_path) -> "Path":  # noqa: F821
    """A user's folder: JPEGs of several sizes, one grey, one CMYK, and a file that is not a JPEG."""
    d = tmp_path / "mine"
    d.mkdir()
    g = torch.Generator().manual_seed(0)
    for k, (h, w) in enumerate([(40, 60), (80, 50), (32, 32), (100, 120)]):
        image = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
        (d / f"{k}.JPG").write_bytes(encode_jpeg(image).numpy().tobytes())
    grey = torch.randint(0, 256, (1, 48, 48), dtype=torch.uint8, generator=g)
    (d / "grey.jpeg").write_bytes(encode_jpeg(grey).numpy().tobytes())
    from PIL import Image
    Image.new("CMYK", (50, 40), (10, 200, 30, 0)).save(d / "cmyk.jpg")
    (d / "notes.txt").write_text("not an image")
    return d


def test_the_default_set_is_real_photos_made_once(cache):
    if not decoders.installed("skimage"):
        pytest.skip("scikit-image (requirements.txt) is not installed")
    folder, made = photo_cache.default_set(32)
    files = folders.find_photos(folder)[0]
    assert made and len(files) == photo_cache.COUNT and folder.parent == cache / "gpu-starvation"
    assert len({f.read_bytes() for f in files}) == len(files)  # distinct crops
    assert decoders.decode(files[0], 32).shape == (3, 32, 32)
    assert photo_cache.default_set(32) == (folder, False)  # cached


def test_any_size_grey_and_cmyk_come_out_rgb_at_img_size(folder):
    files = folders.find_photos(folder)[0]
    assert [f.name for f in files] == ["0.JPG", "1.JPG", "2.JPG", "3.JPG", "cmyk.jpg", "grey.jpeg"]
    for f in files:
        image = decoders.decode(f, 24)
        assert image.shape == (3, 24, 24) and image.dtype == torch.uint8


@pytest.mark.parametrize("variant", ["jpeg", "jpeg-pool", "jpeg-gpu"])
def test_each_decode_path_is_verified_and_writes_nothing_into_the_folder(variant, folder, tmp_path):
    """jpeg-gpu decodes in the loop's copy (on the CPU here, the same code that runs nvjpeg on a GPU)."""
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", variant, "--workers", "2", "--data-dir", str(folder), "--verify", *SMALL,
                              "--no-compile", "--json", str(out)])
    assert train.main(cfg) == 0
    r = json.loads(out.read_text())
    assert r["data_dir"] == str(folder) and r["verified_batches"] == 4 and r["verify_mismatches"] == []
    assert r["bad_images_skipped"] is None and r["settings"]["jpeg"]
    assert (r["decode_thread"] is not None) == (variant == "jpeg-gpu")  # (only --gpu-decode has the thread)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before


@pytest.mark.parametrize("split", [["--cpu-decoded", "3"], ["--cpu-decoded", "1", "--no-pool"],
                                   ["--gpu-decoder", "torchcodec", "--cpu-decoded", "2"],
                                   ["--decode-threads", "2"], ["--decode-threads", "3", "--cpu-decoded", "1"]])
def test_the_device_decode_shared_with_the_workers_is_verified(split, folder, tmp_path):
    """--cpu-decoded N has the workers decode the first N images of a batch, and the device the rest;
    TorchCodec's decoder stands in for torchvision's; --decode-threads N decodes the batches on N threads,
    each taking its own batch and pool slot. Each batch is checked as the step reads it, the workers' images
    against the host's checksum, and the step reads the same images as with none of these."""
    if "torchcodec" in split and not decoders.installed("torchcodec"):
        pytest.skip("TorchCodec is not installed")

    def images(*flags) -> set:
        out, seen = tmp_path / "run.json", set()
        # (--img-size 64: no file is twice that, so the workers decode each file whole, as the device does)
        cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(folder), "--verify",
                                  *SMALL, "--img-size", "64", "--no-compile", "--json", str(out), *flags])
        original = train.checksum

        def kept(images):  # the loop's checksum of what the step reads, image by image
            sums = original(images)
            seen.update(sums.tolist())
            return sums
        with pytest.MonkeyPatch.context() as m:
            m.setattr(train, "checksum", kept)
            assert train.main(cfg) == 0
        r = json.loads(out.read_text())
        assert r["verified_batches"] == 4 and r["verify_mismatches"] == []
        return seen
    expected = images()
    assert len(expected) == 6 and images(*split) == expected  # each of the folder's 6 files


def test_a_corrupt_jpeg_stops_the_run_naming_it(folder):
    bad = folder / "2.JPG"
    bad.write_bytes(bad.read_bytes()[:-100])  # truncated: its image data cut short
    p = run_script("train.py", "--variant", "jpeg", "--workers", "2", "--data-dir", str(folder), *SMALL, timeout=120)
    assert p.returncode == 3, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last == f"error: {bad}: cut short (its image data has no end marker)" and "Traceback" not in p.stderr


def test_the_batch_decoder_gives_what_the_file_decoder_gives(folder):
    files = folders.find_photos(folder)[0]
    encoded = [photo_cache.read_file(str(f)) for f in files]
    batch = decoders.decode_batch(encoded, 24, torch.device("cpu"))[0]
    expected = torch.stack([decoders.fit(decoders.decode_whole(e, f), 24) for e, f in zip(encoded, files)])
    assert torch.equal(batch, expected)

    def hardware(data, device):  # as nvImageCodec's: None for a file it refuses (sample 1)
        return [None if j == 1 else decoders.decode_jpeg(t, mode=decoders.ImageReadMode.RGB) for j, t in enumerate(data)]
    assert torch.equal(decoders.decode_batch(encoded, 24, torch.device("cpu"), hardware)[0], expected)
    if decoders.installed("torchcodec"):
        assert torch.equal(decoders.decode_batch(encoded, 24, torch.device("cpu"), decoders.torchcodec_decoder())[0],
                           expected)
    encoded[3] = encoded[3][:50]

    def fails(data, device):  # as TorchCodec's on a batch with a file it cannot decode
        raise RuntimeError("Image is incomplete or truncated.")
    for decoder in (None, fails):
        with pytest.raises(folders.BadImage, match="sample 3 of a batch does not decode as a JPEG on the cpu"):
            decoders.decode_batch(encoded, 24, torch.device("cpu"), decoder)


def test_the_device_decoders_wait_for_their_stream_before_they_write(monkeypatch):
    """nvjpeg writes its images when it is called, not in the decoding stream's order (its hardware engines;
    torchvision's decoder, from a stream of its own), into memory that the caching allocator hands out on that
    stream: torchvision's and TorchCodec's decoders are called only once the stream has done what it reads."""
    log = []
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: types.SimpleNamespace(synchronize=lambda: log.append("synchronize")))

    def decoder(name):
        def decode(data, *args, **kwargs):
            log.append(name)
            return [torch.zeros(3, 24, 24, dtype=torch.uint8)] * len(data)
        return decode
    monkeypatch.setattr(decoders, "decode_jpeg", decoder("torchvision"))
    monkeypatch.setitem(sys.modules, "torchcodec", types.ModuleType("torchcodec"))
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", types.SimpleNamespace(decode_jpeg=decoder("torchcodec")))
    encoded = [torch.zeros(8, dtype=torch.uint8)] * 2
    decoders.decode_batch(encoded, 24, torch.device("cuda"))
    decoders.decode_batch(encoded, 24, torch.device("cuda"), decoders.torchcodec_decoder())
    assert log == ["synchronize", "torchvision", "synchronize", "torchcodec"]


def test_nvjpegs_planes_wait_for_the_stream_too(monkeypatch):
    """--gpu-decoder nvjpeg writes as torchvision's decoder writes, when it is called: it waits as they do."""
    log = []
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda device=None: types.SimpleNamespace(synchronize=lambda: log.append("synchronize")))

    def nvjpeg(data, device):
        log.append("nvjpeg")
        return decoders.Planes(torch.zeros(1, dtype=torch.uint8), [[(0, 1, 1)] * 3] * len(data))
    nvjpeg.calls = []
    monkeypatch.setattr(decoders, "YuvDecoder", lambda: nvjpeg)
    monkeypatch.setattr(decoders, "from_planes", lambda flat, planes, size, augment: torch.zeros(len(planes), 3, 9, 9))
    decoders.decode_batch([torch.zeros(8, dtype=torch.uint8)] * 2, 24, torch.device("cuda"), decoders.planes_decoder())
    assert log == ["synchronize", "nvjpeg"]


def test_nvjpegs_planes_decode_each_kind_of_file_in_a_call_of_its_own(monkeypatch):
    """A batch that mixed kinds of file (subsampling, grey) took nvjpeg's engines twice torchvision's time, a
    batch of one kind less: one batched call a kind, each with a state of its own, each image written where
    the batch's planes say it lies. (A stand-in for libnvjpeg: each file's first byte names its kind.)"""
    import ctypes
    from starvation import nvjpeg
    calls, sides = [], {0: (3, 16, 16), 2: (3, 16, 8), 6: (1, 16, 16)}  # nvjpeg's 4:4:4, 4:2:0, grey

    def kind(pointer):
        return ctypes.cast(pointer, ctypes.POINTER(ctypes.c_uint8))[0]

    class Lib:
        def nvjpegGetImageInfo(self, handle, data, length, components, subsampling, widths, heights):
            c, h, ch = sides[kind(data.value)]
            components._obj.value, subsampling._obj.value = c, kind(data.value)
            for i, side in enumerate([h, ch, ch][:c]):
                widths[i], heights[i] = side, side
            return 0

        def nvjpegJpegStateCreate(self, handle, state):
            state._obj.value = 100 + len(calls)
            return 0

        def nvjpegDecodeBatchedInitialize(self, handle, state, k, threads, output):
            return 0

        def nvjpegDecodeBatched(self, handle, state, data, lengths, images, stream):
            calls.append((state.value, [kind(d) for d in data], [images[i].channel[0] for i in range(len(data))]))
            return 0

    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    decoder = nvjpeg.YuvDecoder()
    decoder.lib = Lib()
    order = [2, 0, 2, 6, 0, 2]
    encoded = [torch.full((8,), k, dtype=torch.uint8) for k in order]
    flat, planes = decoder(encoded, torch.device("cpu"))
    assert sorted(k for _, kinds, _ in calls for k in kinds) == sorted(order)
    assert all(len(set(kinds)) == 1 for _, kinds, _ in calls) and len({state for state, _, _ in calls}) == 3
    written = {k: iter(pointers) for _, (k, *_), pointers in calls}
    assert [next(written[k]) - flat.data_ptr() for k in order] == [p[0][0] for p in planes]


@pytest.mark.skipif(not torch.cuda.is_available() or not decoders.installed("triton"), reason="needs a GPU")
def test_nvjpegs_planes_decode_to_what_torchvisions_rgb_gives_on_a_gpu():
    """4:2:0, 4:4:4 and grey files, odd sides among them: nvjpeg's planes fitted (and cut) by resize.from_planes
    against torchvision's RGB fitted by fit_all. nvjpeg repeats each chroma sample where it makes RGB; the
    planes' path resizes it as the rest (and rounds it once more): a few levels apart at colours' edges."""
    import io
    from PIL import Image
    g = torch.Generator().manual_seed(1)
    encoded = []
    for h, w, sub, mode in [(241, 321, 2, "RGB"), (300, 200, 0, "RGB"), (128, 96, 2, "L"), (513, 683, 2, "RGB"),
                            (64, 64, 1, "RGB")]:
        small = torch.randint(0, 256, (1, 3, h // 16 + 2, w // 16 + 2), generator=g).float()
        image = torch.nn.functional.interpolate(small, size=(h, w), mode="bicubic")[0].clamp(0, 255).byte()
        b = io.BytesIO()
        Image.fromarray(image.permute(1, 2, 0).numpy()).convert(mode).save(b, "JPEG", quality=90, subsampling=sub)
        encoded.append(torch.frombuffer(bytearray(b.getvalue()), dtype=torch.uint8))
    cuda = torch.device("cuda")
    expected = decoders.decode_batch(encoded, 96, cuda)[0].int()
    got = decoders.decode_batch(encoded, 96, cuda, decoders.planes_decoder())[0].int()
    differ = (got - expected).abs().float()
    assert got.shape == expected.shape and differ.mean() < 1.5 and differ.quantile(0.99) <= 8, (
        differ.mean(), differ.quantile(0.99), differ.max())
    cut = decoders.decode_batch(encoded, 96, cuda, decoders.planes_decoder(), augment=True)[0]
    assert cut.shape == (5, 3, 96, 96) and cut.float().std() > 10  # (crops, not a constant)


def test_skip_bad_images_counts_files_and_names_them(folder, tmp_path, capsys):
    """Each bad file counts once however often the batches meet it (they cycle through the folder), and
    the console names them."""
    for name in ("2.JPG", "4.jpeg"):
        (folder / name).write_bytes(b"\xff\xd8 not really")
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-pool", "--workers", "2", "--data-dir", str(folder),
                              "--skip-bad-images", *SMALL, "--steps", "6", "--json", str(out)])
    files = train.prepare(cfg).photos.files
    assert len(files) * 2 < 6 * 4  # every file is read more than once
    assert train.main(cfg) == 0
    assert json.loads(out.read_text())["bad_images_skipped"] == 2
    assert f"--skip-bad-images: skipped 2 of {len(files)} files, which do not decode: 2.JPG, 4.jpeg" \
        in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--variant", "jpeg", "--data-dir", "/nonexistent/photos"], "--data-dir /nonexistent/photos: no such folder"),
    (["--variant", "jpeg", "--data-dir", "EMPTY"], "no image files in it (.jpg, .jpeg, .png"),
    (["--variant", "jpeg", "--data-dir", "CLASSES"], "its class folder dogs holds no image file"),
    (["--variant", "prefetch", "--max-image-pixels", "5"], "--max-image-pixels guards --jpeg's files: add --jpeg"),
    (["--variant", "jpeg", "--max-image-pixels", "0"], "must be a positive integer"),
    (["--variant", "prefetch", "--data-dir", "EMPTY"], "--data-dir is the folder --jpeg reads"),
    (["--variant", "prefetch", "--jpeg"], "--jpeg decodes to uint8 images: add --uint8"),
    (["--variant", "fast", "--gpu-decode"], "--gpu-decode decodes --jpeg's files: add --jpeg"),
    (["--variant", "jpeg-gpu", "--skip-bad-images"], "--skip-bad-images needs decoding on the CPU"),
    (["--variant", "jpeg-pool", "--cpu-decoded", "2"], "--cpu-decoded splits --gpu-decode's batches between the "
                                                          "workers and the device: add --gpu-decode"),
    (["--variant", "jpeg-gpu", "--cpu-decoded", "4"], "--cpu-decoded 4 leaves the device no image of a batch of 4"),
    (["--variant", "jpeg-gpu", "--cpu-decoded", "-1"], "must be 0 or more"),
    (["--variant", "jpeg-pool", "--decode-threads", "2"], "--decode-threads sets --gpu-decode's decoding threads: "
                                                             "add --gpu-decode"),
    (["--variant", "jpeg-gpu", "--decode-threads", "0"], "must be a positive integer"),
])
def test_a_folder_with_no_jpegs_is_one_line_and_exit_2(args, message, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.txt").write_bytes(b"text")
    for k in ("cats", "dogs"):  # torchvision's ImageFolder layout, with a class of no files
        (tmp_path / "classes" / k).mkdir(parents=True)
    (tmp_path / "classes" / "cats" / "a.jpg").write_bytes(b"\xff\xd8")
    places = {"EMPTY": str(tmp_path / "empty"), "CLASSES": str(tmp_path / "classes")}
    code, line = refusal(capsys, "train.py", *[places.get(a, a) for a in args], *SMALL)
    assert code == 2 and message in line


def build(barrier, size: int, count: int, out) -> None:
    barrier.wait()
    out.put(str(photo_cache.default_set(size, count)[0]))


@pytest.mark.skipif(not decoders.installed("skimage"), reason="the default set needs scikit-image")
def test_the_default_set_survives_racing_builders_and_killed_ones(cache):
    """Two runs making the set at once (two ranks of one job, say) both get it, whole; a build killed
    before it cleared up is removed by the next; an unwritable cache is one line naming it."""
    import multiprocessing
    stale = cache / "gpu-starvation" / "photos-24px-8.making-999999999"
    stale.mkdir(parents=True)
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=build, args=(barrier, 24, 8, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    folder = cache / "gpu-starvation" / "photos-24px-8"
    assert {out.get(timeout=5), out.get(timeout=5)} == {str(folder)}
    assert len(list(folder.glob("*.jpg"))) == 8 and sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


def test_an_unwritable_cache_is_one_line_naming_it(tmp_path, monkeypatch):
    if not decoders.installed("skimage"):
        pytest.skip("the default set needs scikit-image")
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    with pytest.raises(ValueError, match=r"the photo cache .*a-file/gpu-starvation cannot be written .*XDG_CACHE_HOME"):
        photo_cache.default_set(24, 8)


def jpeg(h: int, w: int, seed: int = 0, channels: int = 3) -> bytes:
    g = torch.Generator().manual_seed(seed)
    return encode_jpeg(torch.randint(0, 256, (channels, h, w), dtype=torch.uint8, generator=g)).numpy().tobytes()


def test_the_imagefolder_layout_is_read_with_its_labels(tmp_path, capsys):
    """ROOT/CLASS/*.jpg, as torchvision's ImageFolder reads it: the classes sorted, files at any depth and
    through links, each labelled by its class; the log line and the record say what was read."""
    root = tmp_path / "photos"
    for cls, n in (("zebra", 2), ("ant", 3)):
        (root / cls / "more").mkdir(parents=True)
        for k in range(n):
            (root / cls / ("more" if k == 0 else ".") / f"{k}.JPEG").write_bytes(jpeg(40 + 8 * k, 60, k))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.jpg").write_bytes(jpeg(30, 30))
    (root / "bee").symlink_to(elsewhere)  # a linked class folder
    (root / "ant" / "loop").symlink_to(root / "ant")  # a link that loops: read once
    files, labels, classes, left_out = folders.find_photos(root)
    assert left_out == ["ant/loop"]
    assert classes == ["ant", "bee", "zebra"]
    assert [(f.relative_to(root).as_posix(), label) for f, label in zip(files, labels)] == [
        ("ant/1.JPEG", 0), ("ant/2.JPEG", 0), ("ant/more/0.JPEG", 0), ("bee/x.jpg", 1),
        ("zebra/1.JPEG", 2), ("zebra/more/0.JPEG", 2)]
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg", "--workers", "2", "--data-dir", str(root), "--verify", *SMALL,
                              "--json", str(out)])
    assert train.main(cfg) == 0
    err = capsys.readouterr().err
    assert f"photos: 6 files in 3 classes (ImageFolder layout) in {root}: 6 baseline 4:2:0; median 60x48 pixels" in err
    assert "photos: 1 linked folders left out, already read by another path (a link that loops, or into another " \
           "class): ant/loop" in err
    r = json.loads(out.read_text())
    assert r["photos"]["files"] == 6 and r["photos"]["classes"] == 3 and r["verify_mismatches"] == []
    ds = photos.JpegDataset(24, train.prepare(cfg).photos)
    assert [ds.label(i) for i in range(7)] == [0, 0, 0, 1, 2, 2, 0]


def test_a_folder_that_cannot_be_read_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "locked").mkdir()

    def denied(path):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(photo_cache.os, "scandir", denied)  # (chmod does not stop root, and CI runs as root)
    code, line = refusal(capsys, "train.py", "--variant", "jpeg", "--data-dir", str(tmp_path / "locked"), *SMALL)
    assert code == 2 and line == f"train.py: error: --data-dir {tmp_path / 'locked'}: cannot be read (Permission denied)"


def test_a_header_past_the_pixel_limit_is_refused_before_it_is_decoded(tmp_path):
    """A few hundred bytes whose header claims 60000 x 60000: the decoder would take seconds and 11 GB."""
    data = bytearray(jpeg(16, 16))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = (60000).to_bytes(2, "big") * 2
    bomb = tmp_path / "bomb.jpg"
    bomb.write_bytes(bytes(data))
    t0 = time.perf_counter()
    with pytest.raises(folders.BadImage) as e:
        decoders.decode(bomb, 24)
    assert time.perf_counter() - t0 < 0.5
    assert str(e.value) == f"{bomb}: 60000x60000 pixels, more than twice the limit of 89,478,485 " \
                           "(--max-image-pixels N raises it)"
    assert folders.jpeg_header(bytes(data), bomb, 60000 * 60000).height == 60000  # the flag raises it
    with pytest.raises(folders.BadImage, match="more than twice the limit of 100"):
        decoders.read_jpeg(tmp_path / "bomb.jpg", 100)  # the GPU path's workers check the same header


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:len(d) // 2], "cut short (its image data has no end marker)"),
    (lambda d: d[:len(d) // 2] + b"\xff\xd9", "corrupt JPEG data (the decoder said: Corrupt JPEG data: premature "
                                             "end of data segment)"),
    (lambda d: d[:20], "a damaged or cut-short JPEG header"),
    (lambda d: b"GIF89a" + d, "not a JPEG file"),
])
def test_a_damaged_stream_is_corrupt_and_named_on_both_paths(tmp_path, capfd, damage, message):
    """What the decoder only warns about (and torchvision prints, naming no file) is an error naming the
    file; the GPU path's workers, which decode nothing, refuse a stream that was cut short."""
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(damage(jpeg(40, 40)))  # (under twice the size: decoded whole, by torchvision, warnings caught)
    with pytest.raises(folders.BadImage) as e:
        decoders.decode(bad, 24)
    assert str(e.value) == f"{bad}: {message}" or str(e.value).startswith(f"{bad}: {message}")
    assert "Corrupt JPEG" not in capfd.readouterr().err  # the decoder's own line was taken, not printed
    if "decoder said" not in message:
        with pytest.raises(folders.BadImage, match=message.split(" (")[0]):
            decoders.read_jpeg(bad, folders.MAX_PIXELS)


def test_any_file_name_is_read_and_printed(tmp_path, capsys):
    """A name that is not valid UTF-8 (as an old camera or another OS writes): decoded, and printed escaped."""
    d = tmp_path / "odd"
    d.mkdir()
    name = os.fsdecode(b"caf\xe9.jpg")  # Latin-1
    (d / name).write_bytes(jpeg(30, 40))
    (d / "ok.jpg").write_bytes(jpeg(30, 40, 1))
    files = folders.find_photos(d)[0]
    assert decoders.decode(files[0], 24).shape == (3, 24, 24)
    assert folders.shown(files[0]) == f"{d}/caf\\xe9.jpg"
    (d / name).write_bytes(b"\xff\xd8 broken")
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg", "--workers", "1", "--data-dir", str(d), "--skip-bad-images",
                              *SMALL, "--json", str(out)])
    assert train.main(cfg) == 0
    assert "files, which do not decode: caf\\xe9.jpg" in capsys.readouterr().err


def test_the_decode_ahead_thread_hands_on_a_bad_file_and_ends_with_the_run(folder, tmp_path, capsys):
    """--gpu-decode decodes on a thread of its own: a file its workers refuse stops the run as on the loop's
    thread (exit 3, named), and no thread outlives the run."""
    bad = folder / "2.JPG"
    bad.write_bytes(bad.read_bytes()[:-100])
    cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(folder), *SMALL,
                              "--no-compile"])
    assert train.main(cfg) == 3
    assert f"error: {bad}: cut short (its image data has no end marker)" in capsys.readouterr().err
    assert not [t for t in threading.enumerate() if t.name == "decode-ahead"]


def test_decode_ahead_counts_its_batches_in_the_drain_and_its_own_time(folder, tmp_path, capsys):
    """The batches decoded ahead are dropped with the workers' queue, so the clock starts on what the
    pipeline sustains; the record says how many. It also says how long the thread worked on the window's
    batches, which is what caps the path when the thread is busy most of the window."""
    out = tmp_path / "run.json"
    cfg = train.parse_config(["--variant", "jpeg-gpu", "--workers", "2", "--data-dir", str(folder), *SMALL,
                              "--no-compile", "--json", str(out)])
    assert cfg.ahead == cfg.queued + sources.DECODE_AHEAD
    assert train.main(cfg) == 0
    r = json.loads(out.read_text())
    assert r["drained"] == cfg.queued + sources.DECODE_AHEAD
    thread = r["decode_thread"]
    assert thread["batches"] >= 1 and 0 < thread["busy_share"] <= 1
    assert 0 < thread["cpu_ms_median"] <= thread["busy_ms_median"] * 1.05  # (CPU time is counted in coarser ticks)
    assert f"the decoding thread: busy {thread['busy_share']:.0%} of the window" in capsys.readouterr().err


def test_decoding_threads_hand_the_batches_over_in_the_order_they_took_them(monkeypatch):
    """--decode-threads: a pool slot goes back to the workers a fixed number of batches after its own, so the
    threads hand their batches over in the order they took them, whichever finishes first: a batch handed past
    a slow one would let a worker overwrite the slow one's bytes while it is decoded. Here batch 0 takes 100
    times as long as the rest, on 3 threads."""
    class Source:
        queued = 0

        def __init__(self):
            self.taken = 0

        def __next__(self):
            self.taken += 1
            return self.taken - 1

        def copy_issued(self, host, done):
            pass

        def close(self):
            pass

    def decode(host, *_):
        time.sleep(0.2 if host == 0 else 0.002)
        return types.SimpleNamespace(ready=None, number=host), []
    monkeypatch.setattr(sources, "decode_on_device", decode)
    ahead = sources.DecodeAhead(Source(), torch.device("cpu"), False, False, 8, threads=3)
    try:
        assert [ahead.fetch().number for _ in range(12)] == list(range(12))
    finally:
        ahead.close()


def test_the_thread_figures_set_nvjpegs_own_calls_beside_the_threads_time():
    """A CUDA sync that spins counts as CPU time, so the thread's CPU time alone cannot tell work from waiting
    on the device: nvjpeg's planes time their own calls, and the record gives their median beside the
    thread's, over the batches started in the window only. A decoder that keeps no calls adds nothing."""
    ahead = types.SimpleNamespace(threads=[None, None], took=[(0.5, 0.2, 0.2), (1.0, 0.02, 0.02), (1.5, 0.03, 0.03)],
                                  decoders=[types.SimpleNamespace(calls=[(0.5, 0.1, 0.1), (1.0, 0.012, 0.004)]),
                                            types.SimpleNamespace(calls=[(1.5, 0.016, 0.006)])])
    figures = sources.DecodeAhead.thread_figures(ahead, 0.9, 2.0)
    assert figures["batches"] == 2 and figures["busy_ms_median"] == 30.0
    assert (figures["nvjpeg_ms_median"], figures["nvjpeg_cpu_ms_median"]) == (16.0, 6.0)
    assert figures["busy_share"] == round(0.05 / 1.1 / 2, 3)
    ahead.decoders = [None, object()]
    assert "nvjpeg_ms_median" not in sources.DecodeAhead.thread_figures(ahead, 0.9, 2.0)
    assert decoders.planes_decoder().calls == []  # (what the thread reads of the planes' decoder it made)


def test_the_resized_cache_is_made_once_reused_and_remade_when_a_file_changes(tmp_path, cache, capsys):
    """--resized-cache: photos larger than --img-size are read from a copy at that size (shorter side), made
    whole once under the cache, in the folder's layout, its labels kept; a changed file makes a new copy
    and the old one goes; the user's folder is never written."""
    root = tmp_path / "big"
    for cls in ("cats", "dogs"):
        (root / cls).mkdir(parents=True)
        for k in range(3):
            (root / cls / f"{k}.jpg").write_bytes(jpeg(96, 128, k))
    (root / "dogs" / "small.jpg").write_bytes(jpeg(20, 30, 9))  # smaller than --img-size: copied as it is
    before = sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*"))
    args = ["--variant", "jpeg", "--workers", "1", "--data-dir", str(root), "--resized-cache", *SMALL]
    found = opened(args)
    copy = found.folder
    assert copy.parent == cache / "gpu-starvation" and found.resized["made"] and found.source == root
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.jpg")) == [
        "cats/0.jpg", "cats/1.jpg", "cats/2.jpg", "dogs/0.jpg", "dogs/1.jpg", "dogs/2.jpg", "dogs/small.jpg"]
    header = folders.jpeg_header((copy / "cats" / "0.jpg").read_bytes(), "x", folders.MAX_PIXELS)
    assert (header.height, header.width) == (32, 42)
    assert (copy / "dogs" / "small.jpg").read_bytes() == (root / "dogs" / "small.jpg").read_bytes()
    assert found.classes == ["cats", "dogs"] and found.labels == [0, 0, 0, 1, 1, 1, 1]
    again = opened(args)
    assert again.folder == copy and not again.resized["made"]  # reused
    out = tmp_path / "run.json"
    assert train.main(train.parse_config([*args, "--json", str(out)])) == 0
    r = json.loads(out.read_text())
    assert r["data_dir"] == str(root) and r["resized_cache"]["folder"] == str(copy)
    (root / "cats" / "1.jpg").write_bytes(jpeg(100, 100, 5))  # a file changes: a new copy, the old one goes
    changed = opened(args)
    assert changed.folder != copy and changed.resized["made"] and not copy.exists()
    assert sorted((p, p.stat().st_mtime_ns) for p in root.rglob("*") if p.name != "1.jpg") == \
        [b for b in before if b[0].name != "1.jpg"]


def test_the_resized_cache_is_never_half_written(tmp_path, cache, capsys):
    """A bad photo met while the copy is made: one line naming it, exit 2, and no copy (nor part of one)."""
    root = tmp_path / "big"
    root.mkdir()
    for k in range(4):
        (root / f"{k}.jpg").write_bytes(jpeg(96, 128, k))
    (root / "2.jpg").write_bytes(jpeg(96, 128)[:-200])
    code, line = refusal(capsys, "train.py", "--variant", "jpeg", "--data-dir", str(root), "--resized-cache", *SMALL)
    assert code == 2 and line == f"train.py: error: --resized-cache: {root / '2.jpg'}: cut short (its image data " \
                                 "has no end marker)"
    assert not list((cache / "gpu-starvation").glob("resized-*"))
    code, line = refusal(capsys, "train.py", "--variant", "jpeg", "--resized-cache", *SMALL)
    assert code == 2 and "--resized-cache copies --data-dir's photos" in line


def test_the_other_decoders_are_asked_for_by_name_and_only_where_installed(capsys, monkeypatch):
    """--gpu-decoder nvimgcodec or torchcodec: refused in one line where the package is not installed;
    torchvision's decoder unless another is asked for."""
    from conftest import refusal
    from starvation import settings
    monkeypatch.setattr(settings, "installed", lambda module: False)
    code, line = refusal(capsys, "train.py", "--variant", "jpeg-gpu", "--gpu-decoder", "nvimgcodec", "--device", "cpu")
    assert code == 2 and line.endswith("nvImageCodec is not installed here (pip install nvidia-nvimgcodec-cu13 "
                                       "nvidia-nvjpeg)"), line
    code, line = refusal(capsys, "train.py", "--variant", "jpeg-gpu", "--gpu-decoder", "torchcodec", "--device", "cpu")
    assert code == 2 and line.endswith("TorchCodec is not installed here (pip install torchcodec)"), line
    import train
    assert train.parse_config(["--variant", "jpeg-gpu", "--device", "cpu"]).gpu_decoder == "torchvision"


# ---- --augment: random-resized crops and flips, on both paths

def smooth_jpeg(h: int, w: int) -> bytes:
    """A photo of gradients (no noise): a crop decoded at a fraction of its size looks like the same crop decoded
    whole and resized."""
    y, x = torch.meshgrid(torch.linspace(0, 1, h), torch.linspace(0, 1, w), indexing="ij")
    image = torch.stack([255 * x, 255 * y, 128 + 100 * torch.sin(6 * x * y)]).round().to(torch.uint8)
    return encode_jpeg(image, quality=95).numpy().tobytes()


def test_augment_decodes_a_camera_file_only_as_large_as_its_crop_needs(tmp_path, monkeypatch):
    """A 1600x1200 file, a crop of its middle quarter (600x800 pixels) flipped, at 32: libjpeg's scaling decodes it
    at 1/8 (200x150), which still gives the crop 75 pixels a side, and the crop comes out as the one cut from the
    whole decode."""
    path = tmp_path / "camera.jpg"
    path.write_bytes(smooth_jpeg(1200, 1600))
    crop = (0.25, 0.25, 0.5, 0.5, True)
    monkeypatch.setattr(decoders, "crop_boxes", lambda shapes: [crop])
    sizes = []
    monkeypatch.setattr(decoders, "decoded", lambda *args, f=decoders.decoded: sizes.append(args[3]) or f(*args))
    image = decoders.decode(path, 32, augment=True)
    assert image.shape == (3, 32, 32) and image.dtype == torch.uint8 and sizes == [64]
    whole = decoders.decode_whole(photo_cache.read_file(str(path)), path)
    expected = decoders.cut(whole, crop, 32)
    assert (image.int() - expected.int()).abs().float().mean() < 3
    assert not torch.equal(expected, decoders.cut(whole, crop[:4] + (False,), 32))  # (the flip flipped it)


def test_augment_on_the_device_cuts_each_image_a_crop_of_its_own(folder):
    files = folders.find_photos(folder)[0]
    encoded = [photo_cache.read_file(str(f)) for f in files if f.suffix.lower() in (".jpg", ".jpeg")]
    fitted = decoders.decode_batch(encoded, 24, torch.device("cpu"))[0]
    torch.manual_seed(0)
    once = decoders.decode_batch(encoded, 24, torch.device("cpu"), augment=True)[0]
    again = decoders.decode_batch(encoded, 24, torch.device("cpu"), augment=True)[0]
    torch.manual_seed(0)
    assert torch.equal(decoders.decode_batch(encoded, 24, torch.device("cpu"), augment=True)[0], once)
    assert once.shape == fitted.shape and not torch.equal(once, fitted) and not torch.equal(once, again)


@pytest.mark.parametrize("variant", ["jpeg", "jpeg-gpu"])
def test_augment_is_verified_on_both_paths_and_its_copy_kept_at_twice_the_size(variant, folder, tmp_path, cache):
    """The folder's photos are 32 to 120 pixels a side: at --img-size 24, the copy keeps them at 48, from which
    the crops are cut."""
    out = tmp_path / "run.json"
    args = ["--variant", variant, "--workers", "2", "--data-dir", str(folder), "--verify", *SMALL, "--img-size", "24",
            "--no-compile", "--augment", "--resized-cache", "--json", str(out)]
    assert train.main(train.parse_config(args)) == 0
    r = json.loads(out.read_text())
    assert r["verified_batches"] == 4 and r["verify_mismatches"] == [] and r["settings"]["augment"]
    assert r["resized_cache"]["size"] == 48
    copy = Path(r["resized_cache"]["folder"])
    assert [min(decoders.decode_whole(photo_cache.read_file(str(copy / f)), f).shape[-2:])
            for f in ("1.JPG", "3.JPG")] == [48, 48]  # (80x50 and 100x120 in the folder)


def test_cache_size_sets_the_copys_size_and_is_refused_below_the_training_size(folder, tmp_path, cache, capsys):
    out = tmp_path / "run.json"
    args = ["--variant", "jpeg-gpu", "--workers", "1", "--data-dir", str(folder), *SMALL, "--img-size", "24",
            "--no-compile", "--augment", "--resized-cache", "--cache-size", "36", "--json", str(out)]
    assert train.main(train.parse_config(args)) == 0
    assert json.loads(out.read_text())["resized_cache"]["size"] == 36
    code, line = refusal(capsys, "train.py", "--variant", "jpeg", "--data-dir", str(folder), "--cache-size", "36")
    assert code == 2 and "--cache-size sizes --resized-cache's copy: add --resized-cache" in line
    code, line = refusal(capsys, "train.py", "--variant", "jpeg", "--data-dir", str(folder), "--resized-cache",
                         "--img-size", "24", "--cache-size", "16")
    assert code == 2 and "--cache-size 16 is smaller than --img-size 24" in line


def test_augment_needs_photos(capsys):
    code, line = refusal(capsys, "train.py", "--augment")
    assert code == 2 and "--augment crops and flips --jpeg's photos" in line
