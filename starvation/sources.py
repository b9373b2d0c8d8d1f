"""
Where a batch's images come from: the study's random images, photos the workers decode (--jpeg), or the
files' bytes, which the device decodes (--gpu-decode). Each source gives train.py's make_feeder its dataset,
the layout of a pool slot, and the stage it adds before the copy (none, or the decode ahead of the loop),
so that make_feeder composes them without knowing which it has. A new decoder is a new source, here.
"""
import collections
import itertools
import queue
import threading
import time
from pathlib import Path

import torch

from starvation import cache, photos
from starvation.data import Batch, Images, Loader, moved
from starvation.decoders import GPU_DECODERS, decode_batch
from starvation.folder import MAX_PIXELS, find_photos
from starvation.pool import pool_slots
from starvation.runtime import DIST, checksum, new_stream, size, usable_cpus
from starvation.thresholds import copy_size

DECODE_AHEAD = 2  # --gpu-decode: batches decoded ahead of the loop, on a thread of its own (DecodeAhead)
DECODE_PRIORITY = -1  # its stream's priority (lower is sooner; the default streams' is 0)


def open_photos(cfg) -> "photos.Photos | None":
    """--jpeg's folder, opened before the run: the default set made on first use, or --data-dir's files found,
    and with --resized-cache (or --baseline-copy) its copy made (on every CPU the run may use) or reused. None
    for the synthetic images and for the ceiling, which reads none. ValueError for a folder that cannot be read,
    BadImage for a file a copy cannot decode: each one line."""
    if not cfg.jpeg or cfg.data_on_gpu:
        return None
    max_pixels = cfg.max_image_pixels or MAX_PIXELS
    folder, made = (Path(cfg.data_dir), False) if cfg.data_dir else cache.default_set(cfg.img_size)
    resized = None
    if cfg.resized_cache:
        stored = copy_size(cfg.cache_size, cfg.img_size, cfg.augment)
        copy, made_now, seconds = cache.resized_copy(folder, find_photos(folder)[0], stored, max_pixels,
                                                     cfg.skip_bad_images, usable_cpus())
        resized = dict(source=str(folder), folder=str(copy), size=stored, made=made_now, seconds=round(seconds, 2))
        folder = copy
    found = photos.Photos(folder, made, cfg.skip_bad_images, max_pixels, resized)
    if cfg.baseline_copy and (progressive := found.progressive()):
        found.read_baseline(*cache.baseline_copy(folder, progressive, max_pixels, usable_cpus()))
    return found


def photo_source(cfg, found: "photos.Photos") -> "WorkersDecode":
    """--jpeg's source: the workers decode the files, or with --gpu-decode the device does."""
    return (DeviceDecodes if cfg.gpu_decode else WorkersDecode)(cfg, found)


class RandomImages:
    """The study's data, made by the workers (make(): train.py's dataset): a pool slot holds a batch of
    images, and nothing more happens to it before the copy."""
    encoded = False  # a batch holds images (True: the files' bytes, which the device decodes)

    def __init__(self, cfg, make):
        self.cfg, self.make = cfg, make

    def dataset(self) -> Images:
        return self.make()

    def slot_parts(self) -> dict:
        """A pool slot's parts, name -> (shape, dtype): pool.training_pool makes one of each per slot."""
        c = self.cfg
        return dict(images=((c.batch_size, 3, c.img_size, c.img_size), torch.uint8 if c.uint8 else torch.float32),
                    labels=((c.batch_size,), torch.int64))

    def slot_note(self, slots: int) -> str:
        """What the pool's log line adds about its slots."""
        return ""

    def before_copy(self, loader: Loader, device: torch.device) -> Loader:
        """The stage between the loader and the loop's copy: none."""
        return loader

    def lines(self) -> list[str]:
        """The log lines on what the run reads, before it starts."""
        return []

    def end_lines(self) -> list[str]:
        return []

    def record(self) -> dict:
        """The record's fields on what was read."""
        return dict(data_dir=None, photos=None, resized_cache=None, bad_images_skipped=None)


class WorkersDecode(RandomImages):
    """--jpeg: the workers decode each file on the CPU (photos.JpegDataset), and a batch is images, as the
    study's."""
    decoder = "CPU, in the workers"

    def __init__(self, cfg, found: "photos.Photos"):
        super().__init__(cfg, None)
        self.photos = found

    def dataset(self) -> Images:
        c = self.cfg
        cls = photos.BatchedJpegDataset if c.batched_fetch else photos.JpegDataset
        return cls(c.img_size, self.photos, c.inject_fault, c.augment)

    def lines(self) -> list[str]:
        return self.photos.lines()

    def end_lines(self) -> list[str]:
        return [self.photos.skipped_line()] if self.photos.skipped is not None else []

    def survey(self) -> dict:
        return dict(self.photos.summary, decoder=self.decoder)

    def record(self) -> dict:
        p = self.photos
        return dict(data_dir=str(p.source), photos=self.survey(), resized_cache=p.resized,
                    bad_images_skipped=len(p.bad_files()) if p.skipped else None)


