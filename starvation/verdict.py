"""
The verdicts: what a trace says on its own (the study's order: loading, the pageable copy, the overlap,
the GPU, then the launches), then one verdict per variant that weighs the measured rates first and the
trace second, and the change to make next. One engine for analyze.py's lines, diagnosis.json and every
section of compare.py's results.md, so that they never disagree. Every threshold is here, once, but those
the runs read too, the window's steadiness and the decoding threads' busy share (starvation/thresholds.py).
"""
from dataclasses import dataclass, field

from starvation.thresholds import THREAD_BUSY, copy_size, smaller_copy, workers_take_copy


# the trace's thresholds

GPU_BOUND_BUSY = 0.95     # GPU (kernels or copies) busy at least this share of the step: GPU-bound
STARVED_IDLE = 0.10       # GPU idle at least this share of the step: the input pipeline is starving it
LOADING_SHARE = 0.50      # "get batch" at least this share of the step: loading-bound
BLOCKED_SHARE = 0.10      # CPU blocked in copy calls or munmap inside "copy batch": synchronous copy
PAGEABLE_BYTES = 0.50     # H2D bytes from pageable memory at least this share of the step's: the batch is pageable
COPY_SHARE = 0.02         # H2D time at least this share of the step counts as worth hiding
OVERLAP_MIN = 0.50        # less than this share of the H2D time under kernels: copy not overlapped
PIN_BUSY = 0.90           # the DataLoader's pin-memory thread on a CPU this share of the time: it caps the loader
LAUNCH_SHARE = 0.50       # the GPU's idle at least this share in gaps under 1 ms between its works: launch-bound
BESIDE_SHARE = 0.05       # other streams' kernels running at least this share of the step: GPU work beside the step


# the stage each of the trace's verdicts names, for next_step()
TRACE_CAUSES = {"loading-bound": "making", "loading-bound: pinning caps it": "pinning",
                "waiting for another rank": "peer",
                "synchronous pageable copy": "pageable copy", "a sync every step": "sync",
                "copy not overlapped": "overlap", "GPU work beside the step": "beside", "GPU-bound": "compute",
                "launch-bound": "launch",
                "output processing on the main thread": "main thread",
                "synchronous output copy": "sync copy", "waiting for a free output buffer": "processing"}


def verdict(m: dict, ours: bool = True) -> dict:
    """What the trace alone says, in the study's order: each rule quotes the numbers that triggered
    it, and `cause` names the stage for next_step(). decide() weighs it against the measured rates. A job
    of the user's own (not ours) has no 'copy batch' range: a sync call that holds its loop is a rule of its
    own there."""
    v = inference_verdict(m) if m["gpu_busy_pct"] is not None and m.get("copy_output_ms") else training_verdict(m)
    if not ours and m["gpu_busy_pct"] is not None and \
            v["verdict"] in ("unclassified", "copy not overlapped", "GPU-bound", "launch-bound"):
        sync = m.get("sync_ms") or 0
        if m["gpu_idle_pct"] / 100 >= STARVED_IDLE and sync / m["step_ms"] >= BLOCKED_SHARE:
            v = dict(verdict="a sync every step",
                     why=f"the loop's thread waits {sync:.0f} of {m['step_ms']:.0f} ms a step in CUDA sync and copy "
                         f"calls while the GPU idles {m['gpu_idle_pct']:.0f}%")
    return dict(v, cause=TRACE_CAUSES.get(v["verdict"]))


