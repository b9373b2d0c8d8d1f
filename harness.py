"""
The measurement harness that train.py (part 1: host to device) and infer.py (part 2: device to host)
share, so that each script holds only its study's steps: settings that make the flags, the ranks of a
torchrun job, the profilers' ranges, the page-locked shared pool, the measured window's figures, and
the run's record and last lines.
"""
import argparse
import contextlib
import ctypes
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import re
import signal
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields

try:
    import torch
    import torch.distributed as dist
    import torchvision
except ModuleNotFoundError as e:  # started outside the environment that the README's commands make
    sys.exit(f"{os.path.basename(sys.argv[0])}: no module named {e.name!r} here: run ./run_all.sh or tests/run.sh "
             "once (they make .venv), then `source .venv/bin/activate`, or use .venv/bin/python")

# -----------------------------------------------------------------------------
# settings: a dataclass field and its flag in one place

COMPUTE, MEASUREMENT = "compute", "measurement"


def positive_int(s: str) -> int:
    n = int(s)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {s}")
    return n


def nonneg_int(s: str) -> int:
    n = int(s)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {s}")
    return n


def setting(default, group: str, help: str, *, preset: bool = False, loader: bool = False, column: bool = False,
            cpu=None, tracked: bool = False, **flag):
    """A field of Config and its command-line flag, in one place. `preset`: a preset sets it, unless the
    flag is given; `loader`: it shapes only the input pipeline (so --data-on-gpu refuses it); `column`:
    a column of --list-variants; `cpu`: its value on a machine without a GPU, unless the flag is given
    (fit_to_machine); `tracked`: parse_preset_args' `settings_given` holds it only when given; `flag`: argparse's
    keywords, where the type does not say them."""
    return field(default=default, metadata=dict(group=group, help=help, preset=preset, loader=loader,
                                                column=column, cpu=cpu, tracked=tracked, flag=flag))


def fit_to_machine(cfg, settings_given: dict) -> None:
    """Without a GPU, the sizes of run_all.sh's small CPU run for every size flag not given, said in one
    line: at full size, 19 steps of train.py took 12.5 minutes and about 7 GB on a 2-core CPU machine."""
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        return
    small = {f.name: f.metadata["cpu"] for f in fields(cfg)
             if f.metadata.get("cpu") is not None and f.name not in settings_given}
    for name, value in small.items():
        setattr(cfg, name, value)
    if small and DIST.rank == 0:
        log("no GPU: a small CPU run (" + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in small.items())
            + "), as run_all.sh makes it; give those flags for other sizes")


@dataclass
class Measurement:
    """The settings every script's run has, whatever its study: a script's Config extends it."""
    device: str = setting("auto", COMPUTE, "auto picks cuda when present (default: auto)",
                          choices=("auto", "cuda", "cpu"))
    profile: str = setting("none", MEASUREMENT, "nsys: cudaProfilerApi start/stop around the measured steps (see "
                           "--profile-steps), for `nsys profile --capture-range=cudaProfilerApi`; torch: run under "
                           "torch.profiler (default: none)", choices=("none", "nsys", "torch"))
    profile_steps: int | None = setting(None, MEASUREMENT, "with --profile: record only the last N measured steps, "
                                        "once the pipeline has settled; the run's throughput still covers every "
                                        "step (default: all measured steps)", type=positive_int, metavar="N")
    profile_dir: str = setting("traces", MEASUREMENT, "where --profile torch writes its trace (default: traces)")
    nvtx: bool = setting(True, MEASUREMENT, "no NVTX ranges (default: the study's ranges and colours)",
                         name="--no-nvtx", action="store_false")
    json: str | None = setting(None, MEASUREMENT, "write the run's record as JSON to PATH (under torchrun, rank 0 "
                               "writes the job's)", metavar="PATH")
    seed: int = setting(0, COMPUTE, "seed for the model and the data (default: 0)", type=int)
    # note: a window of a fixed number of steps costs 40 s at the study's baseline and 2 s at a fast ceiling
    window_s: float = setting(10.0, COMPUTE, "the window closes after S seconds once it holds --min-steps, and at "
                              "--steps at the latest; --steps alone asks for a window of that many (default: 10)",
                              type=float, metavar="S", tracked=True)
    min_steps: int = setting(20, COMPUTE, "the fewest measured steps (default: 20, at most --steps)",
                             type=positive_int, metavar="N", tracked=True)


