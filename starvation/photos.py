"""
Real photos for train.py --jpeg: the folder of JPEG files a run reads, and how one is decoded.

The default set is made once, on first use, from the sample photos that scikit-image ships (read from
its package folder: scikit-image itself is never imported): distinct crops at a random scale and
place, some flipped, re-lit, saved as JPEG at quality 90, in a cache folder that the log line names.
--data-dir DIR reads a user's own folder instead: any sizes (resized and cropped to --img-size), grey
and CMYK made RGB. Nothing is ever written into it.
"""
import functools
import importlib.util
import multiprocessing
import os
import shutil
from pathlib import Path

import torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_image, decode_jpeg, encode_jpeg, read_file

from starvation.data import Batch, BatchedImages, Images, moved
from starvation.runtime import KnownFailure, checksum

# scikit-image's real photographs (its data folder also holds drawings, textures and micrographs)
SAMPLE_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "motorcycle_right.png",
                 "rocket.jpg", "retina.jpg", "hubble_deep_field.jpg")
COUNT = 128  # distinct images in the default set: more than a batch, so a batch is not one photo repeated
QUALITY = 90


class BadImage(KnownFailure):
    """A file of the folder that does not decode as a JPEG: its path, and what the decoder said."""

    def __str__(self) -> str:
        # raised in a DataLoader worker, it reaches the loop re-made around the worker's whole traceback:
        # its own message is that traceback's last line
        text = super().__str__().strip()
        return text.splitlines()[-1].split("BadImage: ", 1)[-1] if "Original Traceback" in text else text


def jpeg_files(folder: Path) -> list[Path]:
    """The folder's JPEG files (.jpg, .jpeg, any case), sorted; ValueError naming the folder if none."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg") and p.is_file())
    if not files:
        folders = sum(1 for p in folder.iterdir() if p.is_dir())
        raise ValueError(f"{folder}: no .jpg or .jpeg files in it" + (
            f" ({folders} sub-folder{'s' * (folders > 1)}: only the folder's own files are read)" if folders else ""))
    return files


def fit(image: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 (3, H, W) -> (3, size, size): the shorter side resized to size, then the centre cropped."""
    if tuple(image.shape[-2:]) != (size, size):
        image = TF.center_crop(TF.resize(image, size, antialias=True), [size, size])
    return image.contiguous()


def decode(path: Path, size: int) -> torch.Tensor:
    """One JPEG file as uint8 RGB (3, size, size), on the CPU; BadImage if it does not decode."""
    try:
        image = decode_jpeg(read_file(str(path)), mode=ImageReadMode.RGB)
    except RuntimeError as e:  # torchvision's decoder reports a corrupt or truncated file so
        raise BadImage(f"{path}: does not decode as a JPEG ({str(e).strip().splitlines()[0]})") from None
    return fit(image, size)


def decode_batch(encoded: list[torch.Tensor], size: int, device: torch.device) -> torch.Tensor:
    """A batch of JPEG files' bytes (1-D uint8 tensors on the CPU) decoded on the device, on the current
    stream (on a GPU, nvjpeg, batched), to uint8 RGB (k, 3, size, size). BadImage names which sample of the
    batch does not decode (the workers read bytes only, so no file name is at hand here)."""
    try:
        images = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device)
    except RuntimeError as e:
        for j, data in enumerate(encoded):  # find it: each on the CPU, whose decoder says which
            try:
                decode_jpeg(data, mode=ImageReadMode.RGB)
            except RuntimeError:
                raise BadImage(f"sample {j} of a batch does not decode as a JPEG on the {device.type} ("
                               f"{str(e).strip().splitlines()[0]}); decoding on the CPU names the file") from None
        raise
    return torch.stack([fit(image, size) for image in images])


def sample_photos() -> list[Path]:
    """scikit-image's sample photos, found without importing it; ValueError saying how to get them."""
    spec = importlib.util.find_spec("skimage")
    folder = Path(spec.origin).parent / "data" if spec is not None and spec.origin else None
    found = [folder / name for name in SAMPLE_PHOTOS if folder is not None and (folder / name).is_file()]
    if not found:
        raise ValueError("the default JPEG set is cut from the sample photos scikit-image ships, and it is not "
                         "installed here: pip install scikit-image, or give --data-dir DIR (a folder of JPEGs)")
    return found


