#!/usr/bin/env bash
# The photo issue's acceptance rows with the flags the verdict proposes now, the copy with --augment at 640
# (--cache-size at 1.25 times --img-size, the verdict's step after --cpu-decoded auto), on whatever GPU the lease
# brings (asked for an H200, the machine the targets are set for), each a share of the compiled ceiling measured
# in the same command. Codes: P nvjpeg's planes (--baseline-copy --gpu-decoder nvjpeg) with --prefetch-factor 3,
# p the same at the default prefetch, r the copy (jpeg-gpu --resized-cache), R the copy decoded by the workers
# (jpeg-compiled --resized-cache), U the copy at 640 with --augment on the planes and --cpu-decoded auto, V the same
# with the copy at 512 (--img-size, the verdict's last step), d a default run of jpeg-gpu on the default set; a
# digit after a code: --decode-threads N.
#   part 1: the ceiling; the camera-like set P3 on 16 cores, p3 on 8; its copies at 512 and 640 made by a short
#           run each (the first run on a new copy stalls), then r R U on 16 cores and on 8, V and U again on 16,
#           and the ceiling again
#   part 2 (carry .device/wall): the same for the wallpapers' copies; the default set d on 16 and 8 cores
#   part 3 (carry .device/wall): the ceiling; default runs on the wallpapers without the copy: jpeg-gpu as it
#           comes, P3, and jpeg-compiled; --verify over 300 steps of P3 on both folders and of jpeg-gpu's routing
#           (progressive files to the workers) on the camera-like set
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261208T0038Z-NVIDIA-H100-acceptance-640/run.sh PART (from the repository root); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
# the copy's sizes with --augment (a dry run's images are 64 px: its copies at 1.25 and 1 times that)
if [ -n "${DRY:-}" ]; then small=80 img=64; else small=640 img=512; fi
declare -A CODES=(  # pair's codes (tools/lease.sh): the run's name, then its flags
  [p]="planes --baseline-copy --gpu-decoder nvjpeg"
  [P]="planes-pf3 --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3"
  [r]="copy --resized-cache"
  [R]="copy-cpu --resized-cache --variant jpeg-compiled"
  [U]="copy-augment-$small-auto --resized-cache --augment --gpu-decoder nvjpeg --cpu-decoded auto --cache-size $small"
  [V]="copy-augment-$img-auto --resized-cache --augment --gpu-decoder nvjpeg --cpu-decoded auto --cache-size $img"
  [d]="default"
)
camera_set
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers $workers --worker-nice 10)
wall8=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers 8 --worker-nice 10)

copy_runs() {  # NAME: the folder's copies at --img-size and at $small made once, then the copy's rows
  local -n sixteen=$1 eight=${1}8
  T=60 one $1-copy-make 0-15 "${sixteen[@]/600/100}" --resized-cache
  T=60 one $1-copy-$small-make 0-15 "${sixteen[@]/600/100}" ${CODES[U]#* }
  pair $1-copy rRU "${sixteen[@]}"
  C=0-7 pair ${1}8-copy rRU "${eight[@]}"
  pair $1-copy-again VU "${sixteen[@]}"
}

one ceiling 0-15 --variant compiled --data-on-gpu
case $part in
1)
  LIMIT=${LIMIT:-520}
  pair cam P3 "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  copy_runs cam
  one ceiling-again 0-15 --variant compiled --data-on-gpu
  ;;
2)
  LIMIT=${LIMIT:-520}
  wallpaper_copies
  copy_runs wall
  pair default d --variant jpeg-gpu --workers $workers
  C=0-7 pair default8 d --variant jpeg-gpu --workers 8
  one ceiling-again 0-15 --variant compiled --data-on-gpu
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
