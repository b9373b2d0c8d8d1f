"""
train.py --survey: what a folder of photos holds, and what each decoder makes of it here, before a run.

It reads every file's header (starvation/folder.py), then times the decoders for a few seconds on a sample
spread over the folder: the workers' (one thread, each file as --jpeg's workers decode it) and, with a GPU,
the batched decode of the files --gpu-decode routes to the device, by each GPU decoder installed. From those
it estimates the batches a second that each path can deliver with the run's --workers (and its pool's slots,
which decide the files a slot cannot hold), so that they can be set against the step's own rate (the
ceiling: --variant jpeg-compiled --data-on-gpu), and names the flags that fit the folder.

The same rates size --cpu-decoded auto at a run's start: the baseline files of each batch that the workers
decode beside their own kinds, so that the device and the workers take as long as each other. They are
measured alone, before the run: the step then shares the GPU with the decode, and the cores with the loop.
"""
import math
import time
from dataclasses import dataclass

import torch

from starvation.decoders import GPU_DECODERS, decode, decode_batch, installed, read_jpeg
from starvation.folder import BadImage
from starvation.photos import Photos
from starvation.pool import pool_slots
from starvation.runtime import DIST, device_sync, usable_cpus, warn
from starvation.thresholds import workers_take_copy
from starvation.writes import write_json

SAMPLE = 48          # files timed, spread over the folder
CPU_SECONDS = 4.0    # at most, on one thread
DECODER_BETTER = 1.1  # another GPU decoder this much faster alone is worth a run beside the default


def sample(n: int, k: int = SAMPLE) -> list[int]:
    """k of n files' indices, spread evenly over the folder (all of them where n <= k)."""
    k = min(n, k)
    return sorted({round(i * (n - 1) / max(1, k - 1)) for i in range(k)})


def cpu_ms(p: Photos, files: list[int], size: int) -> dict[int, float]:
    """Each file's decode on one thread, as the workers decode it (decoders.decode), in ms; a bad file is left out."""
    threads, took = torch.get_num_threads(), {}
    torch.set_num_threads(1)
    t_end = time.perf_counter() + CPU_SECONDS
    try:
        for i in files:
            if time.perf_counter() > t_end:
                break
            t0 = time.perf_counter()
            try:
                decode(p.reads[i], size, p.max_pixels)
            except BadImage:
                continue
            took[i] = (time.perf_counter() - t0) * 1e3
    finally:
        torch.set_num_threads(threads)
    return took


def gpu_images_per_s(p: Photos, files: list[int], size: int, device: torch.device,
                     decoder: str = "torchvision") -> float | None:
    """The batched decode (and resize) of `files` on the device by --gpu-decoder `decoder`, images a second: the
    median of three calls. None without a GPU, or where the decoder is not installed."""
    if device.type != "cuda" or not files or not installed(GPU_DECODERS[decoder].module):
        return None
    times = []
    try:
        encoded = [read_jpeg(p.reads[i], p.max_pixels) for i in files]
        decode = GPU_DECODERS[decoder].make()
        for _ in range(4):  # the first call starts nvjpeg: left out
            t0 = time.perf_counter()
            decode_batch(encoded, size, device, decode)
            device_sync(device)
            times.append(time.perf_counter() - t0)
    except BadImage:  # a bad file among them: a run names it; the survey times the CPU alone
        return None
    except (ImportError, OSError, RuntimeError) as e:  # an optional decoder that does not start here
        if decoder == "torchvision":
            raise
        warn(f"--survey: --gpu-decoder {decoder} could not be timed: {str(e).strip().splitlines()[0]}")
        return None
    return len(files) / sorted(times[1:])[1]


