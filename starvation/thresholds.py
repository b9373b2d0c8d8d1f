"""
What the live pipeline and the offline analysis agree on, torch-free, so that neither imports the other:
when a window is steady, and how long the loader alone runs after one.
"""

SETTLE_TOLERANCE = 0.03  # a window whose halves differ by more is no steady state: measure.Window slides it


def alone_steps(window_steps: int) -> int:
    """The loader alone's steps after a window of `window_steps`: half as many. A rate needs no more, and
    every variant's run 1 pays for it (train.py --then-alone takes the same)."""
    return (window_steps + 1) // 2
