"""
Real photos for train.py --jpeg: the folder (Photos: its files, labels and survey) and the datasets that read
it, for the workers' decoder (JpegDataset) or the device's (EncodedDataset: the files' bytes).

--data-dir DIR reads a user's own folder (starvation/folder.py finds its files and reads their headers):
JPEG files, and PNG, WebP or BMP as ImageFolder reads them; any sizes (resized and cropped to --img-size),
grey and CMYK made RGB. Without it the default set is read (starvation/cache.py makes it once). Nothing is
ever written into a user's folder; starvation/decoders.py holds the decoders and their guard.
"""
import functools
import multiprocessing
from pathlib import Path

import torch

from starvation.data import BatchedImages, Images
from starvation.decoders import decode, read_jpeg
from starvation.folder import MAX_PIXELS, BadImage, Header, Survey, find_photos, peek, shown

POOL_BYTES = 4 * 10**9  # --gpu-decode: the most that the files' bytes take in the pool, all slots together




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
        # what the runs read and route: the folder's files, or with --baseline-copy some of them from the copy
        self.reads, self.routed, self.baseline = self.files, self.survey, None
        self.routings: dict = {}

    def label(self, i: int) -> int:
        return i % 10 if self.labels is None else self.labels[i % len(self.files)]

    @functools.cached_property
    def summary(self) -> dict:
        """What was read, for the record and the first log line: the survey of the files' headers (the folder's,
        whatever copy stands in for some), and --baseline-copy's."""
        return dict(self.survey.summary(len(self.classes)), baseline_copy=self.baseline)

    def progressive(self) -> list[Path]:
        """The folder's progressive JPEG files, which nvjpeg's batched decode takes one at a time."""
        return [f for f, h in zip(self.files, self.survey.headers) if isinstance(h, Header) and h.kind == "progressive"]

    def read_baseline(self, copy: Path, made: bool, seconds: float) -> None:
        """--baseline-copy: each progressive file read from its baseline copy (cache.baseline_copy), and routed as
        what it is there: a file the device decodes in its batches. Called before the run reads a file."""
        reads, headers, sizes = list(self.files), list(self.survey.headers), list(self.survey.sizes)
        copied = set(self.progressive())  # (every one is in the copy: a file it could not make stopped it)
        for i, f in enumerate(self.files):
            if f in copied:
                twin = copy / f.relative_to(self.folder)
                reads[i], headers[i], sizes[i] = twin, peek(twin, self.max_pixels), twin.stat().st_size
        self.reads, self.routed = reads, Survey(headers, sizes, self.max_pixels)
        self.baseline = dict(files=len(copied), folder=str(copy), made=made, seconds=round(seconds, 2))

    def routing(self, batch: int, cpu_decoded: int, slots: int, sequential: bool):
        """--gpu-decode: which files the workers decode and how many bytes of files a pool slot holds
        (Survey.routing), `slots` slots within POOL_BYTES; made once for the pool and the dataset alike."""
        key = (batch, cpu_decoded, slots, sequential)
        if key not in self.routings:
            self.routings[key] = self.routed.routing(batch, cpu_decoded, POOL_BYTES // max(1, slots), sequential)
        return self.routings[key]

    def lines(self) -> list[str]:
        """The run's log lines on what it reads: the folder and its survey, and what it left out or warns of."""
        what, where = self.summary, shown(self.folder)
        if self.made:
            where += " (made now from scikit-image's sample photos)"
        if self.resized:
            where += (f" (--resized-cache: {shown(self.resized['source'])} at {self.resized['size']} px, "
                      + (f"made now in {self.resized['seconds']:.1f} s)" if self.resized["made"] else "made before)"))
        classes = f" in {what['classes']} classes (ImageFolder layout)" if what["classes"] else ""
        lines = [f"photos: {what['files']} files{classes} in {where}: {self.survey.line(what)}"]
        if b := self.baseline:
            lines.append(f"photos: --baseline-copy: {b['files']} progressive files read as baseline JPEGs at their own "
                         f"size and quantization, from {shown(b['folder'])} ("
                         + (f"made now in {b['seconds']:.1f} s)" if b["made"] else "made before)"))
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


class JpegDataset(Images):
    """--jpeg: sample i is file i % n of the folder, decoded on the CPU to uint8 RGB at --img-size (with augment,
    a random-resized crop of it, flipped on a coin's throw). With skip_bad, a file that does not decode is
    marked (in shared memory, across the workers) and the next one taken in its place; else the run stops on
    it, naming it."""

    def __init__(self, img_size: int, photos: Photos, inject_fault: str | None = None, augment: bool = False):
        super().__init__(img_size, True, inject_fault)
        self.photos, self.files, self.skip_bad, self.augment = photos, photos.reads, photos.skipped, augment

    def label(self, i: int) -> int:
        return self.photos.label(i)

    def fill(self, images: torch.Tensor, indices: list[int], batched: bool) -> None:
        self.fault_hook()
        for j, i in enumerate(indices):
            for k in range(len(self.files)):
                try:
                    images[j].copy_(decode(self.files[(i + k) % len(self.files)], self.shape[-1],
                                           self.photos.max_pixels, self.augment))
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

    def __init__(self, img_size: int, photos: Photos, routing, inject_fault: str | None = None,
                 augment: bool = False):
        super().__init__(img_size, photos, inject_fault, augment)
        self.routing = routing

    def split(self, indices: list[int]) -> tuple[list[int], list[int]]:
        """A batch's samples as (the workers', the device's), by Routing.split of their files."""
        n = len(self.files)
        by_file = {}
        for i in indices:
            by_file.setdefault(i % n, []).append(i)
        mine, device = self.routing.split([i % n for i in indices])
        if len(mine) > self.routing.decoded_rows:
            raise RuntimeError(f"a batch holds {len(mine)} images for the workers to decode, and the pool "
                               f"{self.routing.decoded_rows} rows for them")
        return [by_file[f].pop() for f in mine], [by_file[f].pop() for f in device]

    def into_slot(self, pool, slot: int, indices: list[int], batched: bool) -> list[int]:
        return self.write(pool.images[slot], pool.lengths[slot],
                          pool.decoded[slot] if hasattr(pool, "decoded") else None, indices)

    def write(self, packed: torch.Tensor, lengths: torch.Tensor, decoded: torch.Tensor | None,
              indices: list[int]) -> list[int]:
        """The batch written: the workers' images decoded here first, then the device's files' bytes packed.
        Returns its samples in that order, which the labels follow."""
        self.fault_hook()
        mine, device = self.split(indices)
        indices, k = mine + device, len(mine)
        if k:  # decoded as --jpeg's workers decode (fill): their rows stay empty
            self.fill(decoded, indices[:k], batched=False)
            lengths[:k] = 0
        at = 0
        n = len(self.files)
        for j, i in enumerate(indices[k:], start=k):  # each header checked here: the device names no file
            data = read_jpeg(self.files[i % n], self.photos.max_pixels)
            if at + len(data) > len(packed):  # changed since the survey: the workers decode it after all
                raise BadImage(f"{self.photos.named(self.photos.files[i % n])}: {len(data)} bytes, larger than when "
                               "the run started (the folder changed under it)")
            packed[at:at + len(data)] = data
            lengths[j] = len(data)
            at += len(data)
        return indices

    def __getitems__(self, indices: list[int]):
        packed = torch.empty(self.routing.slot_bytes, dtype=torch.uint8)
        lengths = torch.empty(len(indices), dtype=torch.int64)
        decoded = self.empty(self.routing.decoded_rows) if self.routing.decoded_rows else None
        indices = self.write(packed, lengths, decoded, indices)
        return packed, torch.tensor([self.label(i) for i in indices]), lengths, decoded
