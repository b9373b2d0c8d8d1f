"""
The photo cache, under ~/.cache/gpu-starvation (XDG_CACHE_HOME): the default set and the resized copies of a
user's folder, each made whole or not at all (built_once), so that a run killed while making one leaves
nothing a later run would read.

The default set is made once, on first use, from the sample photos that scikit-image ships (read from its
package folder: scikit-image itself is never imported): distinct crops at a random scale and place, some
flipped, re-lit, saved as JPEG at quality 90. --resized-cache copies a user's folder with each photo's
shorter side at --img-size, and --baseline-copy its progressive files as baseline ones at their own size, in
processes of its own; nothing is ever written into the folder.
"""
import hashlib
import importlib.util
import io
import json
import multiprocessing
import os
import shutil
import signal
import time
from pathlib import Path

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_image, encode_jpeg, read_file

from starvation.decoders import decode_whole, decoded
from starvation.folder import BadImage, pil, read_checked, shown

# scikit-image's real photographs (its data folder also holds drawings, textures and micrographs)
SAMPLE_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "motorcycle_right.png",
                 "rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")
COUNT = 128  # distinct images in the default set: more than a batch, so a batch is not one photo repeated
QUALITY = 90


def sample_photos() -> list[Path]:
    """scikit-image's sample photos, found without importing it; ValueError saying how to get them."""
    spec = importlib.util.find_spec("skimage")
    folder = Path(spec.origin).parent / "data" if spec is not None and spec.origin else None
    found = [folder / name for name in SAMPLE_PHOTOS if folder is not None and (folder / name).is_file()]
    if not found:
        raise ValueError("the default JPEG set is cut from the sample photos scikit-image ships, and it is not "
                         "installed here: pip install scikit-image, or give --data-dir DIR (a folder of JPEGs)")
    return found


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-starvation"


def built_once(folder: Path, make, fix: str) -> bool:
    """A cache folder made whole or not at all: make(partial) writes into a folder of its own, renamed into
    place at the end. Whether this call made it: another run making it at the same time is no error
    (theirs is as good), and what a killed build left is cleared first. ValueError, in one line naming the
    cache and `fix`, when the cache cannot be written."""
    if folder.is_dir():
        return False
    making = Path(f"{folder}.making-{os.getpid()}")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        for stale in folder.parent.glob(f"{folder.name}.making-*"):  # a build killed before it could clear up
            pid = stale.name.rsplit("-", 1)[1]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        making.mkdir()
        make(making)
        making.rename(folder)
    except OSError as e:
        shutil.rmtree(making, ignore_errors=True)
        if folder.is_dir():  # another run made it meanwhile (the rename found it there): theirs is as good
            return False
        raise ValueError(f"the photo cache {folder.parent} cannot be written ({e.strerror}): set XDG_CACHE_HOME to "
                         f"a writable folder, or {fix}") from None
    except BaseException:
        shutil.rmtree(making, ignore_errors=True)
        raise
    return True


def default_set(size: int, count: int = COUNT) -> tuple[Path, bool]:
    """The default folder for --img-size size, made once, on first use (built_once); and whether this call
    made it."""
    folder = cache_root() / f"photos-{size}px-{count}"
    if folder.is_dir():
        return folder, False

    def make(into: Path) -> None:
        photos = [decode_image(read_file(str(p)), mode=ImageReadMode.RGB) for p in sample_photos()]
        g = torch.Generator().manual_seed(0)
        for k in range(count):
            crop = random_crop(photos[k % len(photos)], size, g)
            (into / f"{k:04d}.jpg").write_bytes(encode_jpeg(crop, quality=QUALITY).numpy().tobytes())
    return folder, built_once(folder, make, "give --data-dir DIR")