class DeviceDecodes(WorkersDecode):
    """--gpu-decode: the workers read the files' bytes into the slot, and a thread decodes each batch on the
    device ahead of the loop (DecodeAhead). The routing gives the workers the files the GPU's batched decoder
    would take one at a time (progressive, other formats), --cpu-decoded N more, and those a slot cannot hold:
    they decode those into rows of the slot of their own."""
    encoded = True
    sized: str | None = None  # how --cpu-decoded auto chose its N (train.py's prepare() sets it)

    def __init__(self, cfg, found: "photos.Photos"):
        super().__init__(cfg, found)
        self.decoder = f"GPU ({cfg.gpu_decoder})"
        self.routing = found.routing(cfg.batch_size, cfg.cpu_decoded, pool_slots(cfg), sequential=not DIST.launched)

    def dataset(self) -> Images:
        c = self.cfg
        return photos.EncodedDataset(c.img_size, self.photos, self.routing, c.inject_fault, c.augment)

    def slot_parts(self) -> dict:
        c, parts = self.cfg, super().slot_parts()
        # the files' bytes, one after the other, and each one's length; the workers' images in rows of their own
        parts.update(images=((self.routing.slot_bytes,), torch.uint8), lengths=((c.batch_size,), torch.int64))
        if self.routing.decoded_rows:
            parts["decoded"] = ((self.routing.decoded_rows, 3, c.img_size, c.img_size), torch.uint8)
        return parts

    def slot_note(self, slots: int) -> str:
        r = self.routing
        return (f": files' bytes {size(slots * r.slot_bytes)}, the workers' images "
                f"{size(slots * r.decoded_rows * 3 * self.cfg.img_size ** 2)} ({r.decoded_rows} a slot)")

    def before_copy(self, loader: Loader, device: torch.device) -> Loader:
        c = self.cfg
        return DecodeAhead(loader, device, c.non_blocking, c.verify, c.img_size, c.gpu_decoder, c.augment,
                           threads=c.decode_threads)

    def lines(self) -> list[str]:
        c, slots = self.cfg, pool_slots(self.cfg)
        room = self.routing.room(slots, c.workers, slots - c.queued)
        return super().lines() + [self.routing.line()] + [line for line in (room, self.sized) if line]

    def survey(self) -> dict:
        split = self.routing.summary()
        return dict(self.photos.summary, **split, decoder=f"{self.decoder}, {split['to_workers']} files to the workers",
                    cpu_decoded_auto=self.sized)

# -----------------------------------------------------------------------------
# the device's stage: the batch decoded on the device, by a thread of its own, ahead of the loop