def preset_table(cls, presets: dict, defaults: dict) -> list[str]:
    """--list-variants: a row per preset, a column per setting of `cls` marked as one."""
    cols = tuple(f.name for f in fields(cls) if f.metadata.get("column"))
    rows = [("variant",) + cols + ("what it changes",)]
    for name, (preset, what) in presets.items():
        s = dict(defaults, **preset)
        rows.append((name,) + tuple("yes" if s[c] is True else "-" if s[c] is False else str(s[c]) for c in cols)
                    + (what,))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def add_setting_flags(p: argparse.ArgumentParser, cls) -> argparse.ArgumentParser:
    """A flag for each field of the dataclass `cls` made with setting(), in its order and group."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    # the script's own groups first, then compute, then measurement (Measurement's fields come first in cls)
    order = {COMPUTE: 1, MEASUREMENT: 2}
    for f in sorted(fields(cls), key=lambda f: order.get(f.metadata.get("group"), 0)):
        m = f.metadata
        if "group" not in m:
            continue
        if m["group"] not in groups:
            groups[m["group"]] = p.add_argument_group(m["group"])
        flag = dict(m["flag"])
        name = flag.pop("name", "--" + f.name.replace("_", "-"))
        if f.type in (bool, "bool") and "action" not in flag:
            # a preset's switch can be turned either way; the others are only ever turned on
            flag["action"] = argparse.BooleanOptionalAction if m["preset"] else "store_true"
        # None: not given, so that the preset's value, or a default derived from other flags, stands
        flag.setdefault("default", None if m["preset"] or m["loader"] or m["tracked"] or m["cpu"] is not None
                        else f.default)
        groups[m["group"]].add_argument(name, dest=f.name, help=m["help"], **flag)
    return p


def preset_parser(doc: str, cls, presets: dict, variant_help: str, default: str | None) -> argparse.ArgumentParser:
    """A script's parser: --variant picks a preset, --list-variants lists them, and a flag per setting."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", choices=presets, default=default, help=variant_help)
    p.add_argument("--list-variants", action="store_true", help="print the presets and exit")
    return add_setting_flags(p, cls)


def parse_preset_args(p: argparse.ArgumentParser, defaults: dict, listing, argv: list[str] | None):
    """The parsed flags, the pipeline settings given explicitly (they override the preset's), and the
    other settings given; --list-variants prints `listing()` and exits."""
    args = p.parse_args(argv)
    if args.list_variants:
        print(listing())
        sys.exit(0)
    pipeline_given = {k: v for k, v in vars(args).items() if k in defaults and v is not None}
    settings_given = {k: v for k, v in vars(args).items()
                      if k not in defaults and k != "list_variants" and v is not None}
    return args, pipeline_given, settings_given


def resolve_window(cfg, settings_given: dict) -> None:
    """The window's bounds as asked: --steps N alone asks for exactly N steps (a 600-step check is 600
    steps, not what --window-s holds), and the fewest steps are never more than the most."""
    if "steps" in settings_given and not {"window_s", "min_steps"} & settings_given.keys():
        cfg.min_steps = cfg.steps
    cfg.min_steps = min(cfg.min_steps, cfg.steps)


def check_measurement(p: argparse.ArgumentParser, cfg, settings_given: dict) -> None:
    """The checks every script's measurement flags need, before anything runs; `settings_given`, from
    parse_preset_args."""
    has_cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not has_cuda:
        p.error("--device cuda: no CUDA device is visible to torch; use --device cpu or auto")
    if cfg.profile == "nsys" and (cfg.device == "cpu" or not has_cuda):
        p.error("--profile nsys needs CUDA (it brackets the steps with cudaProfilerApi); on the CPU, profile the "
                f"whole run instead: nsys profile --trace=nvtx,osrt python {os.path.basename(sys.argv[0])} ...")
    if not cfg.window_s > 0:
        p.error(f"--window-s {cfg.window_s}: the window needs a positive number of seconds")
    if cfg.profile_steps is not None and (cfg.profile == "none" or cfg.profile_steps > cfg.steps):
        p.error(f"--profile-steps {cfg.profile_steps} needs --profile nsys|torch and at most --steps ({cfg.steps}) "
                "steps")
    for flag, path, needed in (("--json", cfg.json, cfg.json is not None),
                               ("--profile-dir", cfg.profile_dir, cfg.profile == "torch")):
        if needed and (why := unwritable(path, is_dir=flag == "--profile-dir")):
            p.error(f"{flag} {path!r}: {why}, so the run's output could not be written: check it before the run")


def unwritable(path: str, is_dir: bool) -> str | None:
    """Why `path` cannot be written (for a folder: made), or None."""
    if not path:
        return "an empty path"
    p = os.path.abspath(path)
    if os.path.isdir(p) != is_dir and os.path.exists(p):
        return "a folder" if not is_dir else "a file, not a folder"
    parent = p if is_dir else os.path.dirname(p)
    while not os.path.exists(parent):  # a folder to be made: its nearest existing ancestor must take it
        if not is_dir or parent == os.path.dirname(parent):
            return f"no folder {os.path.dirname(p)}"
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not a writable folder"
    return None


