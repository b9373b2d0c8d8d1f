"""
A folder of photos as --jpeg reads it: its files found (its own, or torchvision's ImageFolder layout), each
file's header read without decoding it (the guard every decoder's input passes), and the survey of what the
folder holds, which says which files the GPU's batched decoder takes and which the workers decode.

Why a survey: nvjpeg's batched decode (the GPU's hardware engines) takes baseline JPEG files only, and
torchvision's batched GPU decoder sends every other file to a slow path, one file at a time: on the H200 a
folder with one progressive file in ten ran at a third of its rate without them. Files of other formats
(PNG, WebP, BMP, as ImageFolder reads) are decoded on the CPU in any case. The survey runs in the main
process before any worker starts, and reads no pixel.
"""
import io
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from starvation.runtime import KnownFailure

JPEG_SUFFIXES = (".jpg", ".jpeg")
OTHER_SUFFIXES = (".png", ".webp", ".bmp", ".ppm", ".pgm", ".tif", ".tiff")  # ImageFolder's other image formats
SUFFIXES = JPEG_SUFFIXES + OTHER_SUFFIXES  # in any case
MAX_PIXELS = 89_478_485  # PIL's MAX_IMAGE_PIXELS: past it a warning, past twice it a refusal (PIL's convention)
# the frame headers, which hold the image's size: SOF0-3, 5-7, 9-11, 13-15 (C4, C8, CC are other markers)
FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
HEAD_BYTES = 1 << 16  # what the survey reads of a file first: a JPEG's frame header is nearly always in it


class BadImage(KnownFailure):
    """A file of the folder that does not decode: its path, and what the decoder said."""

    def __str__(self) -> str:
        # raised in a DataLoader worker, it reaches the loop re-made around the worker's whole traceback:
        # its own message is the text after the traceback's last "BadImage: " (a name may hold a newline, but
        # shown() escapes it, so the message is one line)
        text = super().__str__().strip()
        return text.rsplit("BadImage: ", 1)[-1].strip() if "Original Traceback" in text else text


def shown(path) -> str:
    """A path as one line can print it, whatever bytes its name holds: a name that is not UTF-8, or holds a
    newline or another control character, is escaped."""
    text = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


# -----------------------------------------------------------------------------
# finding the files


def find_photos(folder: Path) -> tuple[list[Path], list[int] | None, list[str], list[str]]:
    """A folder's image files, sorted, their labels, the class names, and the links the walk left out. Its
    own files (SUFFIXES, any case), labelled as the synthetic data is (None); or, when it has none,
    torchvision's ImageFolder layout: each sub-folder a class, labelled by its place among the sorted names,
    its files found at any depth. Links are followed, but never into a folder already read (by device and
    inode): a link that loops, or leads into another class, would read photos twice or under the wrong label.
    ValueError, in one line naming the folder, when there is nothing to read."""
    def listing(d: Path) -> list[os.DirEntry]:
        try:
            with os.scandir(d) as entries:
                return sorted(entries, key=lambda e: e.name)
        except OSError as e:
            raise ValueError(f"{shown(d)}: cannot be read ({e.strerror})") from None

    def images(entries) -> list[Path]:
        return [Path(e.path) for e in entries if Path(e.name).suffix.lower() in SUFFIXES and e.is_file()]

    def identity(d) -> tuple[int, int]:
        st = os.stat(d)
        return st.st_dev, st.st_ino

    if not folder.is_dir():
        raise ValueError(f"{shown(folder)}: no such folder")
    entries = listing(folder)
    files = images(entries)
    if files:
        return files, None, [], []
    classes = [e for e in entries if e.is_dir()]
    if not classes:
        raise ValueError(f"{shown(folder)}: no image files in it ({', '.join(SUFFIXES)}), nor class folders "
                         "holding them")
    # every real folder under the root first, links last: a link is followed only into what no walk reached
    seen, links, found = {identity(folder)}, [], {cls.name: [] for cls in classes}
    left_out = []

    def walk(cls: str, d: Path, follow: bool) -> None:
        todo = [d]
        while todo:
            d = todo.pop()
            if (key := identity(d)) in seen:
                left_out.append(d)
                continue
            seen.add(key)
            inner = listing(d)
            found[cls] += images(inner)
            for e in inner:
                if e.is_dir():
                    if e.is_symlink() and not follow:
                        links.append((cls, Path(e.path)))
                    else:
                        todo.append(Path(e.path))
    for cls in classes:
        walk(cls.name, Path(cls.path), follow=False)
    for cls, link in links:
        walk(cls, link, follow=True)
    files, labels = [], []
    for label, cls in enumerate(classes):
        if not found[cls.name]:
            raise ValueError(f"{shown(folder)}: its class folder {shown(cls.name)} holds no image file "
                             f"({', '.join(SUFFIXES)}; the ImageFolder layout: ROOT/CLASS/*.jpg, every class "
                             "with files)")
        files += sorted(found[cls.name])
        labels += [label] * len(found[cls.name])
    return files, labels, [c.name for c in classes], [shown(p.relative_to(folder)) for p in left_out]