@dataclass
class Rates:
    """What the survey timed: each decoder on the folder's sample, and the split --gpu-decode's routing makes."""
    cpu_ms: float | None          # a file on one CPU thread, any kind
    workers_ms: float | None      # a file of the kinds the routing gives the workers (progressive, other formats)
    baseline_ms: float | None     # a file the device would decode, decoded on one CPU thread instead
    gpu_images_per_s: float | None  # the device's batched decode, of a batch of its own files
    share: float                  # the workers' share of the files under --gpu-decode
    cores: int                    # the worker processes that decode at once
    timed: int                    # the files decoded on the CPU
    spilled: float = 0.0          # the share of files the device would take that a slot cannot hold (the workers
                                  # decode them, at a baseline file's cost)

    def cpu_path(self, batch: int) -> float | None:
        """--jpeg's batches a second, every file decoded by the workers."""
        return self.cores * 1e3 / self.cpu_ms / batch if self.cpu_ms else None

    def gpu_path(self, batch: int, cpu_decoded: int = 0) -> float | None:
        """--gpu-decode's batches a second with --cpu-decoded N: the slower of its two sides, the device
        decoding its files while the workers decode theirs."""
        if not self.gpu_images_per_s:
            return None
        own, spilled = self.share * batch, self.spilled * batch
        device_s = (batch - own - spilled - cpu_decoded) / self.gpu_images_per_s
        workers_s = (own * (self.workers_ms or 0) + (spilled + cpu_decoded) * (self.baseline_ms or 0)) / 1e3 \
            / self.cores
        return 1 / max(device_s, workers_s, 1e-9)

    def balanced(self, batch: int) -> int:
        """--cpu-decoded auto: the N at which the two sides of gpu_path() meet, the fewest of the fastest."""
        if not (self.gpu_images_per_s and self.baseline_ms):
            return 0
        most = max(0, batch - math.ceil((self.share + self.spilled) * batch) - 1)  # (the device keeps one a batch)
        return max(range(most + 1), key=lambda n: (self.gpu_path(batch, n), -n))


def device_files(p: Photos, routing, batch: int) -> list[int]:
    """A batch of the sample's files that --gpu-decode's routing gives the device."""
    return [i for i in sample(len(p.files)) if not routing.workers[i]][:batch]