# -----------------------------------------------------------------------------
# ranks: where this process sits in a torchrun job (ddp.py joins the job and checks its ranks)


@dataclass
class Dist:
    """Where this process sits in a torchrun job; one rank of one when run plainly."""
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    launched: bool = False  # torchrun's environment variables are set
    gloo: object = None     # a gloo group beside NCCL's, for check_in (None: the default group is gloo)
    store: object = None    # the job's key-value store, where check_in counts each rank's steps
    checked_in: int = 0     # check_in's count of this rank's steps
    problem: str | None = None  # a malformed torchrun environment, named by check_launcher()

    @property
    def tag(self) -> str:
        return f"[rank {self.rank}] " if self.launched else ""


def dist_from_env() -> Dist:
    """This process's place in a torchrun job, from its environment; a malformed one is kept for
    check_launcher() to name, where the flags are checked, not raised at import."""
    env = os.environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return Dist()
    values = dict(RANK=env["RANK"], LOCAL_RANK=env.get("LOCAL_RANK", "0"), WORLD_SIZE=env["WORLD_SIZE"],
                  LOCAL_WORLD_SIZE=env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    bad = [f"{k}={v!r}" for k, v in values.items() if not v.isdigit()]
    if bad:
        return Dist(problem=f"{', '.join(bad)}: torchrun's variables must be whole numbers")
    rank, local_rank, world, local_world = (int(v) for v in values.values())
    return Dist(rank=rank, local_rank=local_rank, world_size=world, local_world_size=local_world, launched=True)


DIST = dist_from_env()


def check_launcher(p: argparse.ArgumentParser, one_process: bool = False) -> None:
    """A distributed environment this script can run in, or one line and exit 2: torchrun sets RANK,
    WORLD_SIZE and MASTER_ADDR (ranks started by hand, one per node, set them too); without MASTER_ADDR
    torch raises a ValueError that names no fix."""
    if DIST.problem:
        p.error(DIST.problem)
    if not DIST.launched or DIST.world_size == 1:
        return
    script = os.path.basename(sys.argv[0])
    if one_process:
        p.error(f"{script} runs as one process, and this environment asks for {DIST.world_size} "
                "(WORLD_SIZE): run it without torchrun, or unset RANK and WORLD_SIZE")
    if "MASTER_ADDR" not in os.environ:
        p.error(f"RANK and WORLD_SIZE={DIST.world_size} are set, but not MASTER_ADDR, so the ranks cannot meet: "
                f"start the job with torchrun --standalone --nproc-per-node {DIST.world_size} {script} ..., or "
                "unset RANK and WORLD_SIZE")


def usable_cpus() -> int:
    """The CPUs this process may run on: under `taskset -c 0-7` that is 8, whatever the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def process_age_s() -> float | None:
    """Seconds since this process started, its imports included (Linux; None elsewhere): where a run's
    time goes before its loop."""
    try:
        with open("/proc/self/stat") as f:
            started = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - started / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def check_workers(p: argparse.ArgumentParser, workers: int) -> None:
    """A worker count the machine can hold: each is a process, with its batches in memory."""
    cpus = usable_cpus()
    if workers > 4 * cpus:
        p.error(f"--workers {workers}: more than 4 per CPU ({cpus} CPUs here), which only queues processes for "
                f"the same cores and memory; at most --workers {4 * cpus}")


def log(msg: str) -> None:
    """Progress and errors on stderr; under torchrun each line names its rank."""
    sys.stderr.write(f"{DIST.tag}{msg}\n")  # one write, so that the ranks' lines do not interleave
    sys.stderr.flush()


def warn(msg: str) -> None:
    if DIST.rank == 0:  # the same on every rank: say it once
        log(f"warning: {msg}")


def rank_missing(e: BaseException, timeout_s: int) -> str | None:
    """The line for a check-in that a rank missed; None for other errors."""
    found = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", str(e))
    if found is None:
        return None
    ranks = found.group(1).strip(", ")
    return (f"rank {ranks} did not check in for its step's compute within --dist-timeout ({timeout_s} s): it died "
            f"or hangs, and its log says where. If it is only slow, raise --dist-timeout")


# -----------------------------------------------------------------------------
# the device and the profilers


def pick_device(choice: str) -> torch.device:
    """--device: auto takes CUDA when torch sees it; under torchrun, the rank's own GPU."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        if choice == "auto" and DIST.rank == 0:
            log("no CUDA device: running on the CPU, where copies are synchronous, streams are no-ops and figures "
                "say nothing about a GPU")
        return torch.device("cpu")
    if DIST.launched:
        # note: before anything touches CUDA, so that streams, pinned memory and NCCL use this GPU
        torch.cuda.set_device(DIST.local_rank)
        return torch.device("cuda", DIST.local_rank)
    return torch.device("cuda", torch.cuda.current_device())


def device_sync(device: torch.device) -> None:
    if device.type != "cpu":
        torch.get_device_module(device.type).synchronize(device)


def new_stream(device: torch.device):
    """A stream on this rank's device, named explicitly: a stream made on whatever device is current
    is the classic multi-GPU prefetcher bug (every rank's copies land on GPU 0)."""
    return torch.cuda.Stream(device=device) if device.type == "cuda" else torch.get_device_module(device.type).Stream()


def current_stream(device: torch.device):
    return torch.get_device_module(device.type).current_stream(device)


def checksum(images: torch.Tensor) -> torch.Tensor:
    """Exact per-sample checksum of the raw bytes: their sum as 64-bit words, wrapping, which is the same
    in any order, so host and device agree to the last bit. Words, not bytes: on one core of a 2-core CPU
    machine a 64x3x512x512 uint8 batch took 160 ms as bytes and 2 ms as words, and --verify on the plain
    DataLoader path takes it on the main thread."""
    flat = images.reshape(images.shape[0], -1)
    raw = flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)
    if raw.shape[1] % 8 == 0 and raw.storage_offset() % 8 == 0:
        return raw.view(torch.int64).sum(dim=1)
    return raw.sum(dim=1, dtype=torch.int64)