# -----------------------------------------------------------------------------
# a file's header, read without decoding it


@dataclass(frozen=True)
class Header:
    """What a file's header says: its format, size, and for a JPEG its coding and colour layout."""
    format: str                     # "JPEG", "PNG", "WEBP", ...
    height: int
    width: int
    progressive: bool = False       # a JPEG coded other than baseline (progressive, lossless, arithmetic)
    components: int = 3             # 1 grey, 3 colour, 4 CMYK
    subsampling: str | None = None  # a colour JPEG's: "4:2:0", "4:4:4", ...

    @property
    def pixels(self) -> int:
        return self.height * self.width

    @property
    def kind(self) -> str:
        """The survey's name for what decodes this file."""
        if self.format != "JPEG":
            return self.format
        if self.progressive:
            return "progressive"
        return {1: "grey", 4: "CMYK"}.get(self.components, f"baseline {self.subsampling}")


SUBSAMPLING = {(1, 1): "4:4:4", (2, 1): "4:2:2", (2, 2): "4:2:0", (1, 2): "4:4:0", (4, 1): "4:1:1"}


def check_pixels(path, height: int, width: int, max_pixels: int) -> None:
    """PIL's convention: an image over max_pixels decodes (the survey warns), one over twice that is refused:
    a few hundred bytes can claim 60000 x 60000, which a decoder would allocate 11 GB for."""
    if height * width > 2 * max_pixels:
        raise BadImage(f"{shown(path)}: {width}x{height} pixels, more than twice the limit of {max_pixels:,} "
                       "(--max-image-pixels N raises it)")


def jpeg_header(data: bytes, path, max_pixels: int, whole: bool = True) -> Header:
    """A JPEG's header, read without decoding it. BadImage, naming the file, for bytes that are no JPEG, a
    header claiming more than twice max_pixels, or (whole: data is the whole file) a stream cut short: the
    end marker must follow the image data (which never holds its bytes: the encoder stuffs every 0xFF there)."""
    if not data:
        raise BadImage(f"{shown(path)}: an empty file")
    if data[:2] != b"\xff\xd8":
        raise BadImage(f"{shown(path)}: not a JPEG file (it does not start with the JPEG marker)")
    i, header = 2, None
    while True:
        if i + 1 >= len(data) or data[i] != 0xFF:
            raise BadImage(f"{shown(path)}: a damaged or cut-short JPEG header")
        while i + 2 < len(data) and data[i + 1] == 0xFF:
            i += 1  # fill bytes before a marker
        if i + 4 > len(data):
            raise BadImage(f"{shown(path)}: a damaged or cut-short JPEG header")
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if marker in FRAME_MARKERS and i + 10 <= len(data):
            n = data[i + 9]
            factors = [(data[i + 11 + 3 * c] >> 4, data[i + 11 + 3 * c] & 15) for c in range(n)
                       if i + 12 + 3 * c <= len(data)]
            header = Header("JPEG", int.from_bytes(data[i + 5:i + 7], "big"), int.from_bytes(data[i + 7:i + 9], "big"),
                            progressive=marker != 0xC0 and marker != 0xC1, components=n,
                            subsampling=SUBSAMPLING.get(factors[0], "other") if n == 3 and factors else None)
        if marker == 0xDA:  # start of scan: the image data follows
            break
        i += 2 + length
    if header is None:
        raise BadImage(f"{shown(path)}: a JPEG without a frame header")
    check_pixels(path, header.height, header.width, max_pixels)
    # (searched from the end, where a whole file has it: from the scan's start, the search stops at every 0xFF
    # the encoder stuffed into the image data: 0.6 ms a file of a camera-like folder)
    if whole and data.rfind(b"\xff\xd9", i) < 0:
        raise BadImage(f"{shown(path)}: cut short (its image data has no end marker)")
    return header