def measure(cfg, p: Photos, device: torch.device, routing, ranks: int = 1) -> Rates:
    """Time the decoders on a sample spread over the folder: a few seconds of the CPU's, four batched calls of
    the device's (--gpu-decoder's). The rates are for the run's own workers, as many as decode at once on the
    cores that `ranks` runs on a host leave them, each rank keeping two for the loop's and the decoding
    thread."""
    cores = max(1, min(cfg.workers, usable_cpus() // ranks - 2))
    took = cpu_ms(p, sample(len(p.files)), cfg.img_size)
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    gpu = gpu_images_per_s(p, device_files(p, routing, cfg.batch_size), cfg.img_size, device, cfg.gpu_decoder)
    return Rates(cpu_ms=mean(list(took.values())), workers_ms=mean([t for i, t in took.items() if routing.workers[i]]),
                 baseline_ms=mean([t for i, t in took.items() if not routing.workers[i]]), gpu_images_per_s=gpu,
                 share=sum(routing.workers) / len(p.files), cores=cores, timed=len(took),
                 spilled=(routing.overflow or 0) / len(p.files))


def auto_cpu_decoded(cfg, p: Photos, device: torch.device) -> tuple[int, str]:
    """--cpu-decoded auto: N, from the rates measured here and now, and the log line that says how."""
    routing = p.routing(cfg.batch_size, 0, pool_slots(cfg), sequential=True)
    r = measure(cfg, p, device, routing, ranks=DIST.local_world_size)
    n = r.balanced(cfg.batch_size)
    if not r.gpu_images_per_s:
        return 0, ("--cpu-decoded auto: 0, as no GPU decoder could be timed here (no GPU, or no file of the folder "
                   "that the device decodes)")
    return n, (f"--cpu-decoded auto: {n} of each batch to the workers, from rates measured now: the device decodes "
               f"{r.gpu_images_per_s:.0f} images/s, a worker a file in {r.baseline_ms:.1f} ms"
               + (f" (its own kinds in {r.workers_ms:.1f})" if r.workers_ms else "")
               + f"; with {r.cores} workers the GPU path makes about {r.gpu_path(cfg.batch_size, n):.1f} batches/s "
               f"(with none, {r.gpu_path(cfg.batch_size):.1f})")


def survey(cfg, p: Photos, device: torch.device) -> int:
    """Print the survey of p (the run's folder, opened) and the decoders' rates; --json writes them too."""
    for line in p.lines():
        print(line)
    slots = pool_slots(cfg)
    routing = p.routing(cfg.batch_size, 0, slots, sequential=True)
    print(routing.line())
    if room := routing.room(slots, cfg.workers, slots - cfg.queued):
        print(room)
    r = measure(cfg, p, device, routing)  # (the run's own workers, as its routing above has them)
    b = cfg.batch_size
    cpu_path, gpu_path, n = r.cpu_path(b), r.gpu_path(b), r.balanced(b)
    print(f"decoders, timed on {r.timed} of the folder's files at --img-size {cfg.img_size}: "
          + (f"one CPU thread {r.cpu_ms:.1f} ms a file ({1e3 / r.cpu_ms:.0f} images/s)" if r.cpu_ms else
             "no file decoded")
          + (f", the progressive files and other formats {r.workers_ms:.1f} ms" if r.workers_ms else "")
          + (f"; the GPU's batched decode {r.gpu_images_per_s:.0f} images/s" if r.gpu_images_per_s else
             "; no GPU here to time its decoder"))
    if cpu_path:
        print(f"estimates with {r.cores} worker{'s' * (r.cores > 1)} (--workers sets them): the CPU path (--jpeg) "
              f"{cpu_path:.1f} batches/s"
              + (f", the GPU path (--gpu-decode) {gpu_path:.1f} batches/s" if gpu_path else "")
              + (f", {r.gpu_path(b, n):.1f} with --cpu-decoded {n}" if n else "")
              + "; set them against the step's own rate (--variant jpeg-compiled --data-on-gpu)")
    # the other GPU decoders installed, each timed on the same files (the hardware engines take baseline files only)
    files = device_files(p, routing, b) if r.gpu_images_per_s else []
    others = {name: gpu_images_per_s(p, files, cfg.img_size, device, name)
              for name in GPU_DECODERS if name != cfg.gpu_decoder}
    others = {name: rate for name, rate in others.items() if rate}
    if others:
        print("other GPU decoders on the same files (--gpu-decoder): "
              + ", ".join(f"{name} {rate:.0f} images/s" for name, rate in others.items()))
    what = p.summary
    advice = []
    whole_copy = cfg.resized_cache and cfg.gpu_decode and workers_take_copy(cfg.augment, cfg.workers) and cpu_path
    if whole_copy:
        # (the rates alone miss what the device's decode costs the step beside it: the verdict's rule, docs/photos.md)
        advice.append(f"--no-gpu-decode where the CPU path's {cpu_path:.1f} batches/s is above the step's rate: the "
                      "copy's files are at the training size, and decoded by the workers they leave the GPU to the "
                      "step")
    elif gpu_path and cpu_path and gpu_path > cpu_path:
        advice.append("--variant jpeg-gpu: the faster path by these estimates, which are taken alone: time it "
                      "against jpeg-compiled in one command")
    faster = max(others, key=others.get, default=None)
    if faster and others[faster] > DECODER_BETTER * r.gpu_images_per_s:
        advice.append(f"--gpu-decoder {faster}: {others[faster]:.0f} images/s alone against {cfg.gpu_decoder}'s "
                      f"{r.gpu_images_per_s:.0f} (in a run it shares the GPU with the step: measure both)")
    if n:
        advice.append(("or, on the GPU path, " if whole_copy else "")
                      + f"--cpu-decoded {n} (or auto, which measures it at the run's start), to time against 0 in one "
                      f"command: the workers then decode {n} baseline files of each batch too, and by rates taken "
                      "alone the device's share takes no longer than theirs; in a run the step shares the GPU, and "
                      "the loop the cores")
    if cfg.workers >= usable_cpus() and not cfg.worker_nice:
        advice.append(f"--worker-nice 10, to time against 0 in one command: {cfg.workers} workers take every core, "
                      "and the loop's threads, which launch the step and the decode, wait for one")
    if what["median_megapixels"] and what["median_megapixels"] * 1e6 >= 4 * cfg.img_size ** 2:
        advice.append(f"--resized-cache: the median photo ({what['median_pixels']}) is far larger than "
                      f"--img-size {cfg.img_size}, and every read decodes all of it")
    if what["progressive_share"] and not cfg.baseline_copy:
        advice.append(f"--baseline-copy: {what['progressive_share']:.0%} of the files are progressive, which the "
                      "GPU's batched decode takes one at a time, so the workers decode them, at about three times a "
                      "baseline file's cost; a copy of them made once as baseline files goes to the device instead")
    print("flags: " + ("; ".join(advice) if advice else "the defaults"))
    if cfg.json:
        write_json(cfg.json, dict(photos=what, routing=routing.summary(), sampled=r.timed,
                                  cpu_ms_per_file=r.cpu_ms, cpu_ms_per_workers_file=r.workers_ms,
                                  cpu_ms_per_baseline_file=r.baseline_ms, gpu_images_per_s=r.gpu_images_per_s,
                                  workers=r.cores, cpu_path_batches_per_s=cpu_path, gpu_path_batches_per_s=gpu_path,
                                  other_gpu_decoders_images_per_s=others, balanced_cpu_decoded=n, advice=advice))
    return 0
