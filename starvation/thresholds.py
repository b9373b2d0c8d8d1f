"""
What the live pipeline and the offline analysis agree on, torch-free, so that neither imports the other:
when a window is steady, what to run when it is not, how long the loader alone runs after one, when
the decoding threads cap a run, the resized copy's size, and how many workers decode it whole.
"""
import math

SETTLE_TOLERANCE = 0.03  # a window whose halves differ by more is no steady state: measure.Window slides it
THREAD_BUSY = 0.90  # --gpu-decode's decoding thread(s) busy this share of the window: their host work caps it
# workers that decode a resized copy at the training size whole (--no-gpu-decode): 16 held 0.98-1.00 of the ceiling on
# every H100 host measured, 8 held it on some and fell behind on others, whose cores were slower or varied
# (docs/photos.md)
COPY_WORKERS = 16


def workers_take_copy(augment: bool, workers: int) -> bool:
    """Whether the workers should decode the resized copy whole (--no-gpu-decode): a copy at the training size (no
    --augment, whose copy is twice it), and COPY_WORKERS of them or more. The verdict and --survey both ask."""
    return not augment and workers >= COPY_WORKERS


def copy_size(cache_size: int | None, img_size: int, augment: bool) -> int:
    """--resized-cache's shorter side: --cache-size, else --img-size, or twice it with --augment, whose random-resized
    crops are cut from the copy (a crop of a quarter of its area or more then has as many pixels as it trains on, or
    more; the device decodes four times the pixels for it)."""
    return cache_size or (2 * img_size if augment else img_size)


def smaller_copy(stored: int, img_size: int) -> int:
    """The verdict's next --cache-size down from a copy at `stored` with --augment: 1.25 times --img-size, then
    --img-size itself. Each step down takes decode and crop work off the device, and leaves more of the crops
    enlarged: at 1.25 times, those under 64% of the copy's area (at twice, a quarter; docs/photos.md)."""
    return 5 * img_size // 4 if stored > 5 * img_size // 4 else img_size


def alone_steps(window_steps: int) -> int:
    """The loader alone's steps after a window of `window_steps`: half as many. A rate needs no more, and
    every variant's run 1 pays for it (train.py --then-alone takes the same)."""
    return (window_steps + 1) // 2


def closed_by_time(record: dict) -> bool:
    """Whether --window-s closed the run's window: it holds fewer steps than --steps asked for."""
    return record["steps"] < (record.get("settings") or {}).get("steps", record["steps"])


def longer_window(record: dict) -> str:
    """What to run for a window long enough to settle, said to a run whose window did not. Where --window-s
    closed it, more --steps alone would change nothing: --steps N alone asks for a window of N steps, here
    about a minute's worth (a stall of a second or two is then a small part of either half), or twice the
    window that closed, where that was a minute already."""
    if not closed_by_time(record) or not record.get("window_s"):
        return "run more --steps"
    held, closed = record["steps"], (record.get("settings") or {}).get("window_s", record["window_s"])
    seconds = max(60, 2 * closed)
    steps = math.ceil(held / record["window_s"] * seconds / 100) * 100  # the steps it holds, up to 100s
    return (f"run --steps {steps} for a window of about " + ("a minute" if seconds == 60 else f"{seconds:g} s")
            + f" (this one closed after {closed:g} s, at {held} steps)")