def pil():
    """PIL's Image, its own pixel limit off: every file has passed check_pixels (--max-image-pixels) before PIL
    opens it, and PIL's limit, fixed at its default, would refuse what the flag allows."""
    from PIL import Image
    Image.MAX_IMAGE_PIXELS = None
    return Image


def other_header(data: bytes, path, max_pixels: int) -> Header:
    """A PNG's, WebP's or BMP's header, by PIL, which reads the header only until the image is loaded."""
    from PIL import UnidentifiedImageError
    Image = pil()
    if not data:
        raise BadImage(f"{shown(path)}: an empty file")
    try:
        with Image.open(io.BytesIO(data)) as im:
            header = Header(im.format or "image", im.height, im.width, components=len(im.getbands()))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        raise BadImage(f"{shown(path)}: not an image PIL can read ({str(e).splitlines()[0] if str(e) else e})") \
            from None
    check_pixels(path, header.height, header.width, max_pixels)
    return header


def read_header(data: bytes, path, max_pixels: int, whole: bool = True) -> Header:
    """Any file's header: a JPEG's by its first bytes or its name (a file named .jpg that is none is said to
    be none), any other format's by PIL."""
    if data[:2] == b"\xff\xd8" or Path(str(path)).suffix.lower() in JPEG_SUFFIXES:
        return jpeg_header(data, path, max_pixels, whole)
    return other_header(data, path, max_pixels)


