#!/usr/bin/env bash
# device call: the inference study through run_all.sh (part 2), then --verify over 300 batches on every
# safe variant and the unsafe one; what caps the pool's loader (one randn batch on one thread)
set -uo pipefail
tar -xJf .device/nsys-2023.4.4-min.tar.xz -C /tmp && export PATH=/tmp/nsys/target-linux-x64:$PATH
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl && export PYTHONPATH=/tmp/site
export PYTHON=python3 PYTHONUNBUFFERED=1
start=$SECONDS
python3 - <<'PY' | tee $OUT/randn.txt
import time, torch
torch.set_num_threads(1)
for what, f in (("randn", lambda: torch.randn(64, 3, 512, 512)), ("normal_ per sample", lambda: [torch.empty(3, 512, 512).normal_() for _ in range(64)]),
                ("random_ uint8", lambda: torch.empty(64, 3, 512, 512, dtype=torch.uint8).random_(0, 256))):
    f(); t = time.perf_counter(); f(); f(); f(); print(f"{what}: one 64x3x512x512 batch on one thread: {(time.perf_counter() - t) / 3 * 1e3:.0f} ms")
PY
out=results/$(date -u +%Y%m%dT%H%MZ)-NVIDIA-H200-infer
timeout "${RUNALL_S:-330}" ./run_all.sh --study infer --repeat 2 --no-install --out "$out" > $OUT/run_all.log 2>&1
echo "run_all rc=$? after $((SECONDS - start)) s" | tee -a $OUT/run_all.log
tar czf $OUT/run.tgz --exclude='*.sqlite' "$out"
PART=INFER_VERIFY LIMIT=$((${LIMIT:-570} - (SECONDS - start))) bash .device/bench.sh
