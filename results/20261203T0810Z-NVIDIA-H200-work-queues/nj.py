"""nvjpeg's hardware backend driven directly (ctypes): for each output format, what it launches and where.
Decodes 64 files as one batch on a stream of our own (priority -1), times it (median of 20, after 3), then
traces 5 batches (torch.profiler, CUDA only) and lists each kernel and copy by name and stream. Also checks
YUV planes, converted here (BT.601 full range, chroma repeated), against nvjpeg's own RGB output.
usage: nj.py FOLDER [N]"""
import ctypes, collections, glob, json, os, statistics, sys, time
import torch, torchvision

folder, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 64
here = os.path.dirname(torchvision.__file__)
cands = (glob.glob(os.path.join(here, "..", "torchvision.libs", "libnvjpeg*.so*"))
         + glob.glob(os.path.join(here, "..", "nvidia", "*", "lib", "libnvjpeg.so*"))
         + glob.glob("/tmp/site/nvidia/*/lib/libnvjpeg.so*"))
print("candidates:", cands)
lib = ctypes.CDLL(cands[0])
print("using", cands[0])

class Image(ctypes.Structure):
    _fields_ = [("channel", ctypes.c_void_p * 4), ("pitch", ctypes.c_size_t * 4)]

def ok(status, what):
    if status != 0:
        raise RuntimeError(f"{what}: nvjpeg status {status}")

P = ctypes.c_void_p
handle, state, jstream = P(), P(), P()
ok(lib.nvjpegCreateEx(3, None, None, 0, ctypes.byref(handle)), "nvjpegCreateEx(HARDWARE)")
ok(lib.nvjpegJpegStateCreate(handle, ctypes.byref(state)), "state")
ok(lib.nvjpegJpegStreamCreate(handle, ctypes.byref(jstream)), "jpeg stream")

files = sorted(glob.glob(os.path.join(folder, "*.jpg")))[:n]
data = [torchvision.io.read_file(f) for f in files]
ptrs = (ctypes.c_void_p * n)(*[d.data_ptr() for d in data])
lens = (ctypes.c_size_t * n)(*[d.numel() for d in data])
info = []
for d in data:
    comps, sub = ctypes.c_int(), ctypes.c_int()
    w, h = (ctypes.c_int * 4)(), (ctypes.c_int * 4)()
    ok(lib.nvjpegGetImageInfo(handle, P(d.data_ptr()), ctypes.c_size_t(d.numel()), ctypes.byref(comps),
                              ctypes.byref(sub), w, h), "info")
    ok(lib.nvjpegJpegStreamParseHeader(handle, P(d.data_ptr()), ctypes.c_size_t(d.numel()), jstream), "parse")
    sup = ctypes.c_int(-1)
    ok(lib.nvjpegDecodeBatchedSupported(handle, jstream, ctypes.byref(sup)), "supported")
    info.append((comps.value, sub.value, list(w), list(h), sup.value))
print("first infos (components, subsampling, widths, heights, supported==0):", info[:3])
print("supported:", collections.Counter(i[4] for i in info), "subsampling:", collections.Counter(i[1] for i in info))

dev = torch.device("cuda")
stream = torch.cuda.Stream(priority=-1)
FORMATS = {"YUV": 1, "RGB": 3, "RGBI": 5}

def buffers(fmt):
    imgs = (Image * n)()
    keep = []
    for k, (comps, sub, w, h, _) in enumerate(info):
        if fmt == 1:
            planes = [torch.empty((h[c], w[c]), dtype=torch.uint8, device=dev) for c in range(comps)]
            for c, p in enumerate(planes):
                imgs[k].channel[c], imgs[k].pitch[c] = p.data_ptr(), w[c]
        elif fmt == 3:
            t = torch.empty((3, h[0], w[0]), dtype=torch.uint8, device=dev)
            planes = [t]
            for c in range(3):
                imgs[k].channel[c], imgs[k].pitch[c] = t[c].data_ptr(), w[0]
        else:
            t = torch.empty((h[0], w[0], 3), dtype=torch.uint8, device=dev)
            planes = [t]
            imgs[k].channel[0], imgs[k].pitch[0] = t.data_ptr(), 3 * w[0]
        keep.append(planes)
    return imgs, keep

def decode(fmt, imgs):
    ok(lib.nvjpegDecodeBatchedInitialize(handle, state, n, 1, fmt), "init")
    ok(lib.nvjpegDecodeBatched(handle, state, ptrs, lens, imgs, P(stream.cuda_stream)), "decode")