def default_set(size: int, count: int = COUNT) -> tuple[Path, bool]:
    """The default folder for --img-size size, made on first use; and whether this call made it. It is
    made whole or not at all (in a folder of its own, renamed into place), another run making it at the
    same time is no error (theirs is as good), and what a killed build left is cleared first. ValueError,
    in one line, when the cache cannot be written."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpu-starvation"
    folder = cache / f"photos-{size}px-{count}"
    if folder.is_dir():
        return folder, False
    photos = [decode_image(read_file(str(p)), mode=ImageReadMode.RGB) for p in sample_photos()]
    g = torch.Generator().manual_seed(0)
    making = Path(f"{folder}.making-{os.getpid()}")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        for stale in cache.glob(f"{folder.name}.making-*"):  # a build killed before it could clear up
            pid = stale.name.rsplit("-", 1)[1]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
        making.mkdir()
        for k in range(count):
            crop = random_crop(photos[k % len(photos)], size, g)
            (making / f"{k:04d}.jpg").write_bytes(encode_jpeg(crop, quality=QUALITY).numpy().tobytes())
        making.rename(folder)
    except OSError as e:
        shutil.rmtree(making, ignore_errors=True)
        if folder.is_dir():  # another run made it meanwhile (the rename found it there): theirs is as good
            return folder, False
        raise ValueError(f"the photo cache {cache} cannot be written ({e.strerror}): set XDG_CACHE_HOME to a "
                         "writable folder, or give --data-dir DIR") from None
    except BaseException:
        shutil.rmtree(making, ignore_errors=True)
        raise
    return folder, True


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
    """--jpeg's files, and with --skip-bad-images which of them did not decode: a flag a file in shared
    memory, so that every worker marks what it met and a file met twice counts once (None: the run stops
    on the first)."""

    def __init__(self, folder, files: list, made: bool, skip_bad: bool):
        self.folder, self.files, self.made = folder, files, made
        self.skipped = multiprocessing.Array("b", len(files), lock=False) if skip_bad else None

    def bad_files(self) -> list[Path]:
        """The files skipped so far, in the folder's order."""
        return [f for f, bad in zip(self.files, self.skipped or []) if bad]

    @functools.cached_property
    def largest(self) -> int:
        """--gpu-decode: the largest file's bytes, so that a pool row holds any file (a stat of each file,
        so only when asked)."""
        return max(f.stat().st_size for f in self.files)

    def __deepcopy__(self, memo):  # dataclasses.asdict(cfg) copies its fields: one set of files, one counter
        return self


class JpegDataset(Images):
    """--jpeg: sample i is file i % n of the folder, decoded on the CPU to uint8 RGB at --img-size.
    With skip_bad, a file that does not decode is marked (in shared memory, across the workers) and the
    next one taken in its place; else the run stops on it, naming it."""

    def __init__(self, n: int, img_size: int, files: list, skip_bad, inject_fault: str | None = None):
        super().__init__(n, img_size, True, inject_fault)
        self.files, self.skip_bad = files, skip_bad  # skip_bad: Photos.skipped, or None

    def fill(self, images: torch.Tensor, indices: list[int], batched: bool) -> None:
        self.fault_hook()
        for j, i in enumerate(indices):
            for k in range(len(self.files)):
                try:
                    images[j].copy_(decode(self.files[(i + k) % len(self.files)], self.shape[-1]))
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
    """--gpu-decode: the workers read each file's bytes and decode nothing; the loop's copy decodes the
    batch on the device. A batch is the files' bytes, row by row, and each row's length."""
    host_checksum = False  # the device checks what it decodes

    def __init__(self, n: int, img_size: int, files: list, capacity: int, inject_fault: str | None = None):
        super().__init__(n, img_size, files, None, inject_fault)
        self.capacity = capacity  # the largest file's bytes: a row of the batch

    def into_slot(self, pool, slot: int, indices: list[int], batched: bool) -> None:
        self.write(pool.images[slot], pool.lengths[slot], indices)

    def write(self, rows: torch.Tensor, lengths: torch.Tensor, indices: list[int]) -> None:
        self.fault_hook()
        for j, i in enumerate(indices):
            data = read_file(str(self.files[i % len(self.files)]))
            rows[j, :len(data)] = data
            lengths[j] = len(data)

    def __getitems__(self, indices: list[int]):
        rows = torch.empty((len(indices), self.capacity), dtype=torch.uint8)
        lengths = torch.empty(len(indices), dtype=torch.int64)
        self.write(rows, lengths, indices)
        return rows, torch.tensor([i % 10 for i in indices]), lengths


def decode_on_device(host: Batch, device: torch.device, non_blocking: bool, verify: bool, img_size: int) -> Batch:
    """--gpu-decode: the copy is the decode. The files' bytes go to the device and come out as images, on
    the stream this runs on (the copy stream); --verify's checksum is of what the decoder made, taken there."""
    encoded = [host.images[j, :int(host.lengths[j])] for j in range(len(host.lengths))]
    if device.type == "cuda":
        # note: a CPU-GPU sync point. nvjpeg writes its images from a stream of its own into memory the
        # caching allocator hands out on this one: what this stream still reads must be done first
        torch.cuda.current_stream(device).synchronize()
    images = decode_batch(encoded, img_size, device)
    return Batch(images, moved(host.labels, host, device, non_blocking), checksum(images) if verify else None)


