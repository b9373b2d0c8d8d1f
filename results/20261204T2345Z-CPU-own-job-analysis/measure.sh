#!/usr/bin/env bash
# analyze.py's own time and memory on reports of the H200, read as a job of the user's own (NVTX ranges dropped):
# README's reference run (ResNet-18, 10 steps each), then one export made 680 times as long (make_big.py).
# Run from the repository's root on the CPU machine, with tools/nsys fetched: log to $1 (default: log.txt here).
set -euo pipefail
here=$(dirname "$0")
log=${1:-$here/log.txt}
export PATH="$PWD/tools/nsys/usr/lib/nsight-systems/bin:$PWD/.venv/bin:$PATH"
export LD_LIBRARY_PATH="$PWD/tools/nsys/usr/lib/x86_64-linux-gnu"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
{
  echo "$(date -u +%FT%TZ) $(nproc) cores, $(git log -1 --format=%h), $(nsys --version)"
  for v in baseline workers async streams prefetch pool ceiling; do
    cp "results/20261130T182151Z-NVIDIA-H200/$v.nsys-rep" "$tmp/"
    /usr/bin/time -o "$tmp/time" -f "$v: export %e s" nsys export --type sqlite --force-overwrite=true \
      -o "$tmp/$v.sqlite" "$tmp/$v.nsys-rep" >/dev/null 2>&1  # (its progress bar, on stderr)
    cat "$tmp/time"
    python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('DROP TABLE NVTX_EVENTS'); c.commit()" \
      "$tmp/$v.sqlite"
    /usr/bin/time -f "$v: analyze.py %e s, %M kB at most" python analyze.py "$tmp/$v.sqlite" | head -1
  done
  python3 "$here/make_big.py" "$tmp/baseline.sqlite" "$tmp/big.sqlite" 680
  echo "big.sqlite: $(stat -c %s "$tmp/big.sqlite") bytes"
  /usr/bin/time -f "big: analyze.py %e s, %M kB at most" python analyze.py "$tmp/big.sqlite"
} 2>&1 | tee "$log"