def quiet_worker() -> None:
    """A process of the copy's pool: forked from train.py, it would run its SIGTERM and SIGINT handlers and
    print a traceback when the pool stops it. Ctrl-C is the parent's to handle; SIGTERM just ends it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch.set_num_threads(1)


def resize_one(job: tuple) -> tuple[str, int] | str:
    """One file of resized_copy, in a process of its pool: its copy's path in the copy and size, or why it
    could not be made. A baseline JPEG already that small is copied as it is; any other file is written as
    a baseline JPEG (under its own name, plus .jpg when it was another format), which the GPU's batched
    decoder takes."""
    f, folder, into, max_pixels, size = job
    try:
        raw, header = read_checked(f, max_pixels)
        name = f.relative_to(folder)
        if header.format != "JPEG":
            name = name.with_name(name.name + ".jpg")
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if min(header.height, header.width) <= size and header.format == "JPEG" and not header.progressive:
            target.write_bytes(raw)
        else:
            image = decoded(raw, f, header, size)
            if min(image.shape[-2:]) > size:
                image = TF.resize(image, size, antialias=True)
            target.write_bytes(encode_jpeg(image.contiguous(), quality=QUALITY).numpy().tobytes())
        return os.fsdecode(name), target.stat().st_size
    except BadImage as e:
        return str(e)


def baseline_one(job: tuple) -> tuple[str, int] | str:
    """One progressive JPEG of baseline_copy, in a process of its pool: written again as a baseline JPEG at its
    own size, with its own quantization tables and subsampling (PIL's quality="keep"), under its own name; or
    why it could not be made. It is decoded first as the workers would (decode_whole), so that a damaged file
    stops the copy, named, as it would stop the run."""
    f, folder, into, max_pixels = job
    try:
        raw = read_checked(f, max_pixels)[0]
        decode_whole(torch.frombuffer(bytearray(raw), dtype=torch.uint8), f)
        name = f.relative_to(folder)
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        with pil().open(io.BytesIO(raw)) as im:
            im.save(into / name, "JPEG", quality="keep", subsampling="keep")
        return os.fsdecode(name), (into / name).stat().st_size
    except (OSError, ValueError) as e:  # (PIL's, on a file libjpeg read without a word)
        return f"{shown(f)}: does not decode as a JPEG ({str(e).splitlines()[0] if str(e) else e})"
    except BadImage as e:
        return str(e)


MANIFEST = "copy.json"  # in a copy: each file it holds and its size, as made


def intact(copy: Path) -> bool:
    """Whether a copy still holds every file it was made with, at the size it was made."""
    try:
        made = json.loads((copy / MANIFEST).read_text())
        return all((copy / name).stat().st_size == n for name, n in made.items())
    except (OSError, ValueError, AttributeError):
        return False


def copy_of(folder: Path, files: list[Path], kind: str, one, args: tuple, skip_bad: bool, processes: int,
            fix: str) -> tuple[Path, bool, float]:
    """Files of a user's folder made again under the cache, as `kind`-<folder>-<files>, in the same layout, each
    by one((file, folder, into, *args)) in a process of its own pool (it returns the file's name in the copy and
    its size, or why it could not be made); made once (built_once) and reused while the files are the same (their
    paths, sizes and times: a file changed, added or removed makes a new copy, and the old one goes) and the copy
    is intact (a file of it removed or changed makes it again). The copy, whether this call made it, and the
    seconds it took. A file that does not decode stops it (BadImage), or is left out with skip_bad. Nothing is
    written into the folder."""
    source = hashlib.sha1(os.fsencode(os.path.realpath(folder)) + kind.encode()).hexdigest()[:12]
    listing = hashlib.sha1()
    for f in files:
        st = f.stat()
        listing.update(os.fsencode(f.relative_to(folder)) + f" {st.st_size} {st.st_mtime_ns}\n".encode())
    copy = cache_root() / f"{kind}-{source}-{listing.hexdigest()[:12]}"
    if copy.is_dir():
        if intact(copy):
            return copy, False, 0.0
        shutil.rmtree(copy, ignore_errors=True)  # changed since it was made: made again, below

    def make(into: Path) -> None:
        made = {}
        # processes, not threads: each catches its decoder's warnings on an fd 2 of its own
        with multiprocessing.get_context("fork").Pool(max(1, processes), initializer=quiet_worker) as pool:
            for result in pool.imap(one, [(f, folder, into, *args) for f in files], chunksize=4):
                if isinstance(result, str):
                    if not skip_bad:
                        raise BadImage(result)
                else:
                    made[result[0]] = result[1]
        (into / MANIFEST).write_text(json.dumps(made))

    t0 = time.perf_counter()
    made = built_once(copy, make, fix)
    for old in copy.parent.glob(f"{kind}-{source}-*"):  # the copies of the folder as it was
        if old != copy and ".making-" not in old.name:
            shutil.rmtree(old, ignore_errors=True)
    return copy, made, time.perf_counter() - t0


def resized_copy(folder: Path, files: list[Path], size: int, max_pixels: int, skip_bad: bool,
                 processes: int) -> tuple[Path, bool, float]:
    """--resized-cache: a copy of a user's folder with each photo's shorter side resized to size (JPEG at
    QUALITY; resize_one), by copy_of."""
    return copy_of(folder, files, f"resized-{size}px", resize_one, (max_pixels, size), skip_bad, processes,
                   "drop --resized-cache")


def baseline_copy(folder: Path, files: list[Path], max_pixels: int, processes: int) -> tuple[Path, bool, float]:
    """--baseline-copy: the folder's progressive JPEG files (`files`) written again as baseline ones at their own
    size and quantization (baseline_one), which the GPU's batched decode takes, by copy_of."""
    return copy_of(folder, files, "baseline", baseline_one, (max_pixels,), False, processes, "drop --baseline-copy")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def random_crop(photo: torch.Tensor, size: int, g: torch.Generator) -> torch.Tensor:
    """A size x size crop of photo at a random scale (the crop 1 to 1.6 times smaller than the photo's
    shorter side allows) and place, flipped half the time, its brightness scaled by 0.8 to 1.2."""
    h, w = photo.shape[-2:]
    scale = size / min(h, w) * (1 + 0.6 * torch.rand((), generator=g).item())
    image = TF.resize(photo, [max(size, round(h * scale)), max(size, round(w * scale))], antialias=True)
    top = int(torch.randint(0, image.shape[-2] - size + 1, (), generator=g))
    left = int(torch.randint(0, image.shape[-1] - size + 1, (), generator=g))
    image = image[:, top:top + size, left:left + size]
    if torch.rand((), generator=g).item() < 0.5:
        image = image.flip(-1)
    light = 0.8 + 0.4 * torch.rand((), generator=g).item()
    return (image.float() * light).clamp(0, 255).to(torch.uint8).contiguous()
