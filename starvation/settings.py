"""
Each study's settings: its Config, every field a flag in one place (starvation.cli.setting), and the
checks on flags that parse but cannot run together, each one line and exit 2 before anything runs.
train.py's presets and infer.py's fill these; the scripts' parse_config() ties them together.
"""
import argparse
from dataclasses import dataclass, field, fields, replace

import torch

from starvation.cli import COMPUTE, MEASUREMENT, Measurement, check_workers, count_or_auto, nice_int, nonneg_int, \
    positive_int, setting
from starvation.ddp import check_ranks
from starvation.decoders import GPU_DECODERS, installed
from starvation.folder import MAX_PIXELS
from starvation.measure import FELL_BEHIND
from starvation.runtime import DIST, log
from starvation.sources import DECODE_AHEAD
from starvation.thresholds import SETTLE_TOLERANCE

# -----------------------------------------------------------------------------
# part 1, train.py: the input pipeline (host to device)


AMP_DTYPES = {"none": None, "bf16": torch.bfloat16}  # --amp's choices


PIPELINE = "input pipeline (default: the preset's value)"


@dataclass(frozen=True)
class TrainConfig(Measurement):
    variant: str = "baseline"
    workers: int = setting(0, PIPELINE, "DataLoader worker processes (baseline: 0)",
                           preset=True, loader=True, column=True, type=nonneg_int)
    pin_memory: bool = setting(False, PIPELINE, "DataLoader pin_memory (baseline: off)",
                               preset=True, loader=True, column=True)
    non_blocking: bool = setting(False, PIPELINE, "non_blocking copies (baseline: off)",
                                 preset=True, loader=True, column=True)
    streams: bool = setting(False, PIPELINE, "copy batch N+1 on a copy stream while batch N computes on a "
                            "compute stream (baseline: off)", preset=True, loader=True, column=True)
    prefetcher: bool = setting(False, PIPELINE, "wrap the DataLoader in a CUDA prefetching iterator (baseline: off)",
                               preset=True, loader=True, column=True)
    pool: bool = setting(False, PIPELINE, "workers write each batch into a slot of a page-locked shared-memory pool "
                         "and the copy reads it there: no pin-memory thread (baseline: off; presets pool, "
                         "fast-pool: on)", preset=True, loader=True, column=True)
    prefetch_depth: int = setting(1, PIPELINE, "batches the prefetcher keeps in flight (default: 1)", loader=True,
                                  type=positive_int)
    uint8: bool = setting(False, PIPELINE, "uint8 images, converted and normalized on the device (baseline: off)",
                          preset=True, column=True)
    batched_fetch: bool = setting(False, PIPELINE, "the dataset makes a whole batch per call, no collate "
                                  "(baseline: off)", preset=True, loader=True, column=True)
    persistent_workers: bool = setting(False, PIPELINE, "DataLoader persistent_workers; needs --workers "
                                       "(baseline: off)", preset=True, loader=True)
    prefetch_factor: int | None = setting(None, PIPELINE, "batches queued per worker; needs --workers (default: "
                                          "DataLoader's, 2)", preset=True, loader=True, type=positive_int)
    jpeg: bool = setting(False, PIPELINE, "real photos: the workers decode JPEG files (--data-dir) to uint8 "
                         "images, instead of making random ones; needs --uint8 (baseline: off)",
                         preset=True, loader=True, column=True)
    data_dir: str | None = setting(None, PIPELINE, "--jpeg's folder of JPEG files, any sizes, resized and cropped "
                                   "to --img-size; nothing is written there (default: made once from "
                                   "scikit-image's sample photos, in ~/.cache/gpu-starvation)", loader=True,
                                   metavar="DIR")
    gpu_decode: bool = setting(False, PIPELINE, "--jpeg: the workers read the files' bytes only, and the batch is "
                               "decoded on the device by a thread of its own, ahead of the loop (--gpu-decoder "
                               "picks the decoder) (baseline: off)",
                               preset=True, loader=True, column=True)
    gpu_decoder: str = setting("torchvision", PIPELINE, "--gpu-decode's decoder: torchvision's (nvjpeg); nvjpeg, "
                               "nvjpeg's own to each file's planes, the colours converted after the resize, not "
                               "on every decoded pixel (starvation/nvjpeg.py; on an H100 level with torchvision's "
                               "on a copy and the default set; on the H200 1.17-1.28 times its rate on camera-like "
                               "photos with --baseline-copy, whose decoding thread it holds for less: "
                               "docs/photos.md); "
                               "torchcodec, TorchCodec's (nvjpeg, on the decoding thread's stream: "
                               f"{GPU_DECODERS['torchcodec'].install}); or nvimgcodec, the GPU's hardware JPEG engines "
                               f"(nvImageCodec: {GPU_DECODERS['nvimgcodec'].install}), slower on the H200 and an "
                               "H100 in this pipeline (docs/photos.md) (default: torchvision)", loader=True,
                               choices=tuple(GPU_DECODERS))
    decode_threads: int = setting(1, PIPELINE, "--gpu-decode: threads that decode batches on the device, each "
                                  "on a stream of its own with a decoder of its own; the decoder's host work (its "
                                  "calls block the thread for milliseconds a batch) then runs on as many cores. "
                                  "torchvision's decoder takes one call at a time, nvjpeg's planes do not; what a "
                                  "GPU measured of it: docs/photos.md (default: 1)", loader=True, type=positive_int, metavar="N")
    cpu_decoded: int | str = setting(0, PIPELINE, "--gpu-decode: the workers decode the first N images of each batch "
                                     "on the CPU, as --jpeg's workers do, and the device decodes the rest; auto: the N "
                                     "at which both take as long, from the decoders' rates timed at the start "
                                     "(train.py --survey prints them) (default: 0)", loader=True, type=count_or_auto,
                                     metavar="N|auto")
    worker_nice: int = setting(0, PIPELINE, "raise the workers' nice value by N (1-19), so that where the cores are "
                               "few the training loop's threads, which launch the step, take them first (default: 0)",
                               loader=True, type=nice_int, metavar="N")
    skip_bad_images: bool = setting(False, PIPELINE, "--jpeg: a file that does not decode is counted and the next "
                                    "one taken (default: the run stops on it, naming it, exit 3)", loader=True)
    resized_cache: bool = setting(False, PIPELINE, "--jpeg --data-dir: read a copy of the folder, each photo's "
                                  "shorter side resized to --cache-size (JPEG q90), written once under "
                                  "~/.cache/gpu-starvation and reused while the folder's files are unchanged; nothing "
                                  "is written into the folder (default: off)", loader=True)
    baseline_copy: bool = setting(False, PIPELINE, "--jpeg: read the folder's progressive JPEG files from a copy "
                                  "written once as baseline JPEGs at their own size, quantization and subsampling "
                                  "(on the camera-like set a mean 0.05 levels from the originals' pixels), under "
                                  "~/.cache/gpu-starvation and reused while they are unchanged: with --gpu-decode "
                                  "the device decodes them in its batches, not the workers (a progressive file "
                                  "costs a CPU about three times a baseline one) (default: off)", loader=True)
    cache_size: int | None = setting(None, PIPELINE, "--resized-cache: the copy's shorter side in pixels, at least "
                                     "--img-size; larger keeps more pixels for --augment's crops and costs more to "
                                     "decode at every read (default: --img-size, twice it with --augment)", loader=True,
                                     type=positive_int, metavar="PX")
    augment: bool = setting(False, PIPELINE, "--jpeg: a random-resized crop of each photo (0.08 to all of its area, "
                            "sides 3:4 to 4:3) flipped on a coin's throw, as ImageNet training makes them, instead "
                            "of its centre: in the workers, or on the device with --gpu-decode (default: off)",
                            loader=True)
    max_image_pixels: int | None = setting(None, PIPELINE, "--jpeg: a file whose header claims more pixels decodes "
                                           "with a warning, one past twice N is refused before it is decoded "
                                           f"(PIL's convention; default: {MAX_PIXELS:,}, PIL's)",
                                           loader=True, type=positive_int, metavar="N")
    survey: bool = setting(False, PIPELINE, "--jpeg: print what the folder holds (each file's header: kinds, sizes, "
                           "bits a pixel), which files --gpu-decode gives the workers, and each decoder's rate here "
                           "on a sample, then exit (default: off; preset jpeg-gpu unless --variant is given)")
    data_on_gpu: bool = setting(False, PIPELINE, "the ceiling: the variant's step (its --uint8, --amp, "
                                "--channels-last) on one batch resident on the device, no loader")
    loader_only: bool = setting(False, PIPELINE, "no training step: the input pipeline's batches/s to the device, "
                                "copies included, and, when it pins, the workers' alone (no pinning, no copy); "
                                "compare with the ceiling")
    then_alone: bool = setting(False, PIPELINE, "after the window, the loader alone in the same process, on the same "
                               "workers, as --loader-only measures it; the window's record is named run1 and the "
                               "loader's loader (see --json)")
    amp: str = setting("none", COMPUTE, "autocast dtype (baseline: none)", preset=True, column=True,
                       choices=tuple(AMP_DTYPES))
    channels_last: bool = setting(False, COMPUTE, "channels_last model and input (baseline: off)", preset=True,
                                  column=True)
    compile: bool = setting(False, COMPUTE, "torch.compile the model (its backward compiles with it), fused Adam "
                            "where the device has it; compiled before the warm-up, and the record says how long it "
                            "took (baseline: off)", preset=True, column=True)
    batch_size: int = setting(64, COMPUTE, "images per batch (default: 64; without a GPU: 8)", cpu=8,
                              type=positive_int)
    img_size: int = setting(512, COMPUTE, "image height and width (default: 512; without a GPU: 64)", cpu=64,
                            type=positive_int)
    warmup: int | None = setting(None, COMPUTE, "steps before the clock starts, which drop the batches the workers "
                                 "queued ahead (default: 10 + workers x prefetch factor)", type=nonneg_int)
    steps: int = setting(100, COMPUTE, "measured steps; a warning says when the window's second half ran more "
                         f"than {FELL_BEHIND:.0%}% slower than the whole (default: 100; without a GPU: 5)", cpu=5,
                         type=positive_int)
    settle: int | None = setting(None, COMPUTE, f"while the window's halves differ by more than "
                                 f"{SETTLE_TOLERANCE:.0%}%, slide it half a window later, up to N steps; 0, or a "
                                 "profiler, keeps it fixed (default: half of --steps, one slide)",
                                 type=nonneg_int, metavar="N")
    verify: bool = setting(False, MEASUREMENT, "check every measured batch: host checksum before the copy == "
                           "checksum of what the step reads on the device; a mismatch exits 1")
    dist_timeout: int = setting(120, MEASUREMENT, "under torchrun: a rank that has not checked in for its step's "
                                "compute S seconds after rank 0 is named, and the job exits 4 (default: 120)",
                                type=positive_int, metavar="S")
    inject_fault: str | None = setting(None, MEASUREMENT, argparse.SUPPRESS,
                                       choices=("worker-crash", "rank-exit", "rank-hang"))
    given: tuple = ()  # the pipeline flags given explicitly, so that warnings name only what was asked
    requested: dict = field(default_factory=dict)  # the preset's settings as asked, before main() fits them

    @property
    def compute_key(self) -> str:
        """What the ceiling must share with a variant: everything that runs on the device."""
        parts = ["uint8" if self.uint8 else "fp32", self.amp if self.amp != "none" else None,
                 "channels-last" if self.channels_last else None, "compiled" if self.compile else None]
        return "+".join(p for p in parts if p)

    @property
    def queued(self) -> int:
        """Batches the DataLoader asks its workers for before the loop takes them."""
        return self.workers * (self.prefetch_factor or 2)

    @property
    def ahead(self) -> int:
        """Batches made before the loop takes them, which the drain drops: the workers' queue, and with
        --gpu-decode the batches decoded ahead of the loop."""
        return self.queued + self.decoded_ahead

    @property
    def decoded_ahead(self) -> int:
        """--gpu-decode: the batches the device decodes ahead of the loop (sources.DecodeAhead)."""
        return DECODE_AHEAD if self.gpu_decode else 0


