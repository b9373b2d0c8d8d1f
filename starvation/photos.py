"""
Real photos for train.py --jpeg: the default set, how a file is decoded, and the datasets that read them.

The default set is made once, on first use, from the sample photos that scikit-image ships (read from
its package folder: scikit-image itself is never imported): distinct crops at a random scale and
place, some flipped, re-lit, saved as JPEG at quality 90, in a cache folder that the log line names.
--data-dir DIR reads a user's own folder instead (starvation/folder.py finds its files and reads their
headers): JPEG files, and PNG, WebP or BMP as ImageFolder reads them; any sizes (resized and cropped to
--img-size), grey and CMYK made RGB. Nothing is ever written into it.

Every file passes one guard, whichever decoder reads it: its header is read first (a file whose header
claims more than twice --max-image-pixels is refused before anything is allocated for it), a stream cut
short or that the decoder calls corrupt stops the run naming the file (or, with --skip-bad-images, is
skipped), and any file name is read and printed, valid UTF-8 or not.
"""
import collections
import contextlib
import functools
import hashlib
import importlib.util
import io
import itertools
import json
import multiprocessing
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_image, decode_jpeg, encode_jpeg, read_file

from starvation.data import Batch, BatchedImages, Images, Loader, moved
from starvation.folder import MAX_PIXELS, SUFFIXES, BadImage, Header, Survey, find_photos, jpeg_header, \
    pil, read_checked, shown  # noqa: F401  (MAX_PIXELS, SUFFIXES, jpeg_header: the settings' and the tests')
from starvation.resize import fit, fit_all
from starvation.runtime import checksum, new_stream

# scikit-image's real photographs (its data folder also holds drawings, textures and micrographs)
SAMPLE_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "motorcycle_right.png",
                 "rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")
COUNT = 128  # distinct images in the default set: more than a batch, so a batch is not one photo repeated
QUALITY = 90
DECODE_AHEAD = 2  # --gpu-decode: batches decoded ahead of the loop, on a thread of its own (DecodeAhead)
DECODE_PRIORITY = -1  # its stream's priority (lower is sooner; the default streams' is 0)
POOL_BYTES = 4 * 10**9  # --gpu-decode: the most that the files' bytes take in the pool, all slots together


_captured = (None, None)  # (pid, file): where fd 2 points while this process decodes a file


@contextlib.contextmanager
def decoder_warnings():
    """What the C decoder prints on fd 2 while it decodes, in the list yielded (one string, after the block).
    libjpeg warns, as in 'Corrupt JPEG data: premature end of data segment', and torchvision prints it and
    returns an image anyway, naming no file: the guard reads the warning, so that the file can be named."""
    global _captured
    if _captured[0] != os.getpid():  # one temporary file per process: a forked worker makes its own
        _captured = (os.getpid(), tempfile.TemporaryFile())
    capture = _captured[1]
    capture.seek(0)
    capture.truncate()
    sys.stderr.flush()
    saved, said = os.dup(2), []
    os.dup2(capture.fileno(), 2)
    try:
        yield said
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        capture.seek(0)
        text = capture.read().decode(errors="replace").strip()
        if text and "JPEG" not in text:  # another thread's line, not the decoder's: it goes where it was going
            sys.stderr.write(text + "\n")
        said.append(text if "JPEG" in text else "")


def read_jpeg(path: Path, max_pixels: int) -> torch.Tensor:
    """A file's checked bytes (read_checked) as a 1-D uint8 tensor, as the decoders take them."""
    return torch.frombuffer(bytearray(read_checked(path, max_pixels)[0]), dtype=torch.uint8)


