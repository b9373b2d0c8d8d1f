#!/usr/bin/env bash
# The photo issue's acceptance rows with the flags the verdict proposes now, on whatever GPU the lease brings
# (asked for an H200, the machine they are set for), each a share of the compiled ceiling measured in the same
# command. Codes: P nvjpeg's planes (--baseline-copy --gpu-decoder nvjpeg) with --prefetch-factor 3, p the same at
# the default prefetch, r the copy (jpeg-gpu --resized-cache), R the copy decoded by the workers (jpeg-compiled
# --resized-cache), A the copy with --augment on the planes, U the same with --cpu-decoded auto, d a default run of
# jpeg-gpu on the default set; a digit after a code: --decode-threads N.
#   part 1: the ceiling; the camera-like set P3 on 16 cores, p3 on 8; its copies made by a short run each (the
#           first run on a new copy stalls), then r R A U on 16 cores and r R U on 8, 600 steps
#   part 2 (carry .device/wall): the ceiling; the wallpapers' copies made, then r R A U on 16 cores and r R U on 8,
#           600 steps; the default set d on 16 and 8 cores
#   part 3 (carry .device/wall): the ceiling; default runs on the wallpapers without the copy: jpeg-gpu as it comes,
#           P3, and jpeg-compiled; --verify over 300 steps of P3 on both folders and of jpeg-gpu's routing
#           (progressive files to the workers) on the camera-like set
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T2107Z-NVIDIA-H100-acceptance-auto/run.sh PART (from the repository root); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
declare -A CODES=(  # pair's codes (tools/lease.sh): the run's name, then its flags
  [p]="planes --baseline-copy --gpu-decoder nvjpeg"
  [P]="planes-pf3 --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3"
  [r]="copy --resized-cache"
  [R]="copy-cpu --resized-cache --variant jpeg-compiled"
  [A]="copy-augment-planes --resized-cache --augment --gpu-decoder nvjpeg"
  [U]="copy-augment-auto --resized-cache --augment --gpu-decoder nvjpeg --cpu-decoded auto"
  [d]="default"
)
camera_set
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers $workers --worker-nice 10)
wall8=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers 8 --worker-nice 10)

one ceiling 0-15 --variant compiled --data-on-gpu
case $part in
1)
  LIMIT=${LIMIT:-520}
  pair cam P3 "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  copies cam "${cam[@]}"
  pair cam-copy rRAU "${cam[@]}"
  C=0-7 pair cam8-copy rRU "${cam8[@]}"
  ;;
2)
  LIMIT=${LIMIT:-520}
  wallpaper_copies
  copies wall "${wall[@]}"
  pair wall-copy rRAU "${wall[@]}"
  C=0-7 pair wall8-copy rRU "${wall8[@]}"
  pair default d --variant jpeg-gpu --workers $workers
  C=0-7 pair default8 d --variant jpeg-gpu --workers 8
  ;;
3)
  LIMIT=${LIMIT:-480}
  wallpaper_copies
  wall_default=(--variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=150 one wall-default 0-15 "${wall_default[@]}"
  T=150 one wall-default-planes-pf3-t3 0-15 "${wall_default[@]}" ${CODES[P]#* } --decode-threads 3
  T=150 one wall-default-cpu 0-15 "${wall_default[@]}" --variant jpeg-compiled
  T=90 one cam-verify-planes-pf3-t3 0-15 "${cam[@]/600/300}" ${CODES[P]#* } --decode-threads 3 --verify
  T=90 one cam-verify-routing 0-15 "${cam[@]/600/300}" --verify
  T=120 one wall-verify-planes-pf3-t3 0-15 "${wall[@]/600/300}" ${CODES[P]#* } --decode-threads 3 --verify
  ;;
esac
lease_end "$part"
