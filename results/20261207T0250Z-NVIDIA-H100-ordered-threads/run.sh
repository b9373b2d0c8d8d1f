#!/usr/bin/env bash
# The decoding threads now hand batches over in the order they took them: the camera-like folder without the
# resized copy, --baseline-copy --gpu-decoder nvjpeg (nvjpeg's planes, on the hardware engines), against the
# issue's targets (0.85 of the compiled ceiling on 16 cores, 0.75 on 8), then the rows that decide jpeg-gpu's
# defaults. Codes: P the planes with --prefetch-factor 3 (16 workers' default slots are too small for some of the
# camera-like files), p the planes on 8 workers, d a default run of jpeg-gpu (torchvision's decoder), n the
# planes on the default set, a the resized copy with --augment; a digit after a code: --decode-threads N.
#   part 1: the ceiling; the camera-like set on 16 cores P3 P, on 8 cores p3; --verify over 300 steps of P3; the
#           default set (512x512 PIL-made baseline files) on 16 cores d n3; the wallpapers (carry .device/wall) P3,
#           300 steps; the camera-like set P3 on 16 cores and p on 8 again (LIMIT, seconds after which no run
#           starts, cuts the tail)
#   part 2 (the same machine, part 1's ceiling): the default set on 8 cores d n3; the resized copy with --augment
#           (a) on both folders, 16 and 8 cores, 600 steps; the default set on 16 cores d n3 again
#   part 3 (the same machine, with the device time left; written out as it ran, from a command typed then):
#           the wallpapers P, 300 steps; the camera-like set P on 16 cores, p3 on 8
#   part 4 (not yet run: the issue's targets on an H200, and whether the planes on 3 threads lift the copy with
#           --augment, whose one decoding thread was busy 98% in part 2; A is a with the planes): the ceiling; the
#           camera-like set on 16 cores P3 P P3, on 8 cores p3 p p3; the copy with --augment a A3 on both folders
#           on 16 cores, 600 steps
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T0250Z-NVIDIA-H100-ordered-threads/run.sh PART (from the repository root; carry .device/wall);
#   DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
declare -A CODES=(  # pair's codes (tools/lease.sh): the run's name, then its flags
  [p]="planes --baseline-copy --gpu-decoder nvjpeg"
  [P]="planes-pf3 --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3"
  [d]="default"
  [n]="default-planes --gpu-decoder nvjpeg"
  [a]="copy-augment --resized-cache --augment"
  [A]="copy-augment-planes --resized-cache --augment --gpu-decoder nvjpeg"
)
camera_set
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 300 --workers $workers --worker-nice 10)
wall8=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers 8 --worker-nice 10)
case $part in
1)
  LIMIT=${LIMIT:-470}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam P3P "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  pair cam-verify P3 "${cam[@]/600/300}" --verify --settle 0
  pair default dn3 --variant jpeg-gpu --workers $workers
  wallpaper_copies
  T=120 pair wall P3 "${wall[@]}"
  pair cam-again P3 "${cam[@]}"
  C=0-7 pair cam8-again p "${cam8[@]}"
  ;;
2)
  LIMIT=${LIMIT:-460}
  C=0-7 pair default8 dn3 --variant jpeg-gpu --workers 8
  T=120 pair cam a "${cam[@]}"
  T=120 C=0-7 pair cam8 a "${cam8[@]}"
  wallpaper_copies
  T=120 pair wall a "${wall[@]/300/600}"
  T=120 C=0-7 pair wall8 a "${wall8[@]}"
  pair default-again dn3 --variant jpeg-gpu --workers $workers
  ;;
3)
  LIMIT=${LIMIT:-100}
  wallpaper_copies
  T=80 one wall-2-planes-pf3 0-15 "${wall[@]}" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3
  one cam-3-planes-pf3 0-15 "${cam[@]}" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3
  one cam8-3-planes-t3 0-7 "${cam8[@]}" --baseline-copy --gpu-decoder nvjpeg --decode-threads 3
  ;;
4)
  LIMIT=${LIMIT:-470}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam P3PP3 "${cam[@]}"
  C=0-7 pair cam8 p3pp3 "${cam8[@]}"
  T=120 pair cam-copy aA3 "${cam[@]}"
  wallpaper_copies
  T=120 pair wall-copy aA3 "${wall[@]/300/600}"
  ;;
esac
lease_end "$part"
