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
# note: import names, not distribution names; matplotlib is only needed by compare.py
if ! "$py" -c "import torch, torchvision, nvtx, matplotlib" 2>/dev/null \
   || { [ $# -gt 0 ] && ! "$py" -m pip show -q "$@" >/dev/null 2>&1; }; then
  echo "setup_env: installing requirements.txt $* into $venv (torch is large: minutes, once)" >&2
  "$py" -m pip install -q --disable-pip-version-check -r "$root/requirements.txt" "$@" >&2
fi
echo "$py"
