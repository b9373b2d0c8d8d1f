"""
The process a run is: where it sits in a torchrun job (DIST), its device and streams, its log lines,
and how it stops: SIGTERM and Ctrl-C, a failure whose cause is known (one line,
exit 3), a rank gone missing (exit 4). Every other module of the package, and every script, starts here,
so that the driver's work queues are set before CUDA starts.
"""
import contextlib
import ctypes
import multiprocessing
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass

# note: read when CUDA starts, so set before torch. The driver feeds the GPU through 8 hardware work queues by
# default, and streams beyond 8 share them. --gpu-decode's nvjpeg converts colours on 14 streams of its own: one
# that shares the step's queue waits behind all the step's queued work (up to 52 ms on the H200). 32, the most,
# keeps them apart (docs/photos.md). A value already in the environment is kept; the record says which ran.
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

try:
    import torch
    import torchvision  # noqa: F401  (here, so that a missing one is the same one line)
except ModuleNotFoundError as e:  # started outside the environment that the README's commands make
    sys.exit(f"{os.path.basename(sys.argv[0])}: no module named {e.name!r} here: run ./run_all.sh or tests/run.sh "
             "once (they make .venv), then `source .venv/bin/activate`, or use .venv/bin/python")


class KnownFailure(Exception):
    """A run stopped by a cause its message names, with the fix: one line, exit 3 (run_or_exit)."""

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



def usable_cpus() -> int:
    """The CPUs this process may run on: under `taskset -c 0-7` that is 8, whatever the machine has."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def share_cpus(processes: int) -> int:
    """Sets this process's intra-op threads to its share of the CPUs it may use, which `processes`
    processes share (it, its workers, the other ranks on the host), and returns the count. Left alone,
    torch takes every core in each process, and on a small machine the step and the workers fight for
    them: beside one busy process a 2-core CPU step took 3.9 s instead of 118 ms. (DataLoader workers
    set 1 thread of their own.)"""
    threads = max(1, usable_cpus() // processes)
    torch.set_num_threads(threads)
    return threads


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
    flat = images.flatten(1)  # (a batch of none: the workers decoded every image)
    raw = flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)
    if raw.shape[1] % 8 == 0 and raw.storage_offset() % 8 == 0:
        return raw.view(torch.int64).sum(dim=1)
    return raw.sum(dim=1, dtype=torch.int64)


def size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def signalled(e: BaseException) -> bool:
    """Whether a run's failure is the signal that stops it: a DataLoader worker killed by SIGTERM or SIGINT,
    as `timeout`, systemd and Slurm send them to the whole process group, before this process's handler
    has run. (A worker the out-of-memory killer ends dies by SIGKILL.)"""
    msg = str(e)
    return STOPPING.is_set() or ("DataLoader worker" in msg and re.search(r"killed by signal: (Terminated|Interrupt)",
                                                                          msg) is not None)


def failure_advice(e: BaseException, cfg) -> str | None:
    """One line for a failure whose cause and fix are known; None for the others (they keep their traceback)."""
    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    per_rank = " per rank" if DIST.launched else ""
    size = f"--batch-size {cfg.batch_size} at --img-size {cfg.img_size}" + (
        f" with --classes {cfg.classes}" if hasattr(cfg, "classes") else "")
    smaller = "a smaller --batch-size or --img-size" + (" or fewer --classes" if hasattr(cfg, "classes") else "")
    asked = re.search(r"tried to allocate (\d+) bytes", msg)
    asked = f" ({int(asked.group(1)) / 1e9:.1f} GB asked)" if asked else ""
    if isinstance(e, torch.cuda.OutOfMemoryError) or "CUDA out of memory" in msg:
        return f"the GPU ran out of memory{asked}: each batch is {size}; use {smaller}"
    worker = "DataLoader worker" in msg
    if "can't allocate memory" in msg or "Cannot allocate memory" in msg or isinstance(e, MemoryError):
        where = "a DataLoader worker" if worker else "this process"
        fewer = f", or fewer workers (--workers {cfg.workers}{per_rank})" if worker else ""
        return f"{where} ran out of host memory{asked}: each batch is {size}; use {smaller}{fewer}"
    if ("No space left on device" in msg or "Bus error" in msg) and (worker or "/torch_" in msg):
        return (f"shared memory (/dev/shm) ran out ({first[:160]}): with {cfg.workers} workers{per_rank} each "
                f"holding batches there, use fewer workers (--workers N), or give the machine more shared "
                f"memory (e.g. docker run --shm-size=16g)")
    # a worker killed outright: torch's SIGCHLD handler says "killed by signal", or, when its liveness check
    # finds the worker gone first, "exited unexpectedly" (a worker's Python error comes as "Caught ...")
    if worker and ("killed by signal" in msg or "exited unexpectedly" in msg):
        return (f"a DataLoader worker died ({first[:160]}): the out-of-memory killer is the usual cause; use fewer "
                f"workers (--workers {cfg.workers}{per_rank}) or {smaller}")
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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, as a worker's death by SIGINT tells it."""


STOPPING = threading.Event()  # set by a signal that stops the run


def terminate(signum, frame) -> None:
    if not STOPPING.is_set():  # a second signal (to the process, then its group) changes nothing: it is stopping
        STOPPING.set()
        raise Terminated()


def interrupt(signum, frame) -> None:
    if not STOPPING.is_set():
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


def quiet_hangup(kind, value, tb) -> None:
    """A worker's sys.excepthook. Its resource sharer, the thread that hands a batch's shared memory to the
    parent, fails when the parent hangs up mid-handshake, as a parent stopped while taking a batch does: the
    parent's one line says why, and the sharer's traceback, half printed as the worker dies with it, is noise.
    Other errors show."""
    hangup = issubclass(kind, (EOFError, ConnectionError))
    if not (hangup and threading.current_thread() is not threading.main_thread()):
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
    a Ctrl-C to the process group prints one line, not one traceback per worker (nor one of a handshake the
    stopped parent broke off: quiet_hangup)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.excepthook = quiet_hangup
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def run_or_exit(run, cfg, device: torch.device, stops: tuple = ()) -> dict | int:
    """run(cfg, device)'s record, or the exit status of a run that stopped: 3 with one line for a known
    cause (the pool does not fit, one of `stops`, out of memory), 130 on Ctrl-C; other errors go on up."""
    try:
        return run(cfg, device)
    except (KnownFailure, *stops) as e:
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
        if signalled(e):  # the workers died of the signal sent to the group: the run was stopped, not broken
            kill_children()
            return stopped(Interrupted() if "Interrupt" in str(e) else Terminated())
        stop_on_failure(e, cfg)
        raise