# what a preset sets: the baseline's values, which each preset changes
TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig) if f.metadata.get("preset")}


def check_train(parser: argparse.ArgumentParser, cfg: TrainConfig, args: argparse.Namespace,
                       pipeline_given: dict) -> None:
    """What parses but cannot run (a value, or flags that do not go together): one line, exit 2."""
    if cfg.batch_size < 2:
        parser.error(f"--batch-size {cfg.batch_size}: BatchNorm in training needs 2 or more images per batch")
    if cfg.pool and cfg.pin_memory:
        parser.error("--pool and --pin-memory both pin the batches: the pool's slots are page-locked already, so "
                     "drop --pin-memory (or --no-pool for the pin-memory thread)")
    if cfg.loader_only and (cfg.data_on_gpu or cfg.verify or cfg.profile != "none" or DIST.launched):
        parser.error("--loader-only measures one process's input pipeline with no training step: drop "
                     "--data-on-gpu, --verify and --profile, and run it without torchrun")
    if cfg.then_alone and (cfg.loader_only or cfg.data_on_gpu or cfg.profile != "none" or DIST.launched):
        parser.error("--then-alone measures the loader after a training window, in one process: drop --loader-only, "
                     "--data-on-gpu and --profile, and run it without torchrun")
    if cfg.then_alone and cfg.json is not None and "{}" not in cfg.json:
        parser.error(f"--json {cfg.json}: with --then-alone the run writes two records: put {{}} in the path, which "
                     "becomes run1 (the window) and loader")
    if cfg.loader_only and "compile" in pipeline_given:
        parser.error("--compile compiles the training step, and --loader-only runs none: drop one of them")
    if cfg.streams and cfg.prefetcher:
        parser.error("--streams and --prefetcher are two ways to do the same overlap: pick one "
                     "(--no-prefetcher or --no-streams)")
    if cfg.workers == 0 and (cfg.prefetch_factor is not None or cfg.persistent_workers):
        queue = " and ".join(flag for flag, on in (("--prefetch-factor", cfg.prefetch_factor is not None),
                                                  ("--persistent-workers", cfg.persistent_workers)) if on)
        asked = {"prefetch_factor", "persistent_workers"} & set(pipeline_given)
        parser.error(f"--workers 0: {queue} " + ("need worker processes" if "and" in queue else "needs worker "
                     "processes") + ("" if asked else f" (preset {cfg.variant} sets them)") + ": add --workers N")
    if cfg.worker_nice and not cfg.workers:
        parser.error("--worker-nice lowers the workers' priority, and --workers 0 has none: add --workers N")
    check_ranks(parser, cfg)
    check_workers(parser, cfg.workers)
    if cfg.data_on_gpu and cfg.verify:
        parser.error("--verify checks copies, and --data-on-gpu makes none: drop one of them")
    dropped = cfg.data_on_gpu and args.drop_pipeline_flags  # (drop_pipeline_flags has set them back)
    loader_flags = [] if dropped else [f"--{f.name.replace('_', '-')}" for f in pipeline_flags(args)]
    check_photos(parser, cfg)
    if cfg.data_on_gpu and loader_flags:
        one = len(loader_flags) == 1
        parser.error(f"{' '.join(loader_flags)} shape{'s' * one} the input pipeline, and --data-on-gpu has none: drop "
                     f"{'it' if one else 'them'} (the ceiling keeps what runs on the device: --uint8, --amp, "
                     "--channels-last)")


