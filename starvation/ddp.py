"""
The torchrun job of train.py: joining it, a check-in each step that names a rank that died or hangs,
the faults a test injects into a rank, and one record for the whole job. Each rank is one process and
one GPU, with DistributedDataParallel; starvation.runtime.DIST says which rank this is.
"""
import argparse
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from starvation.runtime import DIST, log, usable_cpus, warn


def init_distributed(device: torch.device, workers: int, timeout_s: int) -> None:
    """Join torchrun's job: NCCL between GPUs, gloo between CPU processes."""
    cpus = usable_cpus()
    if DIST.local_world_size * (workers + 1) > cpus:
        warn(f"{DIST.local_world_size} ranks x ({workers} workers + 1) processes on {cpus} CPUs: the ranks' "
             f"loaders compete for cores (--workers is per rank; try --workers "
             f"{max(0, cpus // DIST.local_world_size - 1)})")
    backend = "nccl" if device.type == "cuda" else "gloo"
    # the group's own timeout is a backstop, later than check_in's (which names the rank missing, within twice
    # the timeout): a minute later, or sooner for a short --dist-timeout, which the ranks' meeting waits too
    backstop = timeout_s + min(60, 2 * timeout_s)
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=backstop),
                                device_id=device if backend == "nccl" else None)
    except (RuntimeError, ValueError) as e:  # torch's DistStoreError is a RuntimeError
        if "DistStoreError" not in type(e).__name__ and "timed out" not in str(e).lower():
            raise
        log(f"error: the job's {DIST.world_size} ranks did not all come to {os.environ.get('MASTER_ADDR')}:"
            f"{os.environ.get('MASTER_PORT', '29500')} within {backstop} s (from --dist-timeout {timeout_s}): start "
            "every rank (torchrun --nproc-per-node N starts them all), or unset RANK and WORLD_SIZE for one process")
        sys.exit(2)
    if backend == "nccl":
        DIST.gloo = dist.new_group(backend="gloo")  # check_in's monitored_barrier runs on gloo only
    DIST.store = dist.distributed_c10d._get_default_store()


def checked_in(store, rank: int) -> int:
    key = f"checked_in/{rank}"
    return int(store.get(key)) if store.check([key]) else 0  # note: get() would wait for a key never set


def check_in(timeout_s: int) -> None:
    """Every rank checks in once a step, between its batch and its compute. In DDP a rank that dies or
    hangs leaves the others waiting in the step's all-reduce, and neither gloo's timeout nor NCCL's says
    which rank is missing (gloo: "Timed out waiting ... for recv operation"); torch's monitored_barrier
    does: rank 0 raises "Rank 1 failed to pass monitoredBarrier", which main() turns into one line."""
    # Each rank also counts its check-ins in the job's store. Hand-written because a test shows the
    # built-in cannot always name the rank: when a rank's sockets are already closed as rank 0 posts
    # its receive, gloo raises its own "Connection closed by peer", which names an address, not a rank.
    DIST.checked_in += 1
    DIST.store.set(f"checked_in/{DIST.rank}", str(DIST.checked_in))
    try:
        dist.monitored_barrier(group=DIST.gloo, timeout=timedelta(seconds=timeout_s))
    except RuntimeError as e:
        if DIST.rank != 0 or "monitoredBarrier" in str(e):
            raise
        # a rank behind after the timeout has died or hangs (a live rank checks in within a step)
        deadline = time.monotonic() + timeout_s
        while (behind := [r for r in range(1, DIST.world_size) if checked_in(DIST.store, r) < DIST.checked_in]) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        if not behind:
            raise
        raise RuntimeError(f"Ranks {', '.join(map(str, behind))} failed to pass monitoredBarrier (its connection "
                           "closed)") from e


def check_ranks(p: argparse.ArgumentParser, cfg) -> None:
    """The checks a torchrun job needs before anything runs: one process per GPU, and two ranks or more
    for a rank's injected fault."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if DIST.launched and cfg.device != "cpu" and gpus and DIST.local_world_size > gpus:
        p.error(f"torchrun started {DIST.local_world_size} processes on this host, but torch sees {gpus} GPU(s): "
                f"one process per GPU, so --nproc-per-node {gpus} or fewer")
    if cfg.inject_fault in ("rank-exit", "rank-hang") and DIST.world_size < 2:
        p.error("--inject-fault rank-*: needs torchrun with 2 or more processes")


def rank_fault(fault: str, where) -> None:
    """--inject-fault rank-exit: the last rank exits 5; rank-hang: it hangs inside the range `where`."""
    if DIST.rank != DIST.world_size - 1:
        if fault == "rank-exit":
            time.sleep(2)  # check in after the dead rank's sockets closed: the race a loaded machine meets
        return
    log(f"injected fault: {fault}")
    if fault == "rank-exit":
        os._exit(5)
    with where:
        time.sleep(3600)


RANK_KEYS = ("rank", "host", "device", "steps_per_s", "images_per_s", "step_ms_median", "data_wait_ms_median",
             "data_wait_ms_mean", "data_wait_share", "peak_mem_bytes", "verified_batches")


def combine(records: list[dict]) -> dict:
    """One record for a torchrun job. A global step is one batch on every rank, and DDP's all-reduce
    keeps the ranks in step, so the job goes at its slowest rank's pace: throughput over the longest
    window, images counted on every rank; per-step figures are the slowest rank's."""
    slowest = min(records, key=lambda r: (r["steps_per_s"], -r["data_wait_ms_median"]))
    window = max(r["window_s"] for r in records)
    r = dict(slowest)
    r.update(window_s=window, steps_per_s=r["steps"] / window,
             images_per_s=r["steps"] * r["settings"]["batch_size"] * len(records) / window,
             slowest_rank=slowest["rank"], ranks=[{k: x[k] for k in RANK_KEYS} for x in records])
    r["images_per_s_per_gpu"] = r["images_per_s"] / len(records)
    if r["verified_batches"] is not None:
        r["verified_batches"] = sum(x["verified_batches"] for x in records)
        r["verify_mismatches"] = [m for x in records for m in x["verify_mismatches"]]
    for k in ("rank", "host", "device"):
        del r[k]
    return r


def rank_lines(r: dict) -> str:
    """A torchrun job's summary: which rank was slowest, and a line per rank."""
    return f" (slowest rank: {r['slowest_rank']})" + "".join(
        f"\n  rank {x['rank']} ({x['device']} on {x['host']}): {x['steps_per_s']:.2f} steps/s, "
        f"waiting for data {x['data_wait_ms_median']:.1f} ms/step" for x in r["ranks"])
