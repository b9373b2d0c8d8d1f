"""Where jpeg-gpu's time goes on 1024x768 photos (H200). The compiled step (the `compiled` preset's: uint8,
bf16, channels_last, fused Adam), batch resident, runs alone, then with a job run once a step on a thread and
stream of its own (as DecodeAhead does). Prints ms/step for each, and each job alone.
usage: probe2.py FOLDER"""
import collections, queue, statistics, sys, threading, time
from pathlib import Path
import torch
import torch.nn.functional as F
import train
from starvation import photos
from starvation.data import Batch
from torchvision.transforms.v2.functional._geometry import _compute_resized_output_size

files = sorted(Path(sys.argv[1]).glob("*.jpg"))
enc = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in files]
groups = [enc[i * 64:(i + 1) * 64] for i in range(len(enc) // 64)]
dev = torch.device("cuda")
S = 512
P = print
def say(*a):
    P(*a, flush=True)

# ---- the fits
WEIGHTS = {}
def weights(n_in, n_out):
    """(n_in, n_out): torch's antialiased bilinear resize along one axis, as a matrix (the resize of an identity)."""
    key = (n_in, n_out)
    if key not in WEIGHTS:
        eye = torch.eye(n_in, device=dev).view(1, 1, n_in, n_in)
        WEIGHTS[key] = F.interpolate(eye, size=(n_in, n_out), mode="bilinear", antialias=True, align_corners=False)[0, 0]
    return WEIGHTS[key]

def fit_mm(x, size=S, dtype=torch.float16):
    """x: (k, 3, H, W) uint8 -> short side resized to size, centre crop, as two matmuls."""
    H, W = x.shape[-2:]
    h2, w2 = _compute_resized_output_size((H, W), size=[size])
    top, left = int(round((h2 - size) / 2.0)), int(round((w2 - size) / 2.0))
    wh = weights(H, h2)[:, top:top + size]
    ww = weights(W, w2)[:, left:left + size]
    rh = wh.abs().sum(1).nonzero(); rw = ww.abs().sum(1).nonzero()
    h0, h1, w0, w1 = int(rh[0]), int(rh[-1]) + 1, int(rw[0]), int(rw[-1]) + 1
    xs = x[..., h0:h1, w0:w1].to(dtype)
    y = torch.matmul(xs, ww[w0:w1].to(dtype))
    y = torch.matmul(wh[h0:h1].t().to(dtype), y)
    return y.round_().clamp_(0, 255).to(torch.uint8)

def fit_crop(x, size=S, dtype=torch.float32):
    """crop the centre square first, then resize it to size (aa), in dtype."""
    H, W = x.shape[-2:]
    s = min(H, W)
    t, l = (H - s) // 2, (W - s) // 2
    y = F.interpolate(x[..., t:t + s, l:l + s].to(dtype), size=(size, size), mode="bilinear", antialias=True)
    return y.round_().clamp_(0, 255).to(torch.uint8)

# ---- the decoders
tv_images = photos.decode_jpeg(groups[0], mode=photos.ImageReadMode.RGB, device=dev)
torch.cuda.synchronize()
stacked = torch.stack(tv_images)
ref = photos.fit_all(tv_images, S)
for name, fn in [("mm16", lambda: fit_mm(stacked)), ("mmbf16", lambda: fit_mm(stacked, dtype=torch.bfloat16)),
                 ("mm32", lambda: fit_mm(stacked, dtype=torch.float32)), ("crop32", lambda: fit_crop(stacked)),
                 ("crop16", lambda: fit_crop(stacked, dtype=torch.float16))]:
    try:
        out = fn(); d = (out.float() - ref.float()).abs()
        say(f"fit {name} vs fit_all: equal {(d == 0).float().mean().item():.4f}, mean {d.mean().item():.4f}, max {d.max().item():.0f}")
    except Exception as e:
        say(f"fit {name}: {type(e).__name__}: {e}")

try:
    from nvidia import nvimgcodec as nv
    hw = photos.hardware_decoder()
    OPT = ":enable_roi_fancy_upsampling=1"
    dec = nv.Decoder(backends=[nv.Backend(nv.BackendKind.HW_GPU_ONLY), nv.Backend(nv.BackendKind.GPU_ONLY)], options=OPT)
    hwonly = nv.Decoder(backends=[nv.Backend(nv.BackendKind.HW_GPU_ONLY)], options=OPT)
    planar = nv.DecodeParams(color_spec=nv.ColorSpec.SRGB, apply_exif_orientation=False, sample_format=nv.SampleFormat.P_RGB)
except Exception as e:
    say("nvimgcodec: cannot load:", type(e).__name__, e); hw = None

def nv_streams(data, roi):
    out = []
    for t in data:
        cs = nv.CodeStream(t.numpy())
        if roi:
            H, W = cs.height, cs.width; s = min(H, W); top, left = (H - s) // 2, (W - s) // 2
            cs = cs.get_sub_code_stream(region=nv.Region(top, left, top + s, left + s))
        out.append(cs)
    return out

REUSE = {}
def nv_decode(data, roi=False, reuse=False, decoder=None):
    s = torch.cuda.current_stream().cuda_stream
    key = (roi, id(decoder))
    imgs = (decoder or dec).decode(nv_streams(data, roi), params=planar, cuda_stream=s,
                                   **({"images": REUSE[key]} if reuse and key in REUSE else {}))
    if reuse:
        REUSE[key] = imgs
    return imgs

def nv_batch(data, roi=False, reuse=False, fit=fit_mm, decoder=None):
    imgs = nv_decode(data, roi, reuse, decoder)
    x = torch.stack([torch.as_tensor(m, device=dev) for m in imgs])
    return fit(x), imgs

if hw is not None:
    m = nv_decode(groups[0]); say("planar shape", torch.as_tensor(m[0], device=dev).shape, "refused", sum(i is None for i in m))
    m = nv_decode(groups[0], roi=True); say("roi refused", sum(i is None for i in m))
    ROI_OK = all(i is not None for i in m)
    if ROI_OK: say("roi shape", torch.as_tensor(m[0], device=dev).shape)
    m = hwonly.decode(nv_streams(groups[0], True), params=planar, cuda_stream=torch.cuda.current_stream().cuda_stream)
    say("HW only, roi: decoded", sum(i is not None for i in m), "of", len(m))
    out = nv_batch(groups[0])[0]; torch.cuda.synchronize()
    d = (out.float() - ref.float()).abs(); say(f"nv planar+mm16 vs tv fit_all: mean {d.mean().item():.3f} max {d.max().item():.0f}")
    if ROI_OK:
        out = nv_batch(groups[0], roi=True, fit=lambda x: fit_mm(x))[0]; torch.cuda.synchronize()
        d = (out.float() - ref.float()).abs(); say(f"nv roi+mm16 vs tv fit_all: mean {d.mean().item():.3f} max {d.max().item():.0f}")

# ---- jobs, each one batch
k = [0]
def nxt():
    k[0] += 1
    return groups[k[0] % len(groups)]
def tv_decode():
    torch.cuda.current_stream().synchronize()
    return photos.decode_jpeg(nxt(), mode=photos.ImageReadMode.RGB, device=dev)
def gil5():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.005:
        pass
JOBS = {
    "sleep5": lambda: time.sleep(0.005),
    "gil5": gil5,
    "tv_decode": tv_decode,
    "tv_decode_fit (today)": lambda: photos.decode_batch(nxt(), S, dev),
    "fit_all (today's fit)": lambda: photos.fit_all(tv_images, S),
    "fit stack+mm16": lambda: fit_mm(torch.stack(tv_images)),
    "fit stack+crop32": lambda: fit_crop(torch.stack(tv_images)),
    "fit stack+crop16": lambda: fit_crop(torch.stack(tv_images), dtype=torch.float16),
    "tv_decode+mm16": lambda: fit_mm(torch.stack(tv_decode())),
}
if hw is not None:
    JOBS.update({
        "nv_decode_fit (today)": lambda: photos.decode_batch(nxt(), S, dev, hw),
        "nv decode only (today)": lambda: hw(nxt(), torch.cuda.current_stream().cuda_stream),
        "nv planar decode only": lambda: nv_decode(nxt()),
        "nv planar reuse decode only": lambda: nv_decode(nxt(), reuse=True),
        "nv HWonly roi decode only": lambda: nv_decode(nxt(), roi=True, decoder=hwonly),
        "nv planar+mm16": lambda: nv_batch(nxt()),
        "nv planar reuse+mm16": lambda: nv_batch(nxt(), reuse=True),
        "nv roi+mm16": lambda: nv_batch(nxt(), roi=True),
        "nv roi reuse+mm16": lambda: nv_batch(nxt(), roi=True, reuse=True),
        "nv roi+crop16": lambda: nv_batch(nxt(), roi=True, fit=lambda x: fit_crop(x, dtype=torch.float16)),
    })
    if not ROI_OK:
        JOBS = {k: v for k, v in JOBS.items() if "roi" not in k}

def alone(job, n=12):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            job()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t = time.perf_counter(); job(); torch.cuda.synchronize(); ts.append(1e3 * (time.perf_counter() - t))
    return statistics.median(ts)

# ---- the step
cfg = train.parse_config(["--variant", "compiled", "--data-on-gpu"])
main = torch.cuda.current_stream()
model = train.make_model(cfg, dev, main)
step = train.make_step(cfg, model, torch.optim.Adam(model.parameters(), fused=True), dev)
batch = Batch(torch.randint(0, 256, (64, 3, S, S), dtype=torch.uint8, device=dev), torch.randint(0, 1000, (64,), device=dev))
t = time.perf_counter(); step(batch); torch.cuda.synchronize(); say(f"compiled in {time.perf_counter() - t:.1f} s")

def rate(job=None, n=100, warm=20, prio=False):
    tokens, done, err = queue.Queue(maxsize=2), [0], []
    def worker():
        s = torch.cuda.Stream()
        held = collections.deque()
        try:
            with torch.cuda.stream(s):
                while (tok := tokens.get()) is not None:
                    r = job()
                    held.append((s.record_event(), r))
                    while len(held) > 2:
                        held.popleft()[0].synchronize()
                    done[0] += 1
        except Exception as e:
            err.append(e)
    th = threading.Thread(target=worker, daemon=True)
    if job is not None:
        th.start()
    stream = torch.cuda.Stream(priority=-1) if prio else main
    stream.wait_stream(main)
    skipped = 0
    with torch.cuda.stream(stream):
        for i in range(warm + n):
            if i == warm:
                torch.cuda.synchronize(); t0 = time.perf_counter(); d0 = done[0]
            if job is not None:
                try:
                    tokens.put_nowait(1)
                except queue.Full:
                    skipped += i >= warm
            step(batch)
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    d1 = done[0]
    if job is not None:
        tokens.put(None); th.join()
    main.wait_stream(stream)
    return 1e3 * dt / n, (d1 - d0) / n, err

say("\njob alone, ms a batch (median of 12, synchronized):")
for name, job in JOBS.items():
    try:
        say(f"  {name}: {alone(job):.2f}")
    except Exception as e:
        say(f"  {name}: {type(e).__name__}: {e}")
say("\nstep with each job once a step on its own thread and stream: ms/step (jobs done per step); two rounds")
for rnd in range(2):
    base = rate()[0]
    say(f"round {rnd}: step alone {base:.2f} ms ({1e3 / base:.2f} steps/s)")
    for name, job in JOBS.items():
        ms, per, err = rate(job)
        say(f"  {name}: {ms:.2f} ms (+{ms - base:.2f}), {per:.2f} jobs/step{' ERR ' + repr(err[0]) if err else ''}")
    for name in ("tv_decode_fit (today)", "nv roi reuse+mm16", "nv planar reuse+mm16"):
        if name in JOBS:
            ms, per, err = rate(JOBS[name], prio=True)
            say(f"  {name}, step on a high-priority stream: {ms:.2f} ms (+{ms - base:.2f}), {per:.2f} jobs/step")
    say(f"round {rnd}: step alone at the end {rate()[0]:.2f} ms")
