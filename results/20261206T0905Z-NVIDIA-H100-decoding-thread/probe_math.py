"""Why the crops drawn in torch ops were slow on the decoding thread: sqrt, exp and round of a (64, 10) float64
CPU tensor, timed on a thread other than the main one (as the decoding thread is), with every core idle or
kept busy by as many spinning processes as there are cores (as the workers keep them), with torch's CPU threads
at their default and at 1, and with the main thread idle or spinning in Python (holding the GIL between its
switches, as the loop's threads hold it). torch hands exp and sqrt of CPU tensors to MKL's vector math, round to its own kernel.
usage: python probe_math.py"""
import json
import os
import subprocess
import sys
import threading
import time

import torch

x = torch.rand(64, 10, dtype=torch.float64)


def ms_a_call(call, n: int = 50) -> float:
    call()
    t0 = time.perf_counter()
    for _ in range(n):
        call()
    return round((time.perf_counter() - t0) / n * 1e3, 3)


def on_a_thread(main_spins: bool) -> dict:
    times = {}
    thread = threading.Thread(target=lambda: times.update(
        sqrt=ms_a_call(x.sqrt), exp=ms_a_call(x.exp), round=ms_a_call(x.round)))
    thread.start()
    while main_spins and thread.is_alive():  # (the main thread holding the GIL in Python, as the loop's does)
        sum(range(1000))
    thread.join()
    return times


default = torch.get_num_threads()
for busy in (0, os.cpu_count()):
    spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    time.sleep(1)
    for threads in (default, 1):
        torch.set_num_threads(threads)
        for main_spins in (False, True):
            print(json.dumps(dict(busy_processes=busy, torch_threads=threads, main_spins=main_spins,
                                  ms_a_call=on_a_thread(main_spins))), flush=True)
    for p in spinning:
        p.kill()