def pipeline_flags(args: argparse.Namespace) -> list:
    """The flags given that shape only the input pipeline (a setting's `loader`), as dataclass fields."""
    return [f for f in fields(TrainConfig) if f.metadata.get("loader") and getattr(args, f.name) not in (None, False)]


def drop_pipeline_flags(cfg: TrainConfig, args: argparse.Namespace) -> TrainConfig:
    """run_all.sh's ceilings (--drop-pipeline-flags): the flags after its -- go to every variant, and a ceiling
    leaves out, saying so, those that shape an input pipeline it does not have (by hand, check_train refuses
    them)."""
    given = pipeline_flags(args)
    if not (cfg.data_on_gpu and args.drop_pipeline_flags and given):
        return cfg
    log(" ".join(f"--{f.name.replace('_', '-')}" for f in given) + " left out: the ceiling (--data-on-gpu) has no "
        "input pipeline for them to shape")
    return replace(cfg, **{f.name: f.default for f in given})


def check_photos(parser: argparse.ArgumentParser, cfg: TrainConfig) -> None:
    """--jpeg's flags (train.py's prepare() then opens its folder)."""
    if cfg.data_dir is not None and not cfg.jpeg:
        parser.error("--data-dir is the folder --jpeg reads: add --jpeg (or a jpeg preset)")
    if cfg.max_image_pixels is not None and not cfg.jpeg:
        parser.error("--max-image-pixels guards --jpeg's files: add --jpeg (or a jpeg preset)")
    if cfg.jpeg and not cfg.uint8:
        parser.error("--jpeg decodes to uint8 images: add --uint8")
    if cfg.gpu_decode and not cfg.jpeg:
        parser.error("--gpu-decode decodes --jpeg's files: add --jpeg")
    if cfg.augment and not cfg.jpeg:
        parser.error("--augment crops and flips --jpeg's photos (the study's random images have nothing to crop): "
                     "add --jpeg")
    if cfg.gpu_decoder != "torchvision" and not cfg.gpu_decode:
        parser.error("--gpu-decoder picks --gpu-decode's decoder: add --gpu-decode")
    if cfg.decode_threads > 1 and not cfg.gpu_decode:
        parser.error("--decode-threads sets --gpu-decode's decoding threads: add --gpu-decode")
    if cfg.cpu_decoded and not cfg.gpu_decode:
        parser.error("--cpu-decoded splits --gpu-decode's batches between the workers and the device: add --gpu-decode")
    if cfg.cpu_decoded != "auto" and cfg.cpu_decoded >= cfg.batch_size:
        parser.error(f"--cpu-decoded {cfg.cpu_decoded} leaves the device no image of a batch of {cfg.batch_size} to "
                     "decode: give fewer, or drop --gpu-decode (the workers then decode every image)")
    decoder = GPU_DECODERS[cfg.gpu_decoder]
    if decoder.install and not installed(decoder.module):  # (torchvision's comes with the project)
        parser.error(f"--gpu-decoder {cfg.gpu_decoder}: {decoder.package} is not installed here ({decoder.install})")
    if cfg.gpu_decode and cfg.skip_bad_images:
        parser.error("--skip-bad-images needs decoding on the CPU, in the workers: the GPU decodes a whole batch "
                     "at once (drop --gpu-decode)")
    if cfg.survey and (not cfg.jpeg or cfg.data_on_gpu):
        parser.error("--survey reads --jpeg's folder: drop --data-on-gpu, and use a jpeg preset (its default, "
                     "jpeg-gpu) or add --jpeg")
    if cfg.cache_size is not None and not cfg.resized_cache:
        parser.error("--cache-size sizes --resized-cache's copy: add --resized-cache")
    if cfg.cache_size is not None and cfg.cache_size < cfg.img_size:
        parser.error(f"--cache-size {cfg.cache_size} is smaller than --img-size {cfg.img_size}: every image would be "
                     "scaled up again after its decode")
    if cfg.jpeg and not cfg.data_on_gpu and cfg.resized_cache and not cfg.data_dir:
        parser.error("--resized-cache copies --data-dir's photos at --img-size: add --data-dir DIR (the default "
                     "set is made at --img-size already)")


