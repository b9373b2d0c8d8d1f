"""256 photos of 1024x768 (q90) cut from the samples, as photos1024.sh made them. usage: mk1024.py SAMPLES OUT"""
import pathlib, sys, torch
import torchvision.transforms.v2.functional as TF
from torchvision.io import ImageReadMode, decode_image, encode_jpeg, read_file
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir()
photos = [decode_image(read_file(str(p)), mode=ImageReadMode.RGB) for p in sorted(src.iterdir())]
g = torch.Generator().manual_seed(0)
sizes = []
for k in range(256):
    photo = photos[k % len(photos)]
    h, w = photo.shape[-2:]
    scale = max(768 / h, 1024 / w) * (1 + 0.6 * torch.rand((), generator=g).item())
    image = TF.resize(photo, [max(768, round(h * scale)), max(1024, round(w * scale))], antialias=True)
    top = int(torch.randint(0, image.shape[-2] - 768 + 1, (), generator=g))
    left = int(torch.randint(0, image.shape[-1] - 1024 + 1, (), generator=g))
    data = encode_jpeg(image[:, top:top + 768, left:left + 1024].contiguous(), quality=90).numpy().tobytes()
    (out / f"{k:04d}.jpg").write_bytes(data)
    sizes.append(len(data))
print(f"photos1024: {len(sizes)} files, {sum(sizes) / len(sizes) / 1e3:.0f} kB mean")
