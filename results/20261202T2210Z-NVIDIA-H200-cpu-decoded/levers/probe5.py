"""TorchCodec against torchvision, each alone (H200, the 1024x768 photos): the CPU decoder's rate on one thread
(what a worker does), and the GPU decoder's per batch of 64, the device synchronized. usage: probe5.py FOLDER"""
import statistics, sys, time
from pathlib import Path
import torch
from torchvision.io import ImageReadMode, decode_jpeg as tv_decode
from torchcodec.decoders import decode_jpeg as tc_decode
from starvation.resize import fit, fit_all

files = sorted(Path(sys.argv[1]).glob("*.jpg"))
enc = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files]
torch.set_num_threads(1)
def say(*a):
    print(*a, flush=True)

def per_image(decode, n=128, rounds=3):
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for e in enc[:n]:
            fit(decode(e), 512)
        out.append(1e3 * (time.perf_counter() - t) / n)
    return out
cpu = {"torchvision": lambda e: tv_decode(e, mode=ImageReadMode.RGB), "torchcodec": lambda e: tc_decode(e, mode="RGB")}
for name in list(cpu) * 2:
    say(f"CPU, one thread, decode + fit a 1024x768 photo: {name} {[round(x, 2) for x in per_image(cpu[name])]} ms")
a, b = cpu["torchvision"](enc[0]), cpu["torchcodec"](enc[0])
say(f"CPU decoders agree on photo 0: {torch.equal(a, b)} (max diff {(a.int() - b.int()).abs().max().item()})")

dev = torch.device("cuda")
gpu = {"torchvision": lambda batch: tv_decode(batch, mode=ImageReadMode.RGB, device=dev),
       "torchcodec": lambda batch: tc_decode(batch, mode="RGB", device=dev)}
for k in (64, 128):
    for name in list(gpu) * 2:
        times = []
        for r in range(23):
            batch = [enc[(r * k + j) % len(enc)] for j in range(k)]
            torch.cuda.synchronize(); t = time.perf_counter()
            images = gpu[name](batch); fit_all(images, 512)
            torch.cuda.synchronize(); times.append(1e3 * (time.perf_counter() - t))
        times = times[3:]
        say(f"GPU, decode + fit a batch of {k}: {name} median {statistics.median(times):.2f} ms "
            f"[{min(times):.2f}-{max(times):.2f}]")
batch = enc[:64]
a, b = gpu["torchvision"](batch), gpu["torchcodec"](batch)
say(f"GPU decoders agree on 64 photos: {all(torch.equal(x, y) for x, y in zip(a, b))}")
