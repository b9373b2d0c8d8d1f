#!/usr/bin/env bash
# Photos larger than --img-size: a folder of 256 JPEGs of 1024x768 (q90) cut from scikit-image's sample
# photos (carried as PNG/JPEG files), then jpeg-gpu before (.device/before) and after (the decode on a
# thread of its own, one resize a batch), interleaved, on 16, 8 and 4 cores; the default set too; the
# compiled ceiling; --verify over 300 steps on the new path.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
rec=$OUT/rec; mkdir -p "$rec"; log=$OUT/log.txt
big=/tmp/photos1024; small=$PWD/.device/photos512
python3 - "$PWD/.device/samples" "$big" <<'PY' >> "$log"
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
PY
one() {  # ver name cores workers args...
  local ver=$1 name=$2 cores=$3; shift 3
  local dir=$PWD; [ "$ver" = before ] && dir=$PWD/.device/before
  local t0=$SECONDS
  (cd "$dir" && timeout 150 taskset -c "$cores" python3 train.py "$@" --json "$rec/$ver.$name.json") > "$rec/$ver.$name.log" 2>&1
  echo "$ver $name rc=$? $((SECONDS - t0))s: $(tail -n 1 "$rec/$ver.$name.log")" >> "$log"
}
flip=0
pair() { if [ $flip = 1 ]; then one after "$@"; one before "$@"; flip=0; else one before "$@"; one after "$@"; flip=1; fi; }
one after ceiling 0-15 --variant jpeg-compiled --data-on-gpu
pair big-16 0-15 --variant jpeg-gpu --workers 16 --data-dir "$big"
pair big-8 0-7 --variant jpeg-gpu --workers 8 --data-dir "$big"
pair big-4 0-3 --variant jpeg-gpu --workers 4 --data-dir "$big"
pair small-16 0-15 --variant jpeg-gpu --workers 16 --data-dir "$small"
pair small-8 0-7 --variant jpeg-gpu --workers 8 --data-dir "$small"
one after verify-big 0-15 --variant jpeg-gpu --workers 16 --data-dir "$big" --verify --steps 300
one after big-8-600 0-7 --variant jpeg-gpu --workers 8 --data-dir "$big" --steps 600
python3 - "$rec" <<'PY' >> "$log"
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(p.read_text())
    print(p.stem, round(r["steps_per_s"], 2), r.get("steps"), r.get("settled"), [round(x, 2) for x in r.get("steps_per_s_halves") or []],
          round(r.get("data_wait_share") or 0, 3), r.get("verified_batches"), r.get("verify_mismatches"))
PY
cd "$OUT" && tar -czf rec.tgz rec && rm -rf rec