# a job of the user's own (steps found without the study's names): the change, in its code's words
USER_CHANGES = {
    "making": "more DataLoader workers (num_workers=N, persistent_workers=True); if every core has one already, "
              "cheaper samples: decode on the GPU, or a copy of the data at the training size",
    "pageable copy": "pinned memory and non-blocking copies: DataLoader(pin_memory=True) and "
                     ".to(device, non_blocking=True)",
    "overlap": "copy the next batch on a side stream while this one computes (a prefetcher: torch.cuda.Stream, "
               "wait_stream, record_stream)",
    "sync": "no sync in the loop: keep .item(), .cpu() and prints of a tensor out of each step, or read the "
            "value every N steps",
    "compute": "GPU-bound: look at the model (bf16 autocast, channels_last, torch.compile)",
    "launch": "fewer, larger kernels: torch.compile (mode='reduce-overhead' also replays the step as a CUDA "
              "graph), a larger batch, or a fused optimizer (fused=True)",
    "pinning": "pin in the workers instead of on the DataLoader's one pin-memory thread, which copies every batch "
               "once more (pin_memory=False, each worker writing its batch into page-locked shared memory, as "
               "train.py --pool does), or fewer bytes to pin: uint8 batches, normalized on the GPU",
    "beside": "less GPU work beside the step: kernels on other streams (a decoder's, an augmentation's) take its "
              "SMs; do that work in the DataLoader's workers where cores are spare, or on smaller inputs",
    "peer": "the slowest rank's own verdict names what holds it (analyze each rank's trace); if every rank waits "
            "alike, the all-reduce itself: larger buckets (DDP's bucket_cap_mb), or a faster link",
}


def user_change(cause: str | None, workers: int | None = None, pinned: bool = False, side_stream: bool = False,
                compiled: bool = False) -> str:
    """The change for a cause, in a job's own words; `workers`: the DataLoader's worker processes the trace shows,
    `pinned`: its batches reach the device from pinned memory (pin_memory=True), `side_stream`: its copies run on a
    stream of their own already, `compiled`: torch.compile made its kernels."""
    if cause == "launch" and compiled:
        return ("its step is compiled already: mode='reduce-overhead' replays it as a CUDA graph; else a larger "
                "batch, or a fused optimizer (fused=True)")
    if cause == "overlap" and side_stream:
        return ("its copies run on a side stream already, yet each ends before the kernels that could hide it: "
                "issue the next batch's copy before this step's work (a prefetcher one batch ahead: wait_stream, "
                "record_stream)")
    if cause == "making" and workers == 0:
        return ("DataLoader worker processes (num_workers=N, persistent_workers=True): the training process makes "
                "every batch itself")
    change = USER_CHANGES.get(cause, "open its timeline: the trace names no stage of the input pipeline")
    if cause == "making" and workers:
        change = f"more DataLoader workers than its {workers} (num_workers=N); " + change.split("; ", 1)[1]
    if cause == "making" and pinned:  # (the study's async, streams and prefetch steps: the thread was their cap)
        change += ("; with pin_memory=True, the DataLoader's one pin-memory thread, which copies every batch once "
                   "more, may be the cap instead: time the loader alone with and without it")
    return change


