"""The host's time to draw a batch's 64 crops (1024x1365 images): main's crop_box, torchvision's get_params an
image at a time, against candidate2.patch's crop_boxes, 200 times each, one thread. usage: PYTHONPATH=. python
RUN_FOLDER/draws.py (from the repository root, after run.sh has made /tmp/cand2)"""
import importlib.util
import statistics
import time

from starvation import resize

spec = importlib.util.spec_from_file_location("resize_cand2", "/tmp/cand2/starvation/resize.py")
cand2 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cand2)

sizes = [(1024, 1365)] * 64
for name, draw in (("main: get_params, an image at a time", lambda: [resize.crop_box(h, w) for h, w in sizes]),
                   ("candidate 2: crop_boxes", lambda: cand2.crop_boxes(sizes))):
    draw()
    ms = []
    for _ in range(200):
        t0 = time.perf_counter()
        draw()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    print(f"{name}: median {statistics.median(ms):.3f} ms a batch, p10 {ms[20]:.3f}, p90 {ms[180]:.3f}")
