"""
train.py --survey: what a folder of photos holds, and what each decoder makes of it here, before a run.

It reads every file's header (starvation/folder.py), then times the decoders for a few seconds on a sample
spread over the folder: the workers' (one thread, each file as --jpeg's workers decode it) and, with a GPU,
the batched decode of the files --gpu-decode routes to the device. From those it estimates the batches a
second that each path can deliver, so that they can be set against the step's own rate (the ceiling:
--variant jpeg-compiled --data-on-gpu), and names the flags that fit the folder.
"""
import time

import torch

from starvation.decoders import decode, decode_batch, read_jpeg
from starvation.folder import BadImage
from starvation.photos import Photos
from starvation.pool import pool_slots
from starvation.runtime import device_sync, usable_cpus
from starvation.writes import write_json

SAMPLE = 48          # files timed, spread over the folder
CPU_SECONDS = 4.0    # at most, on one thread


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
                decode(p.files[i], size, p.max_pixels)
            except BadImage:
                continue
            took[i] = (time.perf_counter() - t0) * 1e3
    finally:
        torch.set_num_threads(threads)
    return took


def gpu_images_per_s(p: Photos, files: list[int], size: int, device: torch.device) -> float | None:
    """The batched decode (and resize) of `files` on the device, images a second: the median of three calls."""
    if device.type != "cuda" or not files:
        return None
    times = []
    try:
        encoded = [read_jpeg(p.files[i], p.max_pixels) for i in files]
        for _ in range(4):  # the first call starts nvjpeg: left out
            t0 = time.perf_counter()
            decode_batch(encoded, size, device)
            device_sync(device)
            times.append(time.perf_counter() - t0)
    except BadImage:  # a bad file among them: a run names it; the survey times the CPU alone
        return None
    return len(files) / sorted(times[1:])[1]


def survey(cfg, p: Photos, device: torch.device) -> int:
    """Print the survey of p (the run's folder, opened) and the decoders' rates; --json writes them too."""
    for line in p.lines():
        print(line)
    routing = p.routing(cfg.batch_size, cfg.cpu_decoded, pool_slots(cfg), sequential=True)
    print(routing.line())
    picked = sample(len(p.files))
    took = cpu_ms(p, picked, cfg.img_size)
    workers = [i for i in took if routing.workers[i]]
    on_device = [i for i in picked if not routing.workers[i]]
    cores = max(1, usable_cpus() - 2)  # the loop's thread and the decoding thread take a core each
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    cpu_all = mean(list(took.values()))
    cpu_workers = mean([took[i] for i in workers])
    gpu = gpu_images_per_s(p, on_device[:cfg.batch_size], cfg.img_size, device)
    share = sum(routing.workers) / len(p.files)  # the workers' share of the files under --gpu-decode
    cpu_path = cores * 1e3 / cpu_all / cfg.batch_size if cpu_all else None
    gpu_path = None
    if gpu:
        device_s = (1 - share) * cfg.batch_size / gpu
        workers_s = share * cfg.batch_size * (cpu_workers or 0) / 1e3 / cores
        gpu_path = 1 / max(device_s, workers_s)
    print(f"decoders, timed on {len(took)} of the folder's files at --img-size {cfg.img_size}: "
          + (f"one CPU thread {cpu_all:.1f} ms a file ({1e3 / cpu_all:.0f} images/s)" if cpu_all else "no file decoded")
          + (f", the progressive files and other formats {cpu_workers:.1f} ms" if cpu_workers else "")
          + (f"; the GPU's batched decode {gpu:.0f} images/s" if gpu else "; no GPU here to time its decoder"))
    if cpu_path:
        print(f"estimates with {cores} worker{'s' * (cores > 1)}: the CPU path (--jpeg) {cpu_path:.1f} batches/s"
              + (f", the GPU path (--gpu-decode) {gpu_path:.1f} batches/s" if gpu_path else "")
              + "; set them against the step's own rate (--variant jpeg-compiled --data-on-gpu)")
    what = p.summary
    advice = []
    if gpu_path and cpu_path and gpu_path > cpu_path:
        advice.append("--variant jpeg-gpu: the GPU path is the faster here")
    if what["median_megapixels"] and what["median_megapixels"] * 1e6 >= 4 * cfg.img_size ** 2:
        advice.append(f"--resized-cache: the median photo ({what['median_pixels']}) is far larger than "
                      f"--img-size {cfg.img_size}, and every read decodes all of it")
    if what["progressive_share"] and not gpu:
        advice.append(f"{what['progressive_share']:.0%} of the files are progressive: under --gpu-decode the "
                      "workers decode them")
    print("flags: " + ("; ".join(advice) if advice else "the defaults"))
    if cfg.json:
        write_json(cfg.json, dict(photos=what, routing=routing.summary(), sampled=len(took),
                                  cpu_ms_per_file=cpu_all, cpu_ms_per_workers_file=cpu_workers,
                                  gpu_images_per_s=gpu, workers=cores, cpu_path_batches_per_s=cpu_path,
                                  gpu_path_batches_per_s=gpu_path, advice=advice))
    return 0