def training_verdict(m: dict) -> dict:
    if m["gpu_busy_pct"] is None:
        return dict(verdict="no GPU activity",
                    why="the trace holds no CUDA kernels or copies")
    step, idle, busy = m["step_ms"], m["gpu_idle_pct"] / 100, m["gpu_busy_pct"] / 100
    get_share = m["get_batch_ms"] / step
    blocked = m["blocked_in_copy_ms"] + (m["munmap_in_copy_ms"] or 0)
    pageable = m["pageable_copies"]
    if idle >= STARVED_IDLE and get_share >= LOADING_SHARE:
        why = (f"'get batch' takes {m['get_batch_ms']:.0f} of {step:.0f} ms per step ({get_share:.0%}) while the GPU "
               f"idles {idle:.0%}")
        pin = m.get("pin_thread_busy_pct")
        if pin is not None and pin / 100 >= PIN_BUSY:  # (the study's async, streams and prefetch steps)
            return dict(verdict="loading-bound: pinning caps it",
                        why=f"{why}; the DataLoader's pin-memory thread ran on a CPU {pin:.0f}% of the time")
        return dict(verdict="loading-bound", why=why)
    # under DDP: a rank fed in time still waits in every all-reduce for the slowest one, its compute idle
    nccl = m.get("nccl_alone_ms") or 0
    if idle >= STARVED_IDLE and nccl / step >= STARVED_IDLE:
        return dict(verdict="waiting for another rank",
                    why=f"NCCL's kernels run {nccl:.0f} of {step:.0f} ms per step ({nccl / step:.0%}) with no compute "
                        f"kernel beside them, while the GPU idles {idle:.0%}")
    # (the kernels' idle, not the GPU's: a pageable copy keeps the copy engine busy while the kernels wait on it)
    kernels_idle = max(idle, 1 - m["kernel_busy_pct"] / 100)
    # the batch from pageable memory, not a table of a few hundred bytes beside a pinned batch: most of the
    # step's bytes (where the trace gives them, else any such copy)
    paged = (m["pageable_bytes"] / m["h2d_bytes"] if m.get("h2d_bytes") and m.get("pageable_bytes") is not None
             else float(pageable > 0))
    if kernels_idle >= STARVED_IDLE and (paged >= PAGEABLE_BYTES or blocked / step >= BLOCKED_SHARE):
        munmap = (f" and {m['munmap_in_copy_ms']:.0f} ms in munmap before 'Compute'" if m["munmap_in_copy_ms"]
                  else "")
        return dict(verdict="synchronous pageable copy",
                    why=f"{pageable:.0f} of {pageable + m['pinned_copies']:.0f} H2D copies per step from pageable "
                        f"memory; the CPU waits {m['blocked_in_copy_ms'] or m['sync_ms']:.0f} ms in CUDA copy and "
                        f"sync calls{munmap}; the kernels idle {kernels_idle:.0%}")
    h2d_share = (m["h2d_ms"] or 0) / step
    if h2d_share >= COPY_SHARE and (m["h2d_overlap_pct"] or 0) / 100 < OVERLAP_MIN:
        return dict(verdict="copy not overlapped",
                    why=f"H2D takes {m['h2d_ms']:.1f} ms per step ({h2d_share:.0%}), {m['h2d_overlap_pct'] or 0:.0f}% "
                        f"of it under kernels; kernels idle {100 - m['kernel_busy_pct']:.0f}% of the step")
    # (before GPU-bound: a step that shares the SMs keeps the GPU busy, yet its own kernels are not the limit;
    # where the GPU idles, the idle is)
    beside = m.get("side_kernel_ms") or 0
    if idle < STARVED_IDLE and beside / step >= BESIDE_SHARE:
        return dict(verdict="GPU work beside the step",
                    why=f"kernels of other streams than the step's run during {beside:.1f} of {step:.0f} ms per step "
                        f"({beside / step:.0%}), on the SMs the step needs; the GPU idles {idle:.0%}")
    if busy >= GPU_BOUND_BUSY:
        return dict(verdict="GPU-bound",
                    why=f"the GPU is busy {busy:.0%} of the step, kernels {m['kernel_busy_pct']:.0f}%")
    # many short gaps, none of them a wait for data: the GPU runs each kernel as soon as the CPU launches it
    gaps = m.get("launch_gaps_ms") or 0
    if idle >= STARVED_IDLE and gaps >= LAUNCH_SHARE * idle * step:
        return dict(verdict="launch-bound",
                    why=f"the GPU idles {idle:.0%} of the step ({idle * step:.1f} ms), {gaps:.1f} ms of it in "
                        f"{m['launch_gaps']:.0f} gaps of under 1 ms between kernels: the CPU launches them no faster "
                        "than the GPU runs them")
    return dict(verdict="unclassified",
                why=f"GPU idle {idle:.0%}, 'get batch' {get_share:.0%} of the step, CPU blocked {blocked:.0f} ms in "
                    "copies")