# -----------------------------------------------------------------------------
# part 2, infer.py: the output path (device to host)


OUTPUT = "output path (default: the preset's value)"


@dataclass(frozen=True)
class InferConfig(Measurement):
    variant: str = "baseline"
    workers: int = setting(0, OUTPUT, "output-processing worker processes; 0: the main thread (baseline: 0)",
                           preset=True, loader=True, column=True, type=nonneg_int)
    pool: bool = setting(False, OUTPUT, "copy into pre-allocated shared-memory buffers, reused (baseline: off)",
                         preset=True, loader=True, column=True)
    pinned: bool = setting(False, OUTPUT, "page-locked pool, non_blocking copies handed over on a CUDA event; "
                           "needs --pool (baseline: off)", preset=True, loader=True, column=True)
    streams: bool = setting(False, OUTPUT, "copies on a side stream, overlapping the next batch's forward; needs "
                            "--pinned (baseline: off)", preset=True, loader=True, column=True)
    uint8_out: bool = setting(False, OUTPUT, "argmax on the device: a uint8 class map comes back, not the class "
                              "scores (baseline: off)", preset=True, column=True)
    outputs_on_gpu: bool = setting(False, OUTPUT, "the ceiling: the variant's forward (its --uint8-out), outputs "
                                   "left on the device: no copy, no processing")
    output_only: bool = setting(False, OUTPUT, "output processing alone: no model; the variant's workers (or the "
                                "loop's thread) process host buffers as fast as the path takes them; compare with the "
                                "ceiling")
    then_alone: bool = setting(False, OUTPUT, "after the windows, output processing alone in the same process: "
                               "its workers and buffers, no model; its record is named 'output' (see --json)")
    classes: int = setting(21, COMPUTE, "segmentation classes (default: 21)", type=positive_int)
    batch_size: int = setting(16, COMPUTE, "images per batch (default: 16; without a GPU: 2)", cpu=2,
                              type=positive_int)
    img_size: int = setting(512, COMPUTE, "image height and width (default: 512; without a GPU: 64)", cpu=64,
                            type=positive_int)
    warmup: int | None = setting(None, COMPUTE, "batches before the window, which fill the output path (default: "
                                 "5 + 3 x workers)", type=positive_int)
    steps: int = setting(100, COMPUTE, "the most measured batches (default: 100; without a GPU: 5)", cpu=5,
                         type=positive_int)
    repeat: int = setting(1, MEASUREMENT, "windows measured one after the other in this process, each its own "
                          "record (default: 1)", type=positive_int, metavar="N")
    verify: bool = setting(False, MEASUREMENT, "check every batch: the checksum of what the host processed == the "
                           "checksum of the output on the device; a mismatch exits 1")
    # the classic bug, kept to show that --verify catches it: hand a buffer over before its copy is done
    unsafe_no_wait: bool = setting(False, MEASUREMENT, argparse.SUPPRESS)
    inject_fault: str | None = setting(None, MEASUREMENT, argparse.SUPPRESS, choices=("worker-crash",))

    @property
    def compute_key(self) -> str:
        return "segmentation, " + ("uint8 class map" if self.uint8_out else "fp32 scores") + " out"


