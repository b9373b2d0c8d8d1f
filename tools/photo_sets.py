"""
Photo folders like a user's, for benchmarks and tests: the project's own default set (starvation.photos)
is PIL-made, baseline 4:2:0 and smooth, the fast case; a real folder is not.

    python tools/photo_sets.py camera DIR [--files 640]   # made here, like a camera's folder (below)
    python tools/photo_sets.py wallpapers DIR             # real files from other encoders (Debian's KDE wallpapers)

camera: torchvision's ImageFolder layout (4 classes), seeded, so every run makes the same folder. Sizes
from 1 to 12 megapixels (median 1600x1200, a few of 8 MP or more, some upright), sensor-like noise on
smooth scenes (about 2 bits a pixel at quality 90), 10% progressive, 10% 4:4:4 and 5% 4:2:2 subsampling,
5% grey, a few with an EXIF orientation, and one PNG.

wallpapers: the photographs and renders of Debian's plasma-workspace-wallpapers (KDE's encoders: JPEG and
PNG, 720x1440 to 5120x2880), fetched with apt-get download from this machine's apt sources and unpacked
with dpkg -x; nothing is installed. Each file keeps its name, under a class folder of its wallpaper.
"""
import argparse
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

SIZES = ((1600, 1200),) * 10 + ((2048, 1536),) * 3 + ((1280, 960),) * 3 + ((1024, 768),) * 2 + \
        ((3264, 2448), (4000, 3000))  # one file in ten of 8 MP or more
CLASSES = ("beach", "city", "forest", "street")
WALLPAPERS = "plasma-workspace-wallpapers"


def scene(w: int, h: int, rng: np.random.Generator) -> np.ndarray:
    """A smooth scene (a few colours blended over the frame, some shapes) with a camera's noise: uint8 HxWx3."""
    grid = Image.fromarray(rng.integers(0, 256, (4, 5, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
    image = np.asarray(grid, dtype=np.float32)
    for _ in range(rng.integers(3, 8)):  # edges a decoder must code: blocks of another colour
        x0, y0 = rng.integers(0, w - 8), rng.integers(0, h - 8)
        x1, y1 = x0 + rng.integers(8, w // 3), y0 + rng.integers(8, h // 3)
        image[y0:y1, x0:x1] = 0.5 * image[y0:y1, x0:x1] + 0.5 * rng.integers(0, 256, 3)
    image += rng.normal(0, 8.0, (h, w, 3)).astype(np.float32)  # sensor noise: what makes a photo's bytes
    return np.clip(image, 0, 255).astype(np.uint8)


def camera_file(job: tuple) -> None:
    k, n, root = job
    rng = np.random.default_rng(k)
    w, h = SIZES[k % len(SIZES)]
    if k % 7 == 3:
        w, h = h, w  # upright
    target = Path(root) / CLASSES[k % len(CLASSES)] / f"IMG_{k:04d}"
    image = Image.fromarray(scene(w, h, rng))
    if k == n // 2:  # the odd PNG
        image.save(target.with_suffix(".png"))
        return
    options = dict(quality=90, subsampling=2)  # 4:2:0, as most cameras and phones write
    if k % 10 == 1:
        options["progressive"] = True  # as many editors and web tools save
    if k % 10 == 2:
        options["subsampling"] = 0  # 4:4:4
    if k % 20 == 5:
        options["subsampling"] = 1  # 4:2:2
    if k % 20 == 7:
        image = image.convert("L")
    if k % 25 == 4:
        exif = Image.Exif()
        exif[0x0112] = 6  # orientation: turned a quarter
        options["exif"] = exif.tobytes()
    image.save(target.with_suffix(".jpg"), **options)


def camera(folder: Path, files: int) -> None:
    for c in CLASSES:
        (folder / c).mkdir(parents=True, exist_ok=True)
    with multiprocessing.Pool() as pool:
        pool.map(camera_file, [(k, files, str(folder)) for k in range(files)], chunksize=4)


def wallpapers(folder: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(["apt-get", "download", WALLPAPERS], cwd=tmp, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"photo_sets: apt-get download {WALLPAPERS} failed ({getattr(e, 'stderr', b'') or e}); "
                     "run apt-get update first")
        deb = next(Path(tmp).glob("*.deb"))
        subprocess.run(["dpkg", "-x", str(deb), f"{tmp}/x"], check=True)
        for f in sorted(Path(tmp, "x/usr/share/wallpapers").glob("*/contents/images*/*")):
            if f.suffix.lower() in (".jpg", ".jpeg", ".png") and f.is_file() and not f.is_symlink():
                theme = f.parts[-4]
                (folder / theme).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, folder / theme / f"{f.parent.name}-{f.name}")


def describe(folder: Path) -> str:
    """One line: files, formats, median megapixels, bits a pixel, progressive share."""
    rows = []
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        with Image.open(f) as im:
            rows.append((im.format, im.width * im.height, f.stat().st_size * 8 / (im.width * im.height),
                         bool(im.info.get("progressive") or im.info.get("progression"))))
    mp = sorted(r[1] for r in rows)[len(rows) // 2] / 1e6
    bpp = sorted(r[2] for r in rows)[len(rows) // 2]
    formats = {f: sum(r[0] == f for r in rows) for f in sorted({r[0] for r in rows})}
    return (f"{folder}: {len(rows)} files {formats}, median {mp:.1f} MP, {bpp:.2f} bits a pixel (median), "
            f"{sum(r[3] for r in rows) / len(rows):.0%} progressive")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("camera", "wallpapers"))
    p.add_argument("folder", type=Path)
    p.add_argument("--files", type=int, default=640, help="camera: files to make (default: 640)")
    args = p.parse_args()
    if args.folder.exists() and any(args.folder.iterdir()):
        sys.exit(f"photo_sets: {args.folder} is not empty")
    camera(args.folder, args.files) if args.kind == "camera" else wallpapers(args.folder)
    print(describe(args.folder))