def inference_verdict(m: dict) -> dict:
    """Part 2's path (infer.py): the outputs' way back to the host, step by step."""
    step, idle, busy = m["step_ms"], m["gpu_idle_pct"] / 100, m["gpu_busy_pct"] / 100
    processing, copying = m["process_output_ms"] / step, m["copy_output_ms"] / step
    if idle >= STARVED_IDLE and processing >= LOADING_SHARE:
        return dict(verdict="output processing on the main thread",
                    why=f"'process output' takes {m['process_output_ms']:.0f} of {step:.0f} ms per batch on the "
                        f"loop's thread ({processing:.0%}) while the GPU idles {idle:.0%}")
    if idle >= STARVED_IDLE and copying >= BLOCKED_SHARE and m["d2h_pageable_copies"]:
        return dict(verdict="synchronous output copy",
                    why=f"'copy output' holds the loop {m['copy_output_ms']:.0f} of {step:.0f} ms per batch "
                        f"({copying:.0%}), copying to pageable memory ({m['d2h_pageable_copies']:.0f} such copy per "
                        f"batch), while the GPU idles {idle:.0%}")
    if idle >= STARVED_IDLE and copying >= BLOCKED_SHARE:
        return dict(verdict="waiting for a free output buffer",
                    why=f"'copy output' holds the loop {m['copy_output_ms']:.0f} of {step:.0f} ms per batch "
                        f"({copying:.0%}) though its copies are pinned: no buffer is free until a worker hands one "
                        f"back; the GPU idles {idle:.0%}")
    d2h_share = (m["d2h_ms"] or 0) / step
    if d2h_share >= COPY_SHARE and (m["d2h_overlap_pct"] or 0) / 100 < OVERLAP_MIN:
        return dict(verdict="copy not overlapped",
                    why=f"D2H takes {m['d2h_ms']:.1f} ms per batch ({d2h_share:.0%}), {m['d2h_overlap_pct'] or 0:.0f}% "
                        "of it under kernels")
    if busy >= GPU_BOUND_BUSY:
        return dict(verdict="GPU-bound",
                    why=f"the GPU is busy {busy:.0%} of the batch, kernels {m['kernel_busy_pct']:.0f}%")
    return dict(verdict="unclassified",
                why=f"GPU idle {idle:.0%}, 'copy output' {copying:.0%} and 'process output' {processing:.0%} of the "
                    "batch on the loop's thread")

# -----------------------------------------------------------------------------
# the verdict: the measured rates first, then the trace. One engine for analyze.py's own lines,
# diagnosis.json, and every section of compare.py's results.md, so that they never disagree.

ALONE_SHORT = 0.97  # an alone rate under this share of the ceiling cannot feed the GPU
WAIT_SHARE = 0.05   # the loop waits for data (part 2: is on the output path) at least this share of the window
PINNING_CAP = 1.2   # the workers alone make this many times the loader's batches: pinning and copying cap it
AT_CEILING = 0.97   # a variant at this share of its ceiling or more trains at it
DECODE_THREADS = 3  # the decoding threads proposed where one caps nvjpeg's planes (2 made less: docs/photos.md)
# part 2: a variant at this share of its workers' alone rate or more (and at most its inverse) goes at their
# pace. The band is as wide as that ratio wanders from process to process where the workers are the cap
# (docs/part2.md), so that one variant gets one verdict from run to run
NEAR_ALONE = 0.75
# run_all.sh: two runs of a variant within this share of the faster agree, and a third would only repeat
# their spread. Loader-bound variants differ by several percent from one process to the next
# (docs/measuring.md), so the bound is wider than thresholds.SETTLE_TOLERANCE
AGREE_TOLERANCE = 0.10


@dataclass
class Rates:
    """What a variant's unprofiled runs measured (compare.py reads them from a run folder)."""
    study: str                          # train (part 1) or infer (part 2)
    rate: float                         # median steps/s (part 2: batches/s)
    ceiling: float | None = None        # its ceiling's median: the same compute, the data already on the device
    alone: float | None = None          # the loader alone (part 2: output processing alone), batches/s
    workers_alone: float | None = None  # part 1: the workers alone, no pinning and no copy
    wait_share: float | None = None     # the loop's wait for data (part 2: time on the output path) / window
    settings: dict = field(default_factory=dict)  # the steps the variant has taken
    cpus: int | None = None
    is_ceiling: bool = False
    batch: int | None = None            # images a batch: what a decoding verdict counts in
    photos: dict | None = None          # --jpeg: the record's survey of the folder, and --gpu-decode's routing
    decode_thread: dict | None = None   # --gpu-decode: the decoding threads' own time in the window (the record's)


