"""Each GPU decoder alone on the files the routing gives the device (baseline JPEG), batches of 64, no step:
images/s, megapixels/s, and the process's CPU ms a batch. usage: probe_nv.py FOLDER... (JSON lines)"""
import json, sys, time
from pathlib import Path
import torch
from torchvision.io import decode_jpeg, ImageReadMode
from starvation.folder import Header, find_photos, on_device, peek

dev = torch.device("cuda")
try:
    from nvidia import nvimgcodec as nv
except ImportError as e:
    nv = None
    print(json.dumps({"nvimgcodec": f"not loaded: {e}"}), flush=True)


def nv_decoder(*backends):
    d = nv.Decoder(backends=[nv.Backend(k, load_hint=h) for k, h in backends])
    p = nv.DecodeParams(color_spec=nv.ColorSpec.SRGB, apply_exif_orientation=False)
    def run(batch):
        s = torch.cuda.current_stream().cuda_stream
        out = d.decode([nv.CodeStream(t.numpy()) for t in batch], params=p, cuda_stream=s)
        return [torch.as_tensor(m, device=dev) for m in out if m is not None]
    return run


def tv(batch):
    torch.cuda.current_stream().synchronize()
    return decode_jpeg(batch, mode=ImageReadMode.RGB, device=dev)


for folder in sys.argv[1:]:
    files = find_photos(Path(folder))[0]
    heads = [peek(f, 10**9) for f in files]
    keep = [f for f, h in zip(files, heads) if isinstance(h, Header) and on_device(h)]
    mp = [h.pixels / 1e6 for h in heads if isinstance(h, Header) and on_device(h)]
    enc = [torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8) for f in keep]
    groups = [enc[i:i + 64] for i in range(0, len(enc) - 63, 64)]
    mps = [sum(mp[i:i + 64]) for i in range(0, len(enc) - 63, 64)]
    jobs = {"torchvision": lambda: tv}
    if nv is not None:
        K = nv.BackendKind
        jobs.update({"nv hw": lambda: nv_decoder((K.HW_GPU_ONLY, 1.0)),
                     "nv hw + cuda (as train.py)": lambda: nv_decoder((K.HW_GPU_ONLY, 1.0), (K.GPU_ONLY, 1.0)),
                     "nv hw 0.7 + cuda": lambda: nv_decoder((K.HW_GPU_ONLY, 0.7), (K.GPU_ONLY, 1.0)),
                     "nv hw 0.5 + cuda": lambda: nv_decoder((K.HW_GPU_ONLY, 0.5), (K.GPU_ONLY, 1.0)),
                     "nv hybrid": lambda: nv_decoder((K.HYBRID_CPU_GPU, 1.0))})
    for name, make in jobs.items():
        try:
            job = make()
            for g in groups[:3]:
                job(g)
            torch.cuda.synchronize()
            n = imgs = pix = 0; cpu = time.process_time(); t0 = time.perf_counter()
            while time.perf_counter() - t0 < 4 or n < 5:
                i = n % len(groups)
                got = job(groups[i]); n += 1; imgs += len(got); pix += mps[i] * len(got) / len(groups[i])
            torch.cuda.synchronize(); dt = time.perf_counter() - t0
            r = dict(folder=folder, decoder=name, device_files=len(keep), of=len(files), batches=n,
                     images_per_s=round(imgs / dt), mp_per_s=round(pix / dt), batches_per_s=round(n / dt, 2),
                     process_cpu_ms_a_batch=round(1e3 * (time.process_time() - cpu) / n, 1),
                     refused=n * 64 - imgs)
        except Exception as e:  # a decoder that fails here is a finding, not the probe's end
            r = dict(folder=folder, decoder=name, error=f"{type(e).__name__}: {e}")
        print(json.dumps(r), flush=True)