def read_checked(path: Path, max_pixels: int) -> tuple[bytes, Header]:
    """A file's bytes and header, checked (read_header); BadImage names a file that fails."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BadImage(f"{shown(path)}: cannot be read ({e.strerror})") from None
    return data, read_header(data, path, max_pixels)


def peek(path: Path, max_pixels: int) -> Header | BadImage:
    """A file's header from its first HEAD_BYTES (all of it where they do not hold it); a bad file's BadImage,
    which its decoder raises again when it meets it."""
    try:
        with open(path, "rb") as f:
            data = f.read(HEAD_BYTES)
            try:
                return read_header(data, path, max_pixels, whole=False)
            except BadImage:
                if len(data) < HEAD_BYTES:
                    raise
                return read_header(data + f.read(), path, max_pixels, whole=False)
    except OSError as e:
        return BadImage(f"{shown(path)}: cannot be read ({e.strerror})")
    except BadImage as e:
        return e


# -----------------------------------------------------------------------------
# the survey: what the folder holds, and which files the GPU's batched decoder takes


# what nvjpeg's batched decode takes: baseline JPEG, grey or colour (its hardware engines: nvjpeg's documentation)
def on_device(h: Header) -> bool:
    return h.format == "JPEG" and not h.progressive and h.components in (1, 3) and h.subsampling != "other"


@dataclass
class Survey:
    """Each file's header (or why it has none) and its size in bytes, with the counts the log line and the
    record give."""
    headers: list
    sizes: list[int]
    max_pixels: int

    @classmethod
    def of(cls, files: list[Path], max_pixels: int) -> "Survey":
        sizes = []
        for f in files:
            try:
                sizes.append(f.stat().st_size)
            except OSError:
                sizes.append(0)
        return cls([peek(f, max_pixels) for f in files], sizes, max_pixels)

    def kinds(self) -> dict[str, int]:
        """Files by kind ("baseline 4:2:0", "progressive", "grey", "CMYK", "PNG", ..., "bad": refused when decoded), most first."""
        counts: dict[str, int] = {}
        for h in self.headers:
            k = h.kind if isinstance(h, Header) else "bad"
            counts[k] = counts.get(k, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def summary(self, classes: int) -> dict:
        """For the record's `photos` and the log line."""
        good = [(h, n) for h, n in zip(self.headers, self.sizes) if isinstance(h, Header)]
        pixels = sorted(good, key=lambda hn: hn[0].pixels)
        median = pixels[len(pixels) // 2][0] if pixels else None
        bpp = [8 * n / h.pixels for h, n in good if h.pixels]
        files = len(self.headers)
        kinds = self.kinds()
        return dict(
            files=files, classes=classes or None, kinds=kinds,
            shares={k: round(v / files, 3) for k, v in kinds.items()},
            progressive_share=round(kinds.get("progressive", 0) / files, 3),
            median_pixels=f"{median.width}x{median.height}" if median else "0x0",
            median_megapixels=round(median.pixels / 1e6, 2) if median else 0.0,
            largest_megapixels=round(pixels[-1][0].pixels / 1e6, 1) if pixels else 0.0,
            bits_per_pixel=round(statistics.median(bpp), 2) if bpp else None,
            mean_file_kb=round(statistics.mean(self.sizes) / 1e3, 1) if self.sizes else 0.0,
            over_pixel_limit=sum(h.pixels > self.max_pixels for h, _ in good),
            on_device=sum(on_device(h) for h, _ in good))

    @staticmethod
    def line(s: dict) -> str:
        """What the folder holds (its summary()), in one line (after "photos: N files ... in FOLDER: ")."""
        kinds = ", ".join(f"{n} {k}" for k, n in s["kinds"].items())
        return (f"{kinds}; median {s['median_pixels']} pixels ({s['median_megapixels']:.1f} MP, largest "
                f"{s['largest_megapixels']:.1f}), {s['bits_per_pixel'] or 0:.1f} bits a pixel, "
                f"{s['mean_file_kb']:.0f} kB a file on average")

    def routing(self, batch: int, cpu_decoded: int, slot_bytes: int, sequential: bool) -> "Routing":
        """--gpu-decode: which files the workers decode (Routing). The workers take every file that the
        batched decode would do one at a time; the device's files are packed into a slot's bytes, of at most
        slot_bytes (or `batch` of its largest file, if less), and one that does not fit goes to the workers
        too. The decoded images' rows a slot holds: the most that any batch takes (sequential: one process
        reads the folder in order, round and round), or every row where the order is another."""
        device = [isinstance(h, Header) and on_device(h) for h in self.headers]
        largest = max((n for n, d in zip(self.sizes, device) if d), default=0)
        routing = Routing(bytearray(not d for d in device), list(self.sizes), max(4096, min(slot_bytes, batch * largest)),
                          cpu_decoded, batch)
        n = len(device)
        starts = range(0, n, math.gcd(n, batch))  # where a batch of the folder read in order starts
        if sequential and len(starts) * batch <= 2_000_000:
            routing.decoded_rows, over = 0, set()
            for s in starts:
                files = [(s + j) % n for j in range(batch)]
                mine = routing.split(files)[0]
                routing.decoded_rows = max(routing.decoded_rows, len(mine))
                extra = min(cpu_decoded, batch - sum(not device[f] for f in mine))  # (--cpu-decoded's, not spilled)
                over.update([f for f in mine if device[f]][extra:])
                theirs = [f for f in files if device[f]][cpu_decoded:]  # (the device's files, as split() takes them)
                routing.batch_bytes = max(routing.batch_bytes, sum(self.sizes[f] for f in theirs))
            routing.overflow = len(over)
        for h, w in zip(self.headers, routing.workers):
            if w:
                k = h.kind if isinstance(h, Header) else "bad"
                routing.why[k] = routing.why.get(k, 0) + 1
        routing.why = dict(sorted(routing.why.items(), key=lambda kv: (-kv[1], kv[0])))
        if routing.overflow:
            routing.why["beyond a slot's bytes"] = routing.overflow
        return routing


@dataclass
class Routing:
    """--gpu-decode's split of the folder: workers[i] is 1 where the workers decode file i whatever the batch,
    sizes its bytes, slot_bytes the bytes of device files a batch holds, decoded_rows the images the workers
    decode in a batch at most."""
    workers: bytearray
    sizes: list[int]
    slot_bytes: int
    cpu_decoded: int
    decoded_rows: int
    overflow: int | None = None  # the device's files that a batch could not hold, decoded by the workers
    batch_bytes: int = 0  # the most bytes of the device's files a batch read in order holds: a slot's need
    why: dict = field(default_factory=dict)  # the files the workers decode, by kind, and the overflow

    def split(self, files: list[int]) -> tuple[list[int], list[int]]:
        """A batch's files (the folder's indices) as (the workers', the device's), each in the batch's order:
        the workers take their own kinds, then cpu_decoded of the rest, then whatever does not fit the slot."""
        mine = [f for f in files if self.workers[f]]
        rest = [f for f in files if not self.workers[f]]
        mine += rest[:self.cpu_decoded]
        device, room = [], self.slot_bytes
        for f in rest[self.cpu_decoded:]:
            if self.sizes[f] <= room:
                device.append(f)
                room -= self.sizes[f]
            else:
                mine.append(f)
        return mine, device

    def room(self, slots: int, workers: int, in_flight: int) -> str | None:
        """Where the workers decode files only because a batch's files outgrow its slot: the line that says so,
        and names the --prefetch-factor whose fewer, larger slots hold the largest batch in the same pinned bytes
        (the pool's slots are workers x prefetch factor + in_flight). None where nothing spills."""
        if not (self.overflow and self.batch_bytes):
            return None
        fit = (slots * self.slot_bytes // self.batch_bytes - in_flight) // max(1, workers)
        return (f"--gpu-decode: the workers decode {self.overflow} of the device's files because a batch's files "
                f"outgrow its slot ({self.slot_bytes / 1e6:.1f} MB over {slots} slots; the largest batch holds "
                f"{self.batch_bytes / 1e6:.1f} MB): " + (
                    f"--prefetch-factor {fit} gives fewer slots, each large enough, in the same pinned memory"
                    if fit >= 1 else "fewer --workers, or --resized-cache, would make room"))

    def summary(self) -> dict:
        """For the record's `photos`."""
        return dict(to_workers=sum(self.workers), to_workers_why=self.why, slot_bytes=self.slot_bytes,
                    decoded_rows=self.decoded_rows, largest_batch_bytes=self.batch_bytes or None)

    def line(self) -> str:
        n = sum(self.workers)
        head = f"--gpu-decode: slots of {self.slot_bytes / 1e6:.1f} MB of files' bytes; "
        if not n and not self.overflow:
            return head + "the device decodes every file" + (
                f" but {self.cpu_decoded} of each batch (--cpu-decoded)" if self.cpu_decoded else "")
        why = ", ".join(f"{v} {k}" for k, v in self.why.items())
        return (head + f"the workers decode {why} (which the GPU's batched decoder would take one at a time, or "
                f"a slot cannot hold){f', and {self.cpu_decoded} more of each batch' if self.cpu_decoded else ''}; "
                "the device the rest")