def folder_words(photos: dict) -> str:
    """What a photo folder holds, as a decoder's cost goes: its median size, bits a pixel, progressive share."""
    words = [f"median {photos['median_pixels']}" if photos.get("median_pixels") else "",
             f"{photos['bits_per_pixel']:g} bits a pixel" if photos.get("bits_per_pixel") else "",
             f"{photos['progressive_share']:.0%} progressive" if photos.get("progressive_share") is not None else ""]
    return ", ".join(w for w in words if w)


def loader_bound(r: Rates) -> tuple[str, str, str | None] | None:
    """Part 1: (verdict, why, cause) when the rates say the loader cannot keep up, whatever the trace shows."""
    why = []
    # a loader alone slower than the training it fed is no bound: it was measured low, so it proves nothing
    short = (r.alone is not None and r.ceiling and r.alone < ALONE_SHORT * r.ceiling
             and r.alone * (2 - ALONE_SHORT) >= r.rate)
    if short:
        why.append(f"the loader alone delivers {r.alone:.1f} batches/s and the GPU trains {r.ceiling:.1f} (ceiling)")
    if r.wait_share is not None and r.wait_share >= WAIT_SHARE:
        why.append(f"the loop waits for data {r.wait_share:.0%} of the window")
    if not why:
        return None
    w = r.workers_alone
    images = (lambda batches: f"{batches * r.batch:.0f} images/s") if r.batch else (
        lambda batches: f"{batches:.1f} batches/s")
    # photos: the decoder is a stage of its own. On the GPU (the workers only read bytes, and the loader alone
    # includes the decode) it is what stands between the workers' rate and the loader's; on the CPU it is
    # the workers' own work. The decoding threads' own time says it directly: busy the whole window, their
    # host work (the decoder's calls block them) caps the path, whatever the GPU and the workers could do
    t = r.decode_thread
    if r.settings.get("gpu_decode") and t and t.get("busy_share", 0) >= THREAD_BUSY:
        threads = t.get("threads", 1)
        why.append(f"the decoding thread{'s were each' if threads > 1 else ' was'} busy {t['busy_share']:.0%} of the "
                   f"window, {t['busy_ms_median']:.1f} ms a batch (CPU {t['cpu_ms_median']:.1f} ms), so the "
                   "decode's host work is the cap")
        return ("decoding caps it: " + (f"the host work of its {threads} decoding threads" if threads > 1
                                        else "the decoding thread's host work"), "; ".join(why), "decode thread")
    if r.settings.get("gpu_decode") and short and w and w >= PINNING_CAP * r.alone:
        why.append(f"the workers alone read {w:.1f} batches/s of bytes, so the decode on the device is the cap")
        return (f"decoding caps it: {images(r.alone)}, the step takes {images(r.ceiling)}", "; ".join(why),
                "decoding")
    # (the workers alone at the run's own pace, within NEAR_ALONE, name them: a loader alone that came out a
    # little under a window still settling must not hide a decoder at a 25th of the step's pace)
    if r.settings.get("jpeg") and not r.settings.get("gpu_decode") and w and r.ceiling and \
            w < ALONE_SHORT * r.ceiling and w >= NEAR_ALONE * r.rate:
        why.append(f"the workers alone decode {w:.1f} batches/s, so decoding the photos is the cap"
                   + (f" ({folder_words(r.photos)})" if r.photos else ""))
        return (f"decoding caps it: {images(w)}, the step takes {images(r.ceiling)}", "; ".join(why), "decoding")
    if r.alone and w and w >= PINNING_CAP * r.alone:
        why.append(f"the workers alone make {w:.1f} batches/s, so what caps it is pinning and copying"
                   + (" (the DataLoader's pin-memory thread, which copies every batch once more on one thread)"
                      if r.settings.get("pin_memory") else ""))
        return "loader-bound: pinning caps it", "; ".join(why), "pinning"
    if short and w and w < ALONE_SHORT * r.ceiling:
        why.append(f"the workers alone make {w:.1f} batches/s, so making the batches is the cap")
        if r.settings.get("gpu_decode") and r.photos and r.photos.get("to_workers") is not None:
            # (what a worker does for a batch of photos the device decodes: the routing says)
            p = r.photos
            kinds = ", ".join(f"{n} {kind}" for kind, n in sorted((p.get("to_workers_why") or {}).items(),
                                                                  key=lambda kv: -kv[1]))
            why.append(f"they read every file's bytes ({p.get('mean_file_kb', 0):.0f} kB on average) and decode "
                       f"{p['to_workers']} of the {p.get('files')} files themselves" + (f" ({kinds})" if kinds else ""))
        return "loader-bound: making the batches caps it", "; ".join(why), "making"
    if short and (r.settings.get("pin_memory") or r.settings.get("pool")):
        # the loader alone includes its copies: only the workers alone set a stage apart. A loader that pins
        # nothing has no workers-alone figure to miss: its copy, if it is the cap, is the trace's to name
        why.append("which of its stages caps it, the rates do not say (" + (
            f"the workers alone make {w:.1f} batches/s, neither short of the ceiling nor well above the pipeline"
            if w else "no workers-alone figure") + ")")
    return "loader-bound", "; ".join(why), None


