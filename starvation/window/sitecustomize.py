"""
analyze.py --run puts this folder on PYTHONPATH, so that Python runs this file at start-up in every process of
the user's job. In each process that uses CUDA, it opens nsys's capture (cudaProfilerStart) SKIP seconds after
start-up (or SKIP seconds after CUDA starts, where that comes later) and closes it WINDOW seconds later, so
that the report holds steady steps and not the imports, the first batches or a compile. nsys
(--capture-range=cudaProfilerApi) then ends the job. GPU_STARVATION_WINDOW holds "SKIP,WINDOW"; the file
GPU_STARVATION_STARTED names is made at start-up, and the one GPU_STARVATION_CLOSED names as the window closes,
so that analyze.py --run can tell a job that ended too soon from nsys failing before it or after. A
sitecustomize of the user's own still runs, after this one.
"""
import importlib
import os
import sys
import threading
import time


def _capture(skip: float, window: float) -> None:
    time.sleep(skip)
    # a job that starts CUDA later (it prepares its data first, say) has its first SKIP seconds on the GPU left out
    # too; a process that never does (a DataLoader worker, torchrun's launcher) waits on, asleep
    late = False
    while (torch := sys.modules.get("torch")) is None or not torch.cuda.is_initialized():
        late = True
        time.sleep(0.5)
    if late:
        time.sleep(skip)
    print(f"analyze.py --run: capturing {window:g} s of the job", file=sys.stderr, flush=True)
    torch.cuda.cudart().cudaProfilerStart()
    time.sleep(window)
    if os.environ.get("GPU_STARVATION_CLOSED"):  # (before the stop: nsys ends the job as soon as it sees it)
        open(os.environ["GPU_STARVATION_CLOSED"], "a").close()
    torch.cuda.cudart().cudaProfilerStop()


if os.environ.get("GPU_STARVATION_STARTED"):  # (analyze.py --run: nsys did start the job)
    open(os.environ["GPU_STARVATION_STARTED"], "a").close()
if os.environ.get("GPU_STARVATION_WINDOW"):
    _skip, _window = (float(x) for x in os.environ["GPU_STARVATION_WINDOW"].split(","))
    threading.Thread(target=_capture, args=(_skip, _window), daemon=True, name="capture-window").start()

# the user's own sitecustomize, if any, which this one hides
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_this = sys.modules.pop("sitecustomize")
try:
    importlib.import_module("sitecustomize")
except ImportError:  # none: the import that ran this file must find it under its name
    sys.modules["sitecustomize"] = _this