# the NVTX ranges the scripts write, and their colours: the study's ("Batch i" holds the others), then
# part 2's; analyze.py reads them by these names (a test checks that its names and colours match)
RANGES = {"Batch": "blue", "get batch": "red", "copy batch": "yellow", "Compute": "green",
          "copy output": "yellow", "process output": "red"}


class Marker:
    """Named ranges for the profilers: nvtx ranges in RANGES' colours, and torch.profiler labels when that
    runs. Under torchrun every name ends with the rank, " (rank 1)"."""

    def __init__(self, backend: str, torch_profiler: bool, suffix: str = ""):
        self.backend, self.torch_profiler, self.suffix = backend, torch_profiler, suffix
        if backend == "nvtx":
            import nvtx
            self._nvtx = nvtx

    @contextlib.contextmanager
    def __call__(self, name: str):
        color = RANGES[name.split()[0] if name.startswith("Batch ") else name]
        name += self.suffix
        with contextlib.ExitStack() as stack:
            if self.backend == "nvtx":
                stack.enter_context(self._nvtx.annotate(name, color=color))
            elif self.backend == "torch":
                torch.cuda.nvtx.range_push(name)
                stack.callback(torch.cuda.nvtx.range_pop)
            if self.torch_profiler:
                stack.enter_context(torch.profiler.record_function(name))
            yield


def nvtx_backend(enabled: bool) -> str:
    """'nvtx' (the study's coloured ranges), 'torch' (torch.cuda.nvtx, no colours) or 'off'."""
    if not enabled:
        return "off"
    try:
        import nvtx
    except ImportError:
        warn("the nvtx package is not installed: NVTX ranges go through torch.cuda.nvtx, "
             "without colours (pip install nvtx)")
        return "torch"
    # nvtx >= 0.2.12 asks the attached tool whether its domain is enabled; nsys 2023.4 never says
    # yes, so every nvtx.annotate range would vanish from the report without a word.
    attached = bool(os.environ.get("NVTX_INJECTION64_PATH"))
    if attached and type(nvtx.get_domain()).__name__ == "DummyDomain":
        version = getattr(nvtx, "__version__", None) or importlib.metadata.version("nvtx")
        if not os.environ.get("NVTX_FALLBACK_SAID"):  # run_all.sh says it once a run, not once a report
            warn(f"the attached profiler reports the nvtx domain disabled (nvtx {version} asks "
                 "nvtxDomainIsEnabled, which nsys 2023.4 does not answer), so nvtx.annotate ranges would be "
                 "dropped: recording them through torch.cuda.nvtx instead, without colours "
                 "(nvtx<=0.2.11 or a newer nsys keeps the colours)")
        return "torch"
    return "nvtx"