INFER_DEFAULTS = {f.name: f.default for f in fields(InferConfig) if f.metadata.get("preset")}


def check_infer(p: argparse.ArgumentParser, cfg: InferConfig, pipeline_given: dict) -> None:
    """What parses but cannot run (a value, or flags that do not go together): one line, exit 2."""
    if cfg.uint8_out and cfg.classes > 256:
        p.error(f"--uint8-out --classes {cfg.classes}: a uint8 class map holds at most 256 classes: drop --uint8-out "
                "(or its preset uint8), or use 256 classes or fewer")
    if cfg.pinned and not cfg.pool:
        p.error("--pinned page-locks the pool's buffers: add --pool")
    if cfg.streams and not cfg.pinned:
        p.error("--streams overlaps non_blocking copies, which need page-locked buffers: add --pinned")
    if cfg.unsafe_no_wait and not cfg.pinned:
        p.error("--unsafe-no-wait skips the wait on a non_blocking copy: it needs --pinned")
    if cfg.output_only and (cfg.outputs_on_gpu or cfg.verify or cfg.profile != "none"):
        p.error("--output-only processes host buffers with no model: drop --outputs-on-gpu, --verify and --profile")
    if (cfg.repeat > 1 or cfg.then_alone) and cfg.json is not None and "{}" not in cfg.json:
        p.error(f"--json {cfg.json}: with --repeat or --then-alone the run writes several records: put {{}} in the "
                "path, which becomes run1, run2, ... and output")
    if cfg.then_alone and (cfg.output_only or cfg.outputs_on_gpu):
        p.error("--then-alone measures the output path alone after the variant: drop --output-only and "
                "--outputs-on-gpu")
    if cfg.profile != "none" and (cfg.repeat > 1 or cfg.then_alone):
        p.error("--profile records one window: drop --repeat and --then-alone (profile the run apart from the "
                "runs you compare)")
    if cfg.outputs_on_gpu and (cfg.verify or set(pipeline_given) - {"uint8_out"}):
        p.error("--outputs-on-gpu copies and processes nothing: drop --verify and the output-path flags "
                "(it keeps what runs on the device: --uint8-out)")