def output_bound(r: Rates) -> tuple[str, str, str | None] | None:
    """Part 2: (verdict, why, cause) when the rates say the output path cannot keep up with the GPU."""
    short = r.ceiling is not None and r.rate < AT_CEILING * r.ceiling
    if not ((r.wait_share or 0) >= WAIT_SHARE or short):
        return None
    why = [f"the loop is on the output path {r.wait_share:.0%} of the window"] if r.wait_share is not None else []
    if r.ceiling:
        why.append(f"it makes {r.rate:.2f} batches/s, {r.rate / r.ceiling:.0%} of the {r.ceiling:.2f} the GPU makes "
                   "(ceiling)")
    workers = r.settings.get("workers", 0)
    if not workers:
        why.append("the loop's own thread processes every batch" + (
            f", at {r.alone:.2f} batches/s when it does nothing else (output processing alone)" if r.alone else ""))
        return "output processing on the main thread", "; ".join(why), "main thread"
    # as in part 1, an alone rate well below what the variant made with the model was measured low: it proves
    # nothing
    measured_low = r.alone is not None and r.alone < NEAR_ALONE * r.rate
    if r.alone and not measured_low and NEAR_ALONE * r.alone <= r.rate and (
            r.ceiling is None or r.alone < ALONE_SHORT * r.ceiling):
        gpu = f", the GPU makes {r.ceiling:.2f}" if r.ceiling else ""
        return (f"output processing caps it: {workers} workers process {r.alone:.2f} batches/s{gpu}", "; ".join(why),
                "processing")
    if measured_low:
        why.append(f"its {workers} workers alone processed {r.alone:.2f} batches/s, less than with the model in "
                   "front: measured low, that proves nothing")
    elif r.alone:
        why.append(f"its {workers} workers alone process {r.alone:.2f} batches/s"
                   + (", so they are not what holds it" if r.alone >= 1.5 * r.rate else ""))
    return "output-path-bound", "; ".join(why), None


