#!/usr/bin/env bash
# Make the Python environment this project runs in, and print its python's path.
#
# usage: tools/setup_env.sh [EXTRA_PACKAGE ...]
#
# Creates .venv in the repository (with the system's site-packages visible, so a machine that
# already has torch, as GPU boxes do, downloads nothing), then installs whatever of
# requirements.txt and the extra packages is still missing. Idempotent and quiet when all is there.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
command -v python3 >/dev/null || { echo "setup_env: python3 not found" >&2; exit 1; }

if [ ! -x "$venv/bin/python" ]; then
  echo "setup_env: creating $venv" >&2
  python3 -m venv --system-site-packages "$venv"
fi
py="$venv/bin/python"

# torch's CUDA build from PyPI, with the nvidia-* wheels it pulls in, takes about 6 GB in the venv
# and about 3 GB of downloads under TMPDIR while it installs. Say so before pip fails halfway.
need_gb=10
warn_if_short() {  # once per filesystem: the venv and TMPDIR are often on the same one
  local free_gb mount
  df -Pk "$@" | awk 'NR > 1 && !seen[$6]++ {print int($4 / 1048576), $6}' | while read -r free_gb mount; do
    if [ "$free_gb" -lt "$need_gb" ]; then
      echo "setup_env: warning: $free_gb GB free on $mount; installing torch needs about $need_gb GB" \
           "(free some space, or set TMPDIR to a roomier disk)" >&2
    fi
  done
}
lacks_extra() {  # whether one of the extra packages is missing: pip show succeeds when it finds any one of
  # several, so that pytest from the system's site-packages hid a missing pytest-xdist
  local package
  for package in "$@"; do "$py" -m pip show -q "$package" >/dev/null 2>&1 || return 0; done
  return 1
}
# note: import names, not distribution names; matplotlib is only needed by compare.py
if ! "$py" -c "import torch, torchvision, nvtx, matplotlib" 2>/dev/null || lacks_extra "$@"; then
  echo "setup_env: installing requirements.txt ${*:+$* }into $venv (torch is large: minutes, once)" >&2
  warn_if_short "$root" "${TMPDIR:-/tmp}"
  # note: --no-cache-dir, because pip's cache would keep a second copy of torch's ~3 GB of wheels;
  # pip's own lines (a local mirror's warnings among them) go to a log, and one line says where
  log="$venv/setup.log"
  if ! "$py" -m pip install -q --disable-pip-version-check --no-cache-dir \
      -r "$root/requirements.txt" "$@" > "$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "setup_env: pip failed (above: the end of $log)" >&2
    exit 1
  fi
  echo "setup_env: installed: $("$py" -c 'import torch; print("torch", torch.__version__)') (pip's output: $log)" >&2
fi
echo "$py"