out = {}
for name, fmt in FORMATS.items():
    imgs, keep = buffers(fmt)
    torch.cuda.synchronize()
    times = []
    for i in range(23):
        t = time.perf_counter()
        decode(fmt, imgs)
        call = time.perf_counter() - t
        stream.synchronize()
        if i >= 3:
            times.append((call, time.perf_counter() - t))
    print(f"{name}: call {statistics.median(c for c, _ in times) * 1e3:.2f} ms, to done "
          f"{statistics.median(d for _, d in times) * 1e3:.2f} ms (median of 20, batch {n})")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            decode(fmt, imgs)
        stream.synchronize()
    path = f"/tmp/nj-{name}.json"
    prof.export_chrome_trace(path)
    ev = json.load(open(path))["traceEvents"]
    c = collections.Counter((e["cat"], e["name"][:70], e["args"].get("stream")) for e in ev
                            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    streams = collections.Counter(s for (_, _, s) in c.elements())
    print(f"  our stream id: see below; GPU work by stream: {dict(streams)}")
    for (cat, nm, s), k in sorted(c.items(), key=lambda x: -x[1])[:12]:
        print(f"    {k:4d} x {cat} {nm} stream {s}")
    out[name] = keep

# YUV planes against nvjpeg's own RGB: BT.601 full range, chroma repeated to the luma's size
diffs = []
for k in range(min(n, 8)):
    y, u, v = (p.float() for p in out["YUV"][k])
    H, W = y.shape
    up = lambda p: p.repeat_interleave(-(-H // p.shape[0]), 0)[:H].repeat_interleave(-(-W // p.shape[1]), 1)[:, :W]
    u, v = up(u) - 128, up(v) - 128
    rgb = torch.stack([y + 1.402 * v, y - 0.344136 * u - 0.714136 * v, y + 1.772 * u]).round().clamp(0, 255)
    ref = out["RGB"][k][0].float()
    diffs.append(((rgb - ref).abs().mean().item(), (rgb - ref).abs().max().item()))
print("YUV->RGB here against nvjpeg RGB (mean, max abs diff), first 8:", [(round(a, 2), b) for a, b in diffs])
ref_tv = torchvision.io.decode_jpeg(data[:4], device="cuda")
print("nvjpeg RGB against torchvision's decode_jpeg, first 4, max abs diff:",
      [(out["RGB"][k][0].int() - ref_tv[k].int()).abs().max().item() for k in range(4)])

# starvation.nvjpeg.HardwareJpeg, as the pipeline calls it: on our stream, no host sync between the decode and
# the conversion; 20 calls must give the same bytes (no read before the engines wrote), close to torchvision's
sys.path.insert(0, os.getcwd())
from starvation.nvjpeg import HardwareJpeg
dec = HardwareJpeg()
with torch.cuda.stream(stream):
    first = dec(data, dev)
    sums = []
    for _ in range(20):
        got = dec(data, dev)
        sums.append(torch.stack([g.int().sum() for g in got]))
    stream.synchronize()
print("HardwareJpeg: taken", sum(g is not None for g in first), "of", n, "; 20 calls identical:",
      all(torch.equal(s, sums[0]) for s in sums), "; equal to the first:",
      torch.equal(sums[0], torch.stack([g.int().sum() for g in first])))
tv = torchvision.io.decode_jpeg(data, device="cuda")
d = [(g.int() - t.int()).abs() for g, t in zip(first, tv)]
print("against torchvision's decode_jpeg: mean abs diff", round(statistics.mean(x.float().mean().item() for x in d), 3),
      "max", max(x.max().item() for x in d), "share of pixels > 2 levels apart",
      round(statistics.mean((x > 2).float().mean().item() for x in d), 4))
with torch.cuda.stream(stream):
    for _ in range(3):
        dec(data, dev)
    stream.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        dec(data, dev)
    stream.synchronize()
print(f"HardwareJpeg: {(time.perf_counter() - t) / 20 * 1e3:.2f} ms a batch of {n} (20 back to back)")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    with torch.cuda.stream(stream):
        for _ in range(3):
            dec(data, dev)
        stream.synchronize()
prof.export_chrome_trace("/tmp/nj-hw.json")
ev = json.load(open("/tmp/nj-hw.json"))["traceEvents"]
c = collections.Counter((e["cat"], e["name"][:70], e["args"].get("stream")) for e in ev
                        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
print(f"HardwareJpeg's GPU work over 3 calls, our stream {stream.cuda_stream}:")
for (cat, nm, s), k in sorted(c.items(), key=lambda x: -x[1])[:12]:
    print(f"    {k:4d} x {cat} {nm} stream {s}")