def decide(rates: Rates | None, trace: dict | None, study: str = "train", compiled: bool = False) -> dict | None:
    """A variant's one verdict: the rates first (the loop's wait, the alone rate against the ceiling),
    then the trace, which names the stage where the rates do not. Where the two disagree, `why` says
    so with both figures. None when neither says anything. `compiled`: the trace shows torch.compile's
    kernels, which stands for the settings where no rates (no record) come with it."""
    t = trace if trace and trace.get("verdict") not in (None, "no GPU activity") else None
    study = rates.study if rates else study
    if rates and rates.is_ceiling:
        what = "outputs left" if study == "infer" else "batch already"
        verdict, why, cause = "the ceiling", f"the same {'forward' if study == 'infer' else 'step'} with its " \
            f"{what} on the device: {rates.rate:.2f} {'batches' if study == 'infer' else 'steps'}/s", "compute"
    elif rates and (bound := (output_bound if study == "infer" else loader_bound)(rates)):
        verdict, why, cause = bound
        if t and t["cause"] == "compute":
            why += (f"; the profiled steps were fed from what was queued and look GPU-bound ({t['why']}): the "
                    "rates over the whole window say otherwise")
        elif t and cause is None:  # the rates say bound, the trace names the stage
            verdict, why, cause = f"{verdict}; trace: {t['verdict']}", f"{why}; the trace: {t['why']}", t["cause"]
        elif t:
            why += f"; the trace: {t['verdict']} ({t['why']})"
    elif t:
        verdict, why, cause = t["verdict"], t["why"], t["cause"]
        if rates and rates.ceiling and rates.rate >= AT_CEILING * rates.ceiling:
            verdict, why = "at its ceiling", f"{rates.rate / rates.ceiling:.0%} of its ceiling; the trace: " \
                f"{t['verdict']} ({t['why']})"
    elif rates and rates.ceiling and rates.rate >= AT_CEILING * rates.ceiling:
        verdict, why, cause = "at its ceiling", f"{rates.rate / rates.ceiling:.0%} of its ceiling, and the loop " \
            "hardly waits (no trace)", "compute"
    elif rates and rates.ceiling and rates.alone is not None:  # (part 2 unbound is at its ceiling, above)
        verdict, why, cause = "not bound by its rates", "the loop hardly waits and its alone rate keeps up " \
            f"({rates.rate / rates.ceiling:.0%} of its ceiling; no trace names the rest)", None
    else:
        return None
    return dict(verdict=verdict, why=why, change=next_step(cause, study, rates.settings if rates else
                                                             {"compile": compiled}, rates.cpus if rates else None,
                                                             rates.photos if rates else None),
                cause=cause)


