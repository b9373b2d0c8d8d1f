#!/usr/bin/env bash
# The photo issue's acceptance rows on whatever GPU the lease brings, on the code as it is, each a share of the
# compiled ceiling measured in the same command: the camera-like folder without the copy (nvjpeg's planes on 3
# decoding threads), the resized copy on both folders with --augment off and on, by the GPU path and by the
# workers (the CPU path), the wallpapers without the copy in default runs on every path, the default set, and
# --verify on each routed path. Codes: P nvjpeg's planes (--baseline-copy --gpu-decoder nvjpeg) with
# --prefetch-factor 3, p the planes on 8 workers, r the copy (jpeg-gpu --resized-cache), R the copy decoded by
# the workers (jpeg-compiled --resized-cache), a the copy with --augment, A the same with the planes, K the copy
# with --augment in the workers, h the copy with --augment and 16 images of each batch to the workers
# (--cpu-decoded 16), d a default run of jpeg-gpu; a digit after a code: --decode-threads N.
#   part 1: the ceiling; the camera-like set P3 on 16 cores, p3 on 8; its copies made by a short run each (the
#           first run on a new copy stalls), then r R a A K h on 16 cores and r R a on 8, 600 steps
#   part 2 (carry .device/wall): the ceiling; the wallpapers' copies made, then r R a A K on 16 cores and r a on 8,
#           600 steps; the default set d on 16 and 8 cores
#   part 3 (carry .device/wall): the ceiling; default runs on the wallpapers without the copy: jpeg-gpu as it comes,
#           P3 and its loader alone (--loader-only), and jpeg-compiled; --verify over 300 steps of P3 on
#           both folders and of jpeg-gpu's routing (progressive files to the workers) on the camera-like set
#   parts 4 and 5 (inline commands after part 3, written here as they ran, on the copies the parts before made):
#           the copy with --augment on nvjpeg's planes with the workers decoding N images of each batch
#           (--cpu-decoded N): part 4 N 16, 0, 24, the copy at 768 (--cache-size 768) made and run with 0, then on 8
#           cores 0 and 16, and 16 again on 16; part 5 N 32 and 40 on the camera-like copy, 32 on the wallpapers', 24
#           on 8 cores, 24 on the wallpapers'
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T1017Z-NVIDIA-H100-acceptance/run.sh PART (from the repository root); DRY=1 for a small CPU run here
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
  [a]="copy-augment --resized-cache --augment"
  [A]="copy-augment-planes --resized-cache --augment --gpu-decoder nvjpeg"
  [K]="copy-augment-cpu --resized-cache --augment --variant jpeg-compiled"
  [h]="copy-augment-cpu16 --resized-cache --augment --cpu-decoded 16"
  [d]="default"
)
camera_set
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers $workers --worker-nice 10)
wall8=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers 8 --worker-nice 10)
case $part in
1)
  LIMIT=${LIMIT:-520}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam P3 "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  T=60 one cam-copy-make 0-15 "${cam[@]/600/100}" --resized-cache
  T=60 one cam-copy-augment-make 0-15 "${cam[@]/600/100}" --resized-cache --augment
  pair cam-copy rRaAKh "${cam[@]}"
  C=0-7 pair cam8-copy rRa "${cam8[@]}"
  ;;
2)
  LIMIT=${LIMIT:-520}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  T=60 one wall-copy-make 0-15 "${wall[@]/600/100}" --resized-cache
  T=60 one wall-copy-augment-make 0-15 "${wall[@]/600/100}" --resized-cache --augment
  pair wall-copy rRaAK "${wall[@]}"
  C=0-7 pair wall8-copy ra "${wall8[@]}"
  pair default d --variant jpeg-gpu --workers $workers
  C=0-7 pair default8 d --variant jpeg-gpu --workers 8
  ;;
3)
  LIMIT=${LIMIT:-480}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  wall_default=(--variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=150 one wall-default 0-15 "${wall_default[@]}"
  T=150 one wall-default-planes-pf3-t3 0-15 "${wall_default[@]}" ${CODES[P]#* } --decode-threads 3
  # (a dry run's --no-compile refuses --loader-only, with exit 2)
  T=90 one wall-loader-planes-pf3-t3 0-15 "${wall_default[@]}" ${CODES[P]#* } --decode-threads 3 --loader-only
  T=150 one wall-default-cpu 0-15 "${wall_default[@]}" --variant jpeg-compiled
  T=90 one cam-verify-planes-pf3-t3 0-15 "${cam[@]/600/300}" ${CODES[P]#* } --decode-threads 3 --verify
  T=90 one cam-verify-routing 0-15 "${cam[@]/600/300}" --verify
  T=120 one wall-verify-planes-pf3-t3 0-15 "${wall[@]/600/300}" ${CODES[P]#* } --decode-threads 3 --verify
  ;;
4|5)
  LIMIT=${LIMIT:-$([ $part = 4 ] && echo 400 || echo 215)}
  one ceiling 0-15 --variant compiled --data-on-gpu
  planes=(--resized-cache --augment --gpu-decoder nvjpeg)
  if [ $part = 4 ]; then
    one cam-copy-planes-cpu16 0-15 "${cam[@]}" "${planes[@]}" --cpu-decoded 16
    one cam-copy-planes 0-15 "${cam[@]}" "${planes[@]}"
    one cam-copy-planes-cpu24 0-15 "${cam[@]}" "${planes[@]}" --cpu-decoded 24
    T=60 one cam-copy768-make 0-15 "${cam[@]/600/100}" --resized-cache --augment --cache-size 768
    one cam-copy768-planes 0-15 "${cam[@]}" "${planes[@]}" --cache-size 768
    one cam8-copy-planes 0-7 "${cam8[@]}" "${planes[@]}"
    one cam8-copy-planes-cpu16 0-7 "${cam8[@]}" "${planes[@]}" --cpu-decoded 16
    one cam-copy-planes-cpu16-again 0-15 "${cam[@]}" "${planes[@]}" --cpu-decoded 16
  else
    wallpaper_copies
    one cam-copy-planes-cpu32 0-15 "${cam[@]}" "${planes[@]}" --cpu-decoded 32
    one cam-copy-planes-cpu40 0-15 "${cam[@]}" "${planes[@]}" --cpu-decoded 40
    one wall-copy-planes-cpu32 0-15 "${wall[@]}" "${planes[@]}" --cpu-decoded 32
    one cam8-copy-planes-cpu24 0-7 "${cam8[@]}" "${planes[@]}" --cpu-decoded 24
    one wall-copy-planes-cpu24 0-15 "${wall[@]}" "${planes[@]}" --cpu-decoded 24
  fi
  ;;
esac
lease_end "$part"