def torch_profiler(cfg, device: torch.device, total: int, capture_from: int):
    if cfg.profile != "torch":
        return None
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return torch.profiler.profile(
        activities=activities, record_shapes=True, with_stack=True,
        schedule=torch.profiler.schedule(wait=max(0, capture_from - 1), warmup=min(1, capture_from),
                                         active=total - capture_from, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(
            cfg.profile_dir, worker_name=f"rank{DIST.rank}" if DIST.launched else None))


class Loop:
    """What wraps both studies' loops, their batches aside: torch.profiler's schedule (the last
    --profile-steps of `total`), nsys's capture range, a progress line every 10 s on a long run, and the
    sync after the last batch that lets the clock see it finish. `with Loop(...) as loop:`, then
    loop.capture() where the nsys capture begins, loop.stepped(i) after each batch, loop.end() after the last."""

    def __init__(self, cfg, device: torch.device, total: int, capture_from: int, unit: str = "step"):
        self.cfg, self.device, self.unit, self.capture_from = cfg, device, unit, capture_from
        self.prof = torch_profiler(cfg, device, total, capture_from)
        self.last_print = time.perf_counter()

    def __enter__(self) -> "Loop":
        if self.prof is not None:
            self.prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.prof is not None:
            self.prof.__exit__(*exc)

    def capture(self) -> None:
        """nsys records from here (run under nsys --capture-range=cudaProfilerApi)."""
        if self.cfg.profile == "nsys":
            torch.cuda.profiler.start()

    def stepped(self, i: int, total: int | None = None) -> None:
        """After batch i (of `total`, when known): torch.profiler's schedule moves on, and every 10 s a line."""
        if self.prof is not None:
            self.prof.step()
        if time.perf_counter() - self.last_print > 10 and DIST.rank == 0:
            log(f"  {self.unit} {i + 1}{f'/{total}' if total else ''} "
                f"({'warm-up' if i < self.cfg.warmup else 'measured'})")
            self.last_print = time.perf_counter()

    def end(self) -> None:
        device_sync(self.device)  # note: a CPU-GPU sync point, so the clock sees the last batch finish
        if self.cfg.profile == "nsys":
            torch.cuda.profiler.stop()


# -----------------------------------------------------------------------------
# the pool: page-locked shared memory, made once


def size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def available_ram() -> int | None:
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo") as f:
            line = next(x for x in f if x.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    return None


class SharedPool:
    """n slots of each part (name -> (shape, dtype)) in shared memory, made before the worker processes
    start (they inherit the mapping), and registered once as page-locked memory (cudaHostRegister) so
    that copies to and from it run at the pinned rate. torch's shared memory is unlinked from /dev/shm
    as soon as it is made, so nothing is left there on any exit; close() unregisters it."""

    def __init__(self, what: str, n: int, parts: dict, device: torch.device, pin: bool, shrink: str):
        self.what, self.n, self.registered = what, n, []
        self.nbytes = sum(n * math.prod(shape) * dtype.itemsize for shape, dtype in parts.values())
        need = self.nbytes * DIST.local_world_size  # every rank on this host makes its own
        for where, have in (("/dev/shm", free_bytes("/dev/shm") if os.path.isdir("/dev/shm") else None),
                            ("available memory", available_ram())):
            if have is not None and need > have:
                raise PoolTooBig(f"the {what} needs {size(need)} and {where} has {size(have)} free: {shrink}, "
                                 "or give the machine more (docker run --shm-size=...)")
        for name, (shape, dtype) in parts.items():
            setattr(self, name, torch.empty((n, *shape), dtype=dtype).share_memory_())
        self.pinned = pin and device.type == "cuda" and self.register(device, [getattr(self, k) for k in parts])

    def register(self, device: torch.device, tensors: list) -> bool:
        cudart = torch.cuda.cudart()
        for t in tensors:
            with torch.cuda.device(device):
                err = cudart.cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0)
            if int(err) != 0:
                warn(f"cudaHostRegister of the {size(self.nbytes)} {self.what} failed (cudaError {int(err)}; the "
                     "locked-memory limit, ulimit -l, may be too low): falling back to ordinary copies")
                self.close()
                return False
            self.registered.append(t)
        return True

    def close(self) -> None:
        cudart = torch.cuda.cudart() if self.registered else None
        while self.registered:
            cudart.cudaHostUnregister(self.registered.pop().data_ptr())


class PoolTooBig(Exception):
    """The pool does not fit: one line says how much is needed and what shrinks it."""

# -----------------------------------------------------------------------------
# the window and the record


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# the pipeline has settled when the window's two halves run within this share of each other
SETTLE_TOLERANCE = 0.03


def elapsed(a, b) -> float:
    """Seconds between two marks: CUDA events (recorded on the compute stream) or perf_counter times."""
    return a.elapsed_time(b) / 1e3 if hasattr(a, "elapsed_time") else b - a


def halves(marks: list, steps: int) -> tuple[float, float]:
    """Steps/s over each half of the window of the last `steps` steps; marks[-k] ends the k-th last step."""
    h = steps // 2
    w = marks[-steps - 1:]
    return h / elapsed(w[0], w[h]), (steps - h) / elapsed(w[h], w[-1])


def halves_agree(marks: list, steps: int) -> bool:
    """Whether the last `steps` steps ran as fast in their first half as in their second, within
    SETTLE_TOLERANCE: a steady state."""
    first, second = halves(marks, steps)
    return abs(first - second) <= SETTLE_TOLERANCE * max(first, second)


def unsettled(marks: list, steps: int, device: torch.device) -> bool:
    """Whether the window's halves disagree, on any rank: every rank must slide its window, or none."""
    if hasattr(marks[-1], "synchronize"):
        marks[-1].synchronize()  # note: a CPU-GPU sync point, at the window's end only
    differ = not halves_agree(marks, steps)
    if DIST.launched:
        flag = torch.tensor([float(differ)], device=device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        differ = bool(flag.item())
    return differ


def window_figures(cfg, step_ms: list[float], waits_s: list[float], window_s: float) -> dict:
    """The record's figures over the measured window (one entry of step_ms per measured step): throughput,
    the second half's pace (the guard: a pipeline slower than the device shows as a second half slower
    than the whole), the pace under a profiler, the step times, and the loop's waits (a median hides
    bursts: the mean, its share of the window and the p90 show them)."""
    steps, half = len(step_ms), len(step_ms) // 2
    captured = step_ms[steps - min(steps, cfg.profile_steps or steps):]
    profiled = cfg.profile != "none"
    return dict(
        profiled=cfg.profile, window_s=window_s, steps=steps,
        steps_per_s=steps / window_s, images_per_s=steps * cfg.batch_size / window_s,
        steps_per_s_second_half=(steps - half) * 1e3 / sum(step_ms[half:]) if half else steps / window_s,
        profiled_steps=len(captured) if profiled else None,
        # the pace under the profiler, less the first captured step, which also holds the capture's start
        profiled_steps_per_s=(len(captured) - 1) * 1e3 / sum(captured[1:]) if profiled and len(captured) > 1
        else None,
        step_ms_median=statistics.median(step_ms), step_ms_min=min(step_ms), step_ms_max=max(step_ms),
        step_ms_p10=percentile(step_ms, 0.1), step_ms_p90=percentile(step_ms, 0.9),
        data_wait_ms_median=statistics.median(waits_s) * 1e3, data_wait_ms_mean=statistics.mean(waits_s) * 1e3,
        data_wait_ms_p90=percentile(waits_s, 0.9) * 1e3, data_wait_share=sum(waits_s) / window_s)


def window_record(cfg, marks: list, waits_s: list[float], slid: int, settled: bool | None) -> dict:
    """A window's figures for its record, from its marks (its start, then the end of each measured step or
    batch) and the loop's wait in each: window_figures, its halves' rates, how many steps it slid later
    while they disagreed, and whether they agreed (None: not judged)."""
    step_ms = [elapsed(a, b) * 1e3 for a, b in zip(marks, marks[1:])]
    return dict(window_figures(cfg, step_ms, waits_s, elapsed(marks[0], marks[-1])), slid_steps=slid,
                settled=settled, steps_per_s_halves=list(halves(marks, len(step_ms))) if len(step_ms) >= 2 else [])


def stream_mark(device: torch.device, stream=None):
    """Now, on `stream` (default: the device's current one) as a CUDA event, read once the device reaches
    it, so that the CPU never waits; on the CPU, the clock."""
    if device.type != "cuda":
        return time.perf_counter()
    return (stream or torch.cuda.current_stream(device)).record_event(torch.cuda.Event(enable_timing=True))


def window_done(cfg, measured: int, elapsed_s: float) -> bool:
    """The window closes once it has run --window-s seconds and holds --min-steps steps, and at --steps
    steps at the latest."""
    return measured >= cfg.steps or (measured >= cfg.min_steps and elapsed_s >= cfg.window_s)


class Window:
    """The measured window: the clock's start and the end of each measured step, as CUDA events on the
    stream that computes (so the CPU never waits for the device) or, on the CPU, the clock; and the
    loop's wait for each step's data. It is the last `steps` steps: while its halves differ by more
    than SETTLE_TOLERANCE (a queue still filling or emptying), it slides half a window later, up to
    `settle` steps. Given `timed` (the config), the first window may close early, by window_done()."""

    def __init__(self, steps: int, settle: int, device: torch.device, stream, timed=None):
        self.steps, self.slide_left, self.device, self.stream = steps, settle, device, stream
        self.marks, self.waits_s, self.slid, self.settled = [], [], 0, None
        self.timed, self.t0, self.closed = timed, 0.0, False

    def now(self):
        return stream_mark(self.device, self.stream)

    def start(self) -> None:
        device_sync(self.device)  # note: the clock starts with the device idle...
        if DIST.launched:
            dist.barrier()  # ...and on every rank at once
        self.marks.append(self.now())
        self.t0 = time.perf_counter()

    def closes_early(self) -> bool:
        """After a measured step of the first window: it has run its seconds and holds its fewest steps
        before --steps. It is that long from then on, and may slide in proportion (--settle of --steps),
        at most its own length."""
        n = len(self.marks) - 1
        if self.timed is None or self.closed or n >= self.steps \
                or not window_done(self.timed, n, time.perf_counter() - self.t0):
            return False
        self.steps, self.slide_left = n, min(n, self.slide_left * n // self.steps)
        return True

    def lap(self) -> None:
        """A measured step's work is issued: mark its end, on the stream (the device reaches it later)."""
        self.marks.append(self.now())

    def slide(self) -> int:
        """At the window's planned end: how many steps more, half a window while its halves disagree. The
        last window is judged too, once the slides are spent: `settled` describes the figures' window."""
        self.closed = True
        if self.slide_left == 0 and self.slid == 0:
            return 0  # a window that may not slide is not judged
        self.settled = not unsettled(self.marks, self.steps, self.device)
        slide = 0 if self.settled else min(self.slide_left, max(1, self.steps // 2))
        self.slide_left, self.slid = self.slide_left - slide, self.slid + slide
        return slide

    def figures(self, cfg) -> dict:
        """The record's figures, once the device has finished the last step."""
        return window_record(cfg, self.marks[-self.steps - 1:], self.waits_s[-self.steps:], self.slid, self.settled)


def rate_line(r: dict, unit: str, per: str, step: str, wait: str, extra: str = "") -> str:
    """The head of a run's summary line: its rate (`unit`/s), step times and the loop's wait (ms/`per`)."""
    return (f"{r['steps_per_s']:.2f} {unit}/s ({r['images_per_s']:.0f} img/s) | {extra}{step} "
            f"{r['step_ms_median']:.1f} ms median [{r['step_ms_min']:.1f}-{r['step_ms_max']:.1f}] | {wait} "
            f"{r['data_wait_ms_mean']:.1f} ms/{per} mean ({100 * r['data_wait_share']:.0f}% of the window), "
            f"p90 {r['data_wait_ms_p90']:.1f}")


def write_json(path: str, record: dict) -> None:
    """Whole or not at all: a reader never sees half a record, and a failed write leaves no file."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(record, f, indent=2)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


FELL_BEHIND = 0.10      # a window's second half this much slower than the whole: it had not settled
FELL_BEHIND_STEPS = 20  # ... over at least this many steps (fewer are noise)


def fell_behind(r: dict) -> bool:
    """The window's second half ran more than FELL_BEHIND slower than the whole (noise below that), over
    enough steps to tell: the pipeline had not settled."""
    whole, half = ((r["loader_batches_per_s"], r["loader_batches_per_s_second_half"]) if r.get("loader_only")
                   else (r["steps_per_s"], r["steps_per_s_second_half"]))
    return r["steps"] >= FELL_BEHIND_STEPS and half < (1 - FELL_BEHIND) * whole


def finish(record: dict, cfg, line: str, mismatches: list[str], verified: str, path: str | None = None,
           said: bool = False) -> int:
    """The run's one line on stdout, its record written whole (to path, else --json), and --verify's outcome
    as the exit status (said: another record of the process says it)."""
    record["fell_behind"] = fell_behind(record)
    if record["fell_behind"]:
        warn(f"throughput fell during the window: its second half ran more than {FELL_BEHIND:.0%} slower than the "
             "whole (see the record's *_second_half): the pipeline had not settled. Run more --steps until the two "
             "agree")
    print(line, flush=True)
    if path or cfg.json:
        write_json(path or cfg.json, record)
    for mismatch in mismatches:
        log(mismatch)
    if mismatches:
        return 1
    if cfg.verify and not said:
        log(verified)
    return 0


def run_head(cfg, device: torch.device, backend: str) -> dict:
    """What ran, where: the fields every record starts with."""
    return dict(
        settings={k: v for k, v in asdict(cfg).items()
                  if k not in ("json", "inject_fault", "given", "photos", "requested")},
        device=str(device), device_name=torch.cuda.get_device_name(device) if device.type == "cuda"
        else platform.processor() or "cpu", torch=torch.__version__, torchvision=torchvision.__version__,
        cpu_count=usable_cpus(), nvtx_backend=backend, steps=cfg.steps, warmup=cfg.warmup,
        world_size=DIST.world_size, rank=DIST.rank, host=platform.node())


def failure_advice(e: BaseException, cfg) -> str | None:
    """One line for a failure whose cause and fix are known; None for the others (they keep their traceback)."""
    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    per_rank = " per rank" if DIST.launched else ""
    size = f"--batch-size {cfg.batch_size} at --img-size {cfg.img_size}"
    asked = re.search(r"tried to allocate (\d+) bytes", msg)
    asked = f" ({int(asked.group(1)) / 1e9:.1f} GB asked)" if asked else ""
    if isinstance(e, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in msg:
        return f"the GPU ran out of memory{asked}: each batch is {size}; use a smaller --batch-size or --img-size"
    worker = "DataLoader worker" in msg
    if "can't allocate memory" in msg or "Cannot allocate memory" in msg or isinstance(e, MemoryError):
        where = "a DataLoader worker" if worker else "this process"
        fewer = f", or fewer workers (--workers {cfg.workers}{per_rank})" if worker else ""
        return (f"{where} ran out of host memory{asked}: each batch is {size}; use a smaller --batch-size or "
                f"--img-size{fewer}")
    if ("No space left on device" in msg or "Bus error" in msg) and (worker or "/torch_" in msg):
        return (f"shared memory (/dev/shm) ran out ({first[:160]}): with {cfg.workers} workers{per_rank} each "
                f"holding batches there, use fewer workers (--workers N), or give the machine more shared "
                f"memory (e.g. docker run --shm-size=16g)")
    if worker and "killed by signal" in msg:
        return (f"a DataLoader worker died ({first[:160]}): the out-of-memory killer is the usual cause; use fewer "
                f"workers (--workers {cfg.workers}{per_rank}) or a smaller --batch-size or --img-size")
    if worker:
        return f"a DataLoader worker failed: {first[:200]} (its traceback is above)"
    return None


def stop_on_failure(e: BaseException, cfg) -> None:
    """A run that raised: one line and exit 3 when the cause and fix are known, 4 when a rank went
    missing; other errors go on up with their traceback."""
    advice = failure_advice(e, cfg)
    if advice is None:
        if (missing := rank_missing(e, getattr(cfg, "dist_timeout", 0))) is None:
            return
        log(f"error: {missing}")
        os._exit(4)  # note: torchrun then stops the other ranks
    if "its traceback is above" in advice:
        sys.stderr.write(str(e).strip() + "\n")
    log(f"error: {advice}")
    # note: not `return`: a loader's clean-up can wait forever on what is left of its workers, and
    # workers left alone outlive this process for half a minute holding their memory
    kill_children()
    os._exit(3)


class Terminated(KeyboardInterrupt):
    """SIGTERM (timeout, a batch scheduler, docker stop), handled as Ctrl-C is: one line, no record."""


STOPPING = threading.Event()  # set by a signal that stops the run


def terminate(signum, frame) -> None:
    STOPPING.set()
    raise Terminated()


def interrupt(signum, frame) -> None:
    STOPPING.set()
    raise KeyboardInterrupt()


def quiet_when_stopping(args) -> None:
    """A background thread's error once the run is stopping from outside is noise: a queue's feeder, say,
    writing to a worker just killed. The one line says what happened."""
    if not STOPPING.is_set():
        threading.__excepthook__(args)


def quiet_sys_hook(kind, value, tb) -> None:
    """The same for threads that report through sys.excepthook themselves, as multiprocessing's resource
    sharer does when its handshake with a worker just killed fails; the main thread's errors always show."""
    if not (STOPPING.is_set() and threading.current_thread() is not threading.main_thread()):
        sys.__excepthook__(kind, value, tb)


def stopped(e: KeyboardInterrupt, during_run: bool = True) -> int:
    """The one line and exit status of a script stopped from outside: 143 for SIGTERM, 130 for Ctrl-C."""
    log(("terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted")
        + (": no record written" if during_run else ""))
    return 143 if isinstance(e, Terminated) else 130


def guarded(start) -> int:
    """A script's entry, start(): SIGTERM is handled as Ctrl-C is, and either, before the run starts or
    after it ends (run_or_exit() answers those in between), is one line."""
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, interrupt)
    threading.excepthook, sys.excepthook = quiet_when_stopping, quiet_sys_hook
    try:
        return start()
    except KeyboardInterrupt as e:
        return stopped(e, during_run=False)


def kill_children() -> None:
    """Every worker process this one started, killed: their clean-up can wait forever on one another."""
    for child in multiprocessing.active_children():
        child.kill()


def die_with_parent(*_) -> None:
    """In a worker process: the kernel kills it when the process that made it dies, however it dies (a
    SIGKILL included, which runs no clean-up); and the parent alone answers Ctrl-C and SIGTERM, so that
    a Ctrl-C to the process group prints one line, not one traceback per worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def run_or_exit(run, cfg, device: torch.device, stops: tuple = ()) -> dict | int:
    """run(cfg, device)'s record, or the exit status of a run that stopped: 3 with one line for a known
    cause (the pool does not fit, one of `stops`, out of memory), 130 on Ctrl-C; other errors go on up."""
    try:
        return run(cfg, device)
    except (PoolTooBig, *stops) as e:
        log(f"error: {e}")
        return 3
    except BlockingIOError as e:  # fork: EAGAIN, the process limit (ulimit -u) or memory
        log(f"error: could not start a worker process ({e.strerror}): the machine's process limit (ulimit -u) "
            f"or its memory is reached; use fewer --workers ({cfg.workers})")
        kill_children()
        return 3
    except KeyboardInterrupt as e:
        return stopped(e)
    except (RuntimeError, MemoryError) as e:
        stop_on_failure(e, cfg)
        raise