def next_step(cause: str | None, study: str, s: dict, cpus: int | None, photos: dict | None = None) -> str:
    """The change to make next for a cause: a step of the variant's own study that it has not taken, or
    a knob whose effect the rates measured; never what the variant already does, never a flag its
    script lacks. `photos`: the record's survey and routing, for a folder's own kinds of file."""
    workers = s.get("workers") or 0
    more = min(cpus - 1, 2 * workers) if cpus and workers and workers < cpus - 1 else None
    if study == "infer":
        if cause == "compute":
            return "none from part 2's steps: the output path keeps up, so the forward itself is the limit"
        if cause is None:
            return "open its timeline: neither the rates nor the trace name the stage"
        if not workers:  # the loop's thread processes every batch, whatever else the trace saw
            return "process the outputs in worker processes (--workers N)"
        lock = "--pinned" if s.get("pool") else "--pool --pinned"  # what page-locked buffers still need
        if cause == "sync copy" and not s.get("pinned"):
            return f"a reused, page-locked output pool with non_blocking copies ({lock})"
        if cause == "overlap" and not s.get("streams"):
            return "copies on a side stream, overlapping the next forward (--streams" + \
                (")" if s.get("pinned") else f", which needs {lock})")
        if more:
            return f"more output workers (--workers {more}): they are the cap, and the machine has {cpus} CPUs"
        if not s.get("uint8_out"):
            return "send back a class map made on the GPU (--uint8-out): 1 byte a pixel instead of the class scores"
        return "cheaper output processing: its workers have every CPU"
    pinned = s.get("pin_memory") or s.get("pool")
    if cause == "peer":
        return "none on this rank: the slowest rank holds every all-reduce, and its own report names why"
    if cause == "decoding":
        if not s.get("gpu_decode"):
            return "decode on the GPU (--gpu-decode): the workers then only read the files' bytes"
        if not s.get("resized_cache"):
            return ("read a copy of the photos made once at the training size (--resized-cache): small baseline files, "
                    "which the device decodes in its batches")
        # the copy's decode (and --augment's crops) share the SMs with the step: the workers take it off them,
        # whole where there are enough of them (workers_take_copy), else a share of each batch sized from the rates the
        # run measures at its start: a fixed share that gained on one host's cores lost on slower ones (docs/photos.md)
        if workers_take_copy(s.get("augment", False), workers):
            return ("decode the copy in the workers (--no-gpu-decode), where they keep up with the step: its files "
                    "are at the training size, and on the device their decode runs beside the step")
        if not s.get("cpu_decoded") and not (photos or {}).get("cpu_decoded_auto") and workers:
            planes = "--gpu-decoder nvjpeg " if s.get("augment") and s.get("gpu_decoder") != "nvjpeg" else ""
            return (f"where cores are spare, let the workers decode and cut part of each batch ({planes}--cpu-decoded "
                    "auto, sized from the decoders' rates timed at the start; time it against 0 in one command)")
        img = s.get("img_size", 0)
        if s.get("augment") and (stored := copy_size(s.get("cache_size"), img, True)) > img:
            return (f"a smaller copy (--cache-size {smaller_copy(stored, img)}): the device decodes the copy of every "
                    "batch, most of its work with --augment's crops, of which more are then enlarged (docs/photos.md)")
        return "fewer or smaller photos to decode: the decoder has the copy at the training size already"
    if cause == "decode thread":
        if s.get("augment"):  # (not more threads: with --augment's crops they measured no faster, docs/photos.md)
            return next_step("decoding", study, s, cpus, photos)
        if s.get("gpu_decoder", "torchvision") == "torchvision":
            return "nvjpeg's planes (--gpu-decoder nvjpeg), whose calls hold the decoding thread for less"
        # (torchvision's decoder holds one lock for its whole call, so only the planes gain from more threads)
        if s.get("gpu_decoder") == "nvjpeg" and s.get("decode_threads", 1) < DECODE_THREADS:
            return (f"more decoding threads (--decode-threads {DECODE_THREADS}), each with a decoder and a stream of "
                    "its own, which share the planes' host work")
        return next_step("decoding", study, s, cpus, photos)
    if cause == "beside":  # (our own variants run other streams' kernels only to decode and cut photos)
        if s.get("gpu_decode"):
            return next_step("decoding", study, s, cpus, photos)  # (the copy, then the workers' share of the decode)
        return USER_CHANGES["beside"]
    if cause == "pageable copy" and not pinned:
        return "pinned memory and non_blocking copies (--pin-memory --non-blocking)"
    if cause == "overlap" and not (s.get("streams") or s.get("prefetcher")):
        return "copy on a side stream (--streams), or through a prefetcher (--prefetcher)"
    if cause in ("pinning", "pageable copy", "overlap") and workers and not s.get("pool"):
        return "let the workers write into page-locked shared memory (--pool): no pin-memory thread"
    if cause == "launch":
        return "fewer, larger kernels: torch.compile (--compile)" if not s.get("compile") else \
            "none from these steps: the compiled step's launches are the limit"
    if cause == "compute":
        missing = ([] if s.get("amp", "none") != "none" else ["--amp bf16"]) + \
            ([] if s.get("channels_last") else ["--channels-last"])
        if missing:
            return f"faster compute: bf16 autocast with channels_last ({' '.join(missing)})"
        return "none from these steps: the input pipeline keeps up, so the step itself is the limit"
    if cause in ("making", "pinning", "pageable copy", "overlap"):
        if not workers:
            return "DataLoader worker processes (--workers N)"
        if cpus and workers < cpus // 2:
            return f"more workers (--workers {more}): the machine has {cpus} CPUs"
        progressive = ((photos or {}).get("to_workers_why") or {}).get("progressive")
        if cause == "making" and s.get("gpu_decode") and progressive and not s.get("baseline_copy"):
            return (f"read the {progressive} progressive files from a copy made once as baseline files "
                    "(--baseline-copy): the device decodes them in its batches, and the workers only read bytes")
        if cause == "making" and s.get("jpeg") and not (s.get("gpu_decode") and s.get("resized_cache")):
            return next_step("decoding", study, s, cpus)  # (making a batch of photos is reading and decoding them)
        if not s.get("uint8"):
            return "uint8 images, normalized on the GPU (--uint8): a quarter of the bytes to make, share and copy"
        if not s.get("batched_fetch"):
            return "one dataset call per batch, no collate (--batched-fetch)"
        return "cheaper samples, or more CPUs: its workers are what caps it"
    return "open its timeline: neither the rates nor the trace name the stage"