def decode_on_device(host: Batch, device: torch.device, non_blocking: bool, verify: bool, img_size: int,
                     decoder=None, augment: bool = False) -> tuple[Batch, list]:
    """--gpu-decode: the copy is the decode. The files' bytes go to the device and come out as images, on the
    stream this runs on (DecodeAhead's), after the images the workers decoded (--cpu-decoded), copied there.
    --verify's checksum is of what the decoder made, taken there, and of what the workers made, taken on the
    host. Also the images as decoded (decode_batch)."""
    lengths = host.lengths.tolist()
    ends = list(itertools.accumulate(lengths))
    encoded = [host.images[e - n:e] for n, e in zip(lengths, ends) if n]  # (0: the workers decoded it)
    images, decoded = decode_batch(encoded, img_size, device, decoder, augment)
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
    its copy. With threads > 1 each thread does so with a stream and a decoder of its own, taking batches in
    turn, so that the host work of a decoder that allows it runs on that many cores. They hand the batches
    over in the order they took them: a pool slot comes back to the workers a fixed number of batches after
    its own, so a batch handed past one still decoding would let a worker overwrite that one's bytes. It
    stands in for the loader: the loop's waits on it are the run's data waits, and its drain takes what the
    workers and the decoder queued."""

    def __init__(self, source, device: torch.device, non_blocking: bool, verify: bool, img_size: int,
                 decoder: str = "torchvision", augment: bool = False, depth: int = DECODE_AHEAD, threads: int = 1):
        super().__init__((), source.queued + depth, verify=False, encoded=False)  # its own fetch() below
        self.source, self.device, self.decoder = source, device, decoder
        self.took: list[tuple[float, float, float]] = []  # each batch's start, and its wall and CPU seconds here
        self.decoders: list = []  # each thread's decoder, whose own calls nvjpeg's planes time
        self.ready: queue.Queue = queue.Queue(maxsize=depth)
        self.stopping = threading.Event()
        self.taking = threading.Lock()  # one thread at a time takes a batch from the loader, and so its pool slot
        self.turns = threading.Condition()  # ... and hands it over in the order taken: batch `handed` is next
        self.taken = self.handed = 0
        self.threads = [threading.Thread(target=self.work, args=(non_blocking, verify, img_size, augment),
                                         daemon=True, name="decode-ahead") for _ in range(threads)]
        for thread in self.threads:
            thread.start()

    def work(self, non_blocking: bool, verify: bool, img_size: int, augment: bool) -> None:
        # a stream of high priority, whose kernels the GPU schedules before the step's pending ones: TorchCodec's
        # decoder launches on it, torchvision's only the resize (nvjpeg converts the colours on 14 streams of its
        # own, which is why runtime.py asks the driver for 32 work queues: docs/photos.md).
        # On the H200 the high priority changed nothing that could be measured, and README's figures were
        # measured with it.
        # (What else was tried there, none of it faster, is in results/: the fit-kernel, cpu-decoded, worker-nice
        # and compute-stream runs.)
        stream = (torch.cuda.Stream(device=self.device, priority=DECODE_PRIORITY) if self.device.type == "cuda"
                  else new_stream(self.device))
        # (nvjpeg's planes and the hardware engines on a GPU only: a CPU run decodes with torchvision's)
        decoder = (GPU_DECODERS[self.decoder].make() if self.device.type == "cuda" or self.decoder == "torchcodec"
                   else None)
        # nvImageCodec's images are its own memory, freed with them: each is kept until the stream is past it
        hardware = self.decoder == "nvimgcodec" and decoder is not None
        self.decoders.append(decoder)
        held: collections.deque = collections.deque()
        try:
            with torch.get_device_module(self.device.type).stream(stream):
                while not self.stopping.is_set():
                    with self.taking:
                        host = next(self.source)
                        turn, self.taken = self.taken, self.taken + 1
                    t0, cpu0 = time.perf_counter(), time.thread_time()
                    batch, decoded = decode_on_device(host, self.device, non_blocking, verify, img_size, decoder,
                                                      augment)
                    batch.ready = stream.record_event()  # None on the CPU
                    self.source.copy_issued(host, batch.ready)  # a pool slot is free once the decode has read it
                    if hardware:
                        held.append((batch.ready, decoded))
                        while held and (len(held) > 2 * DECODE_AHEAD or held[0][0].query()):
                            held.popleft()[0].synchronize()
                    self.took.append((t0, time.perf_counter() - t0, time.thread_time() - cpu0))
                    self.hand(batch, turn)
        except BaseException as e:  # a failure (a bad file, a worker lost): the loop raises it, out of turn
            self.hand(e)

    def hand(self, item, turn: int | None = None) -> None:
        """Put item on the queue to the loop, after the batches taken before it (turn: its place), or at once."""
        with self.turns:
            while turn is not None and turn != self.handed and not self.stopping.is_set():
                self.turns.wait(0.1)
        while not self.stopping.is_set():
            try:
                self.ready.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        if turn is not None:
            with self.turns:
                self.handed += 1
                self.turns.notify_all()

    def fetch(self) -> Batch:  # (Loader's __next__ counts the wait, and its drain takes `queued` of these)
        item = self.ready.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def copy_issued(self, batch: Batch, done) -> None:
        """The loop's copy of a decoded batch is no copy: the thread told the pool when its bytes were read."""

    def thread_figures(self, t0: float, t1: float) -> dict | None:
        """The threads' own time on the batches they started between t0 and t1 (the window): the decoder's host
        work, not their waits for the workers or for room ahead of the loop. Busy most of the window, they cap the
        path whatever the workers and the GPU could do; their CPU time against their wall time says whether
        work or sleeping waits (the GIL, a blocking sync) fill it. A CUDA sync that spins counts as CPU time,
        so nvjpeg's planes also time their own calls (nvjpeg_ms_median): the rest is the Python around them."""
        took = [(start, wall, cpu) for start, wall, cpu in list(self.took) if t0 <= start < t1]
        if not took:
            return None
        busy = sum(min(wall, t1 - start) for start, wall, _ in took)  # (the last batch may end past t1)
        median = lambda xs: round(sorted(xs)[len(xs) // 2] * 1e3, 2)  # noqa: E731
        figures = dict(threads=len(self.threads), batches=len(took),
                       busy_share=round(busy / (t1 - t0) / len(self.threads), 3),  # (of each thread, on average)
                       busy_ms_median=median([w for _, w, _ in took]), cpu_ms_median=median([c for _, _, c in took]))
        calls = [c for d in self.decoders for c in list(getattr(d, "calls", ())) if t0 <= c[0] < t1]
        if calls:
            figures.update(nvjpeg_ms_median=median([w for _, w, _ in calls]),
                           nvjpeg_cpu_ms_median=median([c for _, _, c in calls]))
        return figures

    def close(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)  # one batch to finish: then no decode reads a slot as the pool goes
        self.source.close()