def decode_scaled(data: bytes, path: Path, header: Header, size: int) -> torch.Tensor:
    """A large JPEG decoded by PIL at a fraction of its size (libjpeg's DCT-domain scaling, `draft`: 1/2, 1/4
    or 1/8, as long as the shorter side stays at least `size`), to uint8 RGB: a camera's file costs a fraction
    of its full decode. libjpeg's warnings are silent here, so the guard is the header's end-marker check and
    a decode that raises on a stream that ends early."""
    Image = pil()
    scale = size / min(header.height, header.width)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.draft("RGB" if header.components == 3 else im.mode,
                     (max(1, int(header.width * scale + 1)), max(1, int(header.height * scale + 1))))
            return TF.pil_to_tensor(im.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as e:
        raise BadImage(f"{shown(path)}: does not decode as a JPEG ({str(e).splitlines()[0] if str(e) else e})") \
            from None


def decode_other(data: bytes, path: Path) -> torch.Tensor:
    """A PNG, WebP or BMP file decoded by PIL to uint8 RGB (transparency dropped, as ImageFolder's loader does)."""
    Image = pil()
    try:
        with Image.open(io.BytesIO(data)) as im:
            return TF.pil_to_tensor(im.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as e:
        raise BadImage(f"{shown(path)}: does not decode ({str(e).splitlines()[0] if str(e) else e})") from None


def decode_whole(data: torch.Tensor, path: Path) -> torch.Tensor:
    """A file's bytes decoded on the CPU to uint8 RGB (3, H, W); BadImage, naming the file, if the decoder
    fails or only warns (decoder_warnings)."""
    with decoder_warnings() as said:
        try:
            image = decode_jpeg(data, mode=ImageReadMode.RGB)
        except RuntimeError as e:  # torchvision's decoder reports a corrupt or truncated file so
            raise BadImage(f"{shown(path)}: does not decode as a JPEG ({str(e).strip().splitlines()[0]})") from None
    if said[0]:
        raise BadImage(f"{shown(path)}: corrupt JPEG data (the decoder said: {said[0].splitlines()[0]})")
    return image


def decoded(data: bytes, path: Path, header: Header, size: int) -> torch.Tensor:
    """A checked file's bytes as uint8 RGB (3, H, W), on the CPU, by the decoder that fits it: PIL for another
    format, a JPEG whose shorter side is at least twice `size` scaled (decode_scaled), any other whole."""
    if header.format != "JPEG":
        return decode_other(data, path)
    if min(header.height, header.width) >= 2 * size:
        return decode_scaled(data, path, header, size)
    return decode_whole(torch.frombuffer(bytearray(data), dtype=torch.uint8), path)


def decode(path: Path, size: int, max_pixels: int = MAX_PIXELS) -> torch.Tensor:
    """One file as uint8 RGB (3, size, size), on the CPU (decoded, then fit); BadImage if it does not decode
    whole."""
    data, header = read_checked(path, max_pixels)
    return fit(decoded(data, path, header, size), size)


def installed(module: str) -> bool:
    """Whether a package is installed (found, not imported: nvImageCodec's and TorchCodec's load CUDA libraries)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # no such namespace package at all
        return False


def before_nvjpeg_writes(device: torch.device) -> None:
    """Wait until the current stream has done what it still reads. nvjpeg writes its images when it is called,
    not in this stream's order (its hardware engines; torchvision's decoder, from a stream of its own), into
    memory that the caching allocator hands out on this stream, maybe while a kernel queued on it still reads
    that memory. Called before torchvision's decoder and TorchCodec's (0.16 does not wait)."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()  # note: a CPU-GPU sync point


def torchcodec_decoder():
    """TorchCodec's batched JPEG decoder (nvjpeg: the hardware engines where the GPU has them), which decodes on
    the current stream. It turns a photo upright by its EXIF orientation, as torchvision's decoder here does
    not. Returns decode(list of 1-D uint8 tensors, device) -> list of CHW images."""
    from torchcodec.decoders import decode_jpeg as batch_decode

    def decode(encoded: list[torch.Tensor], device: torch.device) -> list[torch.Tensor]:
        before_nvjpeg_writes(device)  # (its call waits for the stream anyway before it returns)
        return batch_decode(list(encoded), mode="RGB", device=device)
    return decode


def hardware_decoder():
    """nvImageCodec's batched decoder: the GPU's hardware JPEG engines (nvjpeg's hardware backend: A100, H100,
    H200 and later), which leave the SMs to the step, and its CUDA decoder for a file they do not take.
    Returns decode(list of 1-D uint8 tensors, device) -> list of CHW images, None for a file it refused."""
    with decoder_warnings() as said:  # its start-up says on fd 2 which of its codecs' libraries are missing
        from nvidia import nvimgcodec
        decoder = nvimgcodec.Decoder(backends=[nvimgcodec.Backend(nvimgcodec.BackendKind.HW_GPU_ONLY),
                                               nvimgcodec.Backend(nvimgcodec.BackendKind.GPU_ONLY)])
    for line in said[0].splitlines():  # JPEG 2000 and TIFF, which this never reads, go unsaid
        if not any(other in line.lower() for other in ("jpeg2k", "jpeg2000", "tiff")):
            sys.stderr.write(line + "\n")
    params = nvimgcodec.DecodeParams(color_spec=nvimgcodec.ColorSpec.SRGB, apply_exif_orientation=False)

    def decode(encoded: list[torch.Tensor], device: torch.device) -> list:
        stream = getattr(torch.get_device_module(device.type).current_stream(), "cuda_stream", None)
        return [None if m is None else torch.as_tensor(m, device=device).permute(2, 0, 1)
                for m in decoder.decode([nvimgcodec.CodeStream(t.numpy()) for t in encoded], params=params,
                                        cuda_stream=stream or 0)]
    return decode


def decode_batch(encoded: list[torch.Tensor], size: int, device: torch.device,
                 decoder=None) -> tuple[torch.Tensor, list]:
    """A batch of JPEG files' bytes (1-D uint8 tensors on the CPU) decoded on the device, on the current
    stream, to uint8 RGB (k, 3, size, size): by `decoder` (torchcodec_decoder() or hardware_decoder()) where
    given, else by torchvision (nvjpeg's CUDA decoder, batched); a file the decoder refuses goes to
    torchvision's, and so does a batch it fails on. Also returns the images as decoded, which the caller keeps
    until the stream is past its reads of them. BadImage names which sample of the batch does not decode (the
    workers read bytes only, so no file name is at hand here)."""
    if not encoded:  # the workers decoded the whole batch
        return torch.empty((0, 3, size, size), dtype=torch.uint8, device=device), []
    images = [None] * len(encoded)
    if decoder is not None:
        try:
            images = decoder(encoded, device)
        except RuntimeError:  # a file it cannot decode, in the batch: torchvision's decoder, below, names it
            images = [None] * len(encoded)
    left = [j for j, m in enumerate(images) if m is None]
    if left:
        before_nvjpeg_writes(device)
    try:
        for j, m in zip(left, decode_jpeg([encoded[j] for j in left], mode=ImageReadMode.RGB, device=device)
                        if left else []):
            images[j] = m
    except RuntimeError as e:
        for j in left:  # find it: each on the CPU, whose decoder says which
            try:
                decode_jpeg(encoded[j], mode=ImageReadMode.RGB)
            except RuntimeError:
                raise BadImage(f"sample {j} of a batch does not decode as a JPEG on the {device.type} ("
                               f"{str(e).strip().splitlines()[0]}); decoding on the CPU names the file") from None
        raise
    return fit_all(images, size), images


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
    f, folder, into, size, max_pixels = job
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


MANIFEST = "copy.json"  # in a resized copy: each file it holds and its size, as made


def intact(copy: Path) -> bool:
    """Whether a resized copy still holds every file it was made with, at the size it was made."""
    try:
        made = json.loads((copy / MANIFEST).read_text())
        return all((copy / name).stat().st_size == n for name, n in made.items())
    except (OSError, ValueError, AttributeError):
        return False


def resized_copy(folder: Path, files: list[Path], size: int, max_pixels: int, skip_bad: bool,
                 processes: int) -> tuple[Path, bool, float]:
    """--resized-cache: a copy of a user's folder with each photo's shorter side resized to size (JPEG at
    QUALITY; resize_one), in the same layout, under the cache; made once (built_once) and reused while the
    folder's files are the same (their paths, sizes and times: a file changed, added or removed makes a new
    copy, and the old one goes) and the copy is intact (a file of it removed or changed makes it again). The
    copy, whether this call made it, and the seconds it took. A file that does not decode stops it
    (BadImage), or is left out with skip_bad. Nothing is written into the folder."""
    source = hashlib.sha1(os.fsencode(os.path.realpath(folder)) + str(size).encode()).hexdigest()[:12]
    listing = hashlib.sha1()
    for f in files:
        st = f.stat()
        listing.update(os.fsencode(f.relative_to(folder)) + f" {st.st_size} {st.st_mtime_ns}\n".encode())
    copy = cache_root() / f"resized-{size}px-{source}-{listing.hexdigest()[:12]}"
    if copy.is_dir():
        if intact(copy):
            return copy, False, 0.0
        shutil.rmtree(copy, ignore_errors=True)  # changed since it was made: made again, below

    def make(into: Path) -> None:
        jobs = [(f, folder, into, size, max_pixels) for f in files]
        made = {}
        # processes, not threads: each catches its decoder's warnings on an fd 2 of its own
        with multiprocessing.get_context("fork").Pool(max(1, processes), initializer=quiet_worker) as pool:
            for result in pool.imap(resize_one, jobs, chunksize=4):
                if isinstance(result, str):
                    if not skip_bad:
                        raise BadImage(result)
                else:
                    made[result[0]] = result[1]
        (into / MANIFEST).write_text(json.dumps(made))

    t0 = time.perf_counter()
    made = built_once(copy, make, "drop --resized-cache")
    for old in copy.parent.glob(f"resized-{size}px-{source}-*"):  # the copies of the folder as it was
        if old != copy and ".making-" not in old.name:
            shutil.rmtree(old, ignore_errors=True)
    return copy, made, time.perf_counter() - t0


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

# -----------------------------------------------------------------------------
# the datasets that read the files, for the CPU's decoder or the device's


class Photos:
    """--jpeg's files, their labels (None: sample i's is i % 10, as the synthetic data's) and classes, the
    survey of their headers, the pixel limit, and with --skip-bad-images which files did not decode: a flag a
    file in shared memory, so that every worker marks what it met and a file met twice counts once (None: the
    run stops on the first)."""

    def __init__(self, folder: Path, made: bool, skip_bad: bool, max_pixels: int = MAX_PIXELS,
                 resized: dict | None = None):
        self.folder, self.made, self.max_pixels, self.resized = folder, made, max_pixels, resized
        self.source = Path(resized["source"]) if resized else folder  # the user's folder, which a copy stands for
        self.files, self.labels, self.classes, self.left_out = find_photos(folder)
        self.skipped = multiprocessing.Array("b", len(self.files), lock=False) if skip_bad else None
        self.survey = Survey.of(self.files, max_pixels)
        self.routings: dict = {}

    def label(self, i: int) -> int:
        return i % 10 if self.labels is None else self.labels[i % len(self.files)]

    @functools.cached_property
    def summary(self) -> dict:
        """What was read, for the record and the first log line: the survey of the files' headers."""
        return self.survey.summary(len(self.classes))

    def routing(self, batch: int, cpu_decoded: int, slots: int, sequential: bool):
        """--gpu-decode: which files the workers decode and how many bytes of files a pool slot holds
        (Survey.routing), `slots` slots within POOL_BYTES; made once for the pool and the dataset alike."""
        key = (batch, cpu_decoded, slots, sequential)
        if key not in self.routings:
            self.routings[key] = self.survey.routing(batch, cpu_decoded, POOL_BYTES // max(1, slots), sequential)
        return self.routings[key]

    def lines(self, size: int) -> list[str]:
        """The run's log lines on what it reads: the folder and its survey, and what it left out or warns of."""
        what, where = self.summary, shown(self.folder)
        if self.made:
            where += " (made now from scikit-image's sample photos)"
        if self.resized:
            where += (f" (--resized-cache: {shown(self.resized['source'])} at --img-size {size}, "
                      + (f"made now in {self.resized['seconds']:.1f} s)" if self.resized["made"] else "made before)"))
        classes = f" in {what['classes']} classes (ImageFolder layout)" if what["classes"] else ""
        lines = [f"photos: {what['files']} files{classes} in {where}: {self.survey.line(what)}"]
        if self.left_out:
            lines.append(f"photos: {len(self.left_out)} linked folders left out, already read by another path (a "
                         f"link that loops, or into another class): " + ", ".join(self.left_out[:5])
                         + (", ..." if len(self.left_out) > 5 else ""))
        if what["over_pixel_limit"]:
            lines.append(f"warning: {what['over_pixel_limit']} files have more pixels than the limit of "
                         f"{self.max_pixels:,}: decoded all the same, as PIL does; past twice the limit a file is "
                         "refused (--max-image-pixels N)")
        return lines

    def named(self, f: Path) -> str:
        """A file by its path in the folder, as one line prints it."""
        return shown(f.relative_to(self.folder))

    def bad_files(self) -> list[Path]:
        """The files skipped so far, in the folder's order."""
        return [f for f, bad in zip(self.files, self.skipped or []) if bad]

    def skipped_line(self) -> str:
        """--skip-bad-images: what the run skipped, the first five named by their paths in the folder."""
        bad = self.bad_files()
        return (f"--skip-bad-images: skipped {len(bad)} of {len(self.files)} files, which do not decode"
                + (": " + ", ".join(self.named(f) for f in bad[:5]) + (", ..." if len(bad) > 5 else "")
                   if bad else ""))

    def __deepcopy__(self, memo):  # dataclasses.asdict(cfg) copies its fields: one set of files, one counter
        return self


class JpegDataset(Images):
    """--jpeg: sample i is file i % n of the folder, decoded on the CPU to uint8 RGB at --img-size.
    With skip_bad, a file that does not decode is marked (in shared memory, across the workers) and the
    next one taken in its place; else the run stops on it, naming it."""

    def __init__(self, n: int, img_size: int, photos: Photos, inject_fault: str | None = None):
        super().__init__(n, img_size, True, inject_fault)
        self.photos, self.files, self.skip_bad = photos, photos.files, photos.skipped

    def label(self, i: int) -> int:
        return self.photos.label(i)

    def fill(self, images: torch.Tensor, indices: list[int], batched: bool) -> None:
        self.fault_hook()
        for j, i in enumerate(indices):
            for k in range(len(self.files)):
                try:
                    images[j].copy_(decode(self.files[(i + k) % len(self.files)], self.shape[-1],
                                           self.photos.max_pixels))
                    break
                except BadImage:
                    if self.skip_bad is None:
                        raise
                    self.skip_bad[(i + k) % len(self.files)] = 1
            else:
                raise BadImage(f"no file of the folder decodes ({len(self.files)} tried)")


class BatchedJpegDataset(BatchedImages, JpegDataset):
    """--jpeg --batched-fetch: a whole batch decoded per call, into one tensor: no collate copy."""


class EncodedDataset(JpegDataset):
    """--gpu-decode: the workers read each file's bytes, and the device decodes the batch, ahead of the loop
    (DecodeAhead). A batch is the files' bytes, packed one after the other, and each one's length. The files
    the routing gives the workers (those the GPU's batched decoder would take one at a time, --cpu-decoded N
    more, and those the slot cannot hold) the workers decode themselves, as --jpeg's do: they come first in
    the batch, their lengths 0, their images in `decoded`; the labels follow the same order."""
    host_checksum = False  # the device checks what it decodes

    def __init__(self, n: int, img_size: int, photos: Photos, routing, inject_fault: str | None = None):
        super().__init__(n, img_size, photos, inject_fault)
        self.routing = routing

    def order(self, indices: list[int]) -> list[int]:
        """The batch as it is written: the workers' images first (Routing.split), then the device's."""
        n = len(self.files)
        by_file = {}
        for i in indices:
            by_file.setdefault(i % n, []).append(i)
        mine, device = self.routing.split([i % n for i in indices])
        if len(mine) > self.routing.decoded_rows:
            raise RuntimeError(f"a batch holds {len(mine)} images for the workers to decode, and the pool "
                               f"{self.routing.decoded_rows} rows for them")
        self.taken = len(mine)  # for write(), which the same worker calls next (PoolDataset, __getitems__)
        return [by_file[f].pop() for f in mine + device]

    def into_slot(self, pool, slot: int, indices: list[int], batched: bool) -> None:
        self.write(pool.images[slot], pool.lengths[slot], pool.decoded[slot] if hasattr(pool, "decoded") else None,
                   indices)

    def write(self, packed: torch.Tensor, lengths: torch.Tensor, decoded: torch.Tensor | None,
              indices: list[int]) -> None:
        """indices as order() gave them: the first `taken` decoded here, the rest's bytes packed."""
        self.fault_hook()
        k = self.taken
        if k:  # decoded as --jpeg's workers decode (fill): their rows stay empty
            self.fill(decoded, indices[:k], batched=False)
            lengths[:k] = 0
        at = 0
        for j, i in enumerate(indices[k:], start=k):  # each header checked here: the device names no file
            data = read_jpeg(self.files[i % len(self.files)], self.photos.max_pixels)
            if at + len(data) > len(packed):  # changed since the survey: the workers decode it after all
                raise BadImage(f"{self.photos.named(self.files[i % len(self.files)])}: {len(data)} bytes, larger "
                               "than when the run started (the folder changed under it)")
            packed[at:at + len(data)] = data
            lengths[j] = len(data)
            at += len(data)

    def __getitems__(self, indices: list[int]):
        indices = self.order(indices)
        packed = torch.empty(self.routing.slot_bytes, dtype=torch.uint8)
        lengths = torch.empty(len(indices), dtype=torch.int64)
        decoded = self.empty(self.routing.decoded_rows) if self.routing.decoded_rows else None
        self.write(packed, lengths, decoded, indices)
        return packed, torch.tensor([self.label(i) for i in indices]), lengths, decoded


def decode_on_device(host: Batch, device: torch.device, non_blocking: bool, verify: bool, img_size: int,
                     decoder=None) -> tuple[Batch, list]:
    """--gpu-decode: the copy is the decode. The files' bytes go to the device and come out as images, on the
    stream this runs on (DecodeAhead's), after the images the workers decoded (--cpu-decoded), copied there.
    --verify's checksum is of what the decoder made, taken there, and of what the workers made, taken on the
    host. Also the images as decoded (decode_batch)."""
    lengths = host.lengths.tolist()
    ends = list(itertools.accumulate(lengths))
    encoded = [host.images[e - n:e] for n, e in zip(lengths, ends) if n]  # (0: the workers decoded it)
    images, decoded = decode_batch(encoded, img_size, device, decoder)
    host_sum = checksum(images) if verify else None
    if k := lengths.count(0):  # the workers' images, the first k of the batch
        mine = host.decoded[:k]
        if verify:
            host_sum = torch.cat([checksum(mine).to(device), host_sum])
        images = torch.cat([moved(mine, host, device, non_blocking), images])
    return Batch(images, moved(host.labels, host, device, non_blocking), host_sum), decoded


class DecodeAhead(Loader):
    """--gpu-decode: a thread of its own takes the workers' batches of bytes and decodes each on a stream of
    its own, one batch ahead (depth) of the loop, handing it over by an event. The decoder's host work (it
    blocks the thread that calls it for milliseconds a batch) and its sync then run beside the loop, not in
    its copy. It stands in for the loader: the loop's waits on it are the run's data waits, and its drain
    takes what the workers and the decoder queued."""

    def __init__(self, source, device: torch.device, non_blocking: bool, verify: bool, img_size: int,
                 decoder: str = "torchvision", depth: int = DECODE_AHEAD):
        super().__init__((), source.queued + depth, verify=False, encoded=False)  # its own fetch() below
        self.source, self.device, self.decoder = source, device, decoder
        self.ready: queue.Queue = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.work, args=(non_blocking, verify, img_size), daemon=True,
                                       name="decode-ahead")
        self.thread.start()

    def work(self, non_blocking: bool, verify: bool, img_size: int) -> None:
        # a stream of high priority, whose kernels the GPU schedules before the step's pending ones: TorchCodec's
        # decoder launches on it, torchvision's only the resize (nvjpeg converts the colours on 14 streams of its
        # own, which is why runtime.py asks the driver for 32 work queues: docs/photos.md).
        # On the H200 the high priority changed nothing that could be measured, and README's figures were
        # measured with it.
        # (Tried there, no faster: a 1 ms GIL switch interval; two batches a call of the decoder; two or three
        # decoding threads; the step on a stream of high priority and this one at the default; a warm-up decode
        # of the largest file; at most one step queued ahead of the loop; nvjpeg driven directly, to YUV.)
        stream = (torch.cuda.Stream(device=self.device, priority=DECODE_PRIORITY) if self.device.type == "cuda"
                  else new_stream(self.device))
        decoder = (torchcodec_decoder() if self.decoder == "torchcodec" else
                   hardware_decoder() if self.decoder == "nvimgcodec" and self.device.type == "cuda" else None)
        # nvImageCodec's images are its own memory, freed with them: each is kept until the stream is past it
        hardware = self.decoder == "nvimgcodec" and decoder is not None
        held: collections.deque = collections.deque()
        try:
            with torch.get_device_module(self.device.type).stream(stream):
                while not self.stopping.is_set():
                    host = next(self.source)
                    batch, decoded = decode_on_device(host, self.device, non_blocking, verify, img_size, decoder)
                    batch.ready = stream.record_event()  # None on the CPU
                    self.source.copy_issued(host, batch.ready)  # a pool slot is free once the decode has read it
                    if hardware:
                        held.append((batch.ready, decoded))
                        while held and (len(held) > 2 * DECODE_AHEAD or held[0][0].query()):
                            held.popleft()[0].synchronize()
                    self.hand(batch)
        except BaseException as e:  # the loader's end (StopIteration) or a failure: the loop raises it
            self.hand(e)

    def hand(self, item) -> None:
        while not self.stopping.is_set():
            try:
                self.ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def fetch(self) -> Batch:  # (Loader's __next__ counts the wait, and its drain takes `queued` of these)
        item = self.ready.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def copy_issued(self, batch: Batch, done) -> None:
        """The loop's copy of a decoded batch is no copy: the thread told the pool when its bytes were read."""

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=30)  # one batch to finish: then no decode reads a slot as the pool goes
        self.source.close()
