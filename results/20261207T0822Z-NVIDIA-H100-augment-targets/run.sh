#!/usr/bin/env bash
# The issue's targets with the ordered decoding threads, on whatever GPU the lease brings: the camera-like folder
# without the resized copy (0.85 of the compiled ceiling on 16 cores, 0.75 on 8), the copy with --augment (0.97)
# on both folders, and the wallpapers' best path beside its decoder's own limit. Codes: P nvjpeg's planes
# (--baseline-copy --gpu-decoder nvjpeg) with --prefetch-factor 3, p the planes on 8 workers, d a default run of
# jpeg-gpu (torchvision's decoder), a the resized copy with --augment, A the same with the planes, C the same as
# A with the copy stored at 768 px (1.5 times --img-size) instead of 1024, c the copy at 768 with --augment on
# torchvision's decoder, r the copy without --augment; a digit after a code: --decode-threads N.
#   part 1: the ceiling; the camera-like set on 16 cores P3, on 8 cores p3; the copy with --augment, a A3 C3 on
#           the camera-like set and the wallpapers (carry .device/wall), 600 steps, and A3 C3 on 8 cores on the
#           camera-like set; the camera-like set on one thread, P on 16 cores and p on 8
#   part 2 (the same machine if it is still held; its own ceiling): the wallpapers P3 (300 steps), the survey
#           of them (each decoder alone) and the planes' loader alone; the default set d on 16 and 8 cores;
#           the copy stored at 768 px with torchvision's decoder (c) on both folders; the camera-like set P3
#           and p3 again (LIMIT, seconds after which no run starts, cuts the tail)
#   part 3 (for a lease of a few minutes): the ceiling; the camera-like set P3 on 16 cores, the copy with --augment
#           C3 A3, p3 on 8 cores
#   part 2b (as it ran, an inline command after part 2; its log and records are named 4 on the device): the
#           copy with --augment on 3 threads of torchvision's decoder, at 1024 (a3) and 768 (c3), and the copy
#           without --augment (r), on both folders and on 8 cores
#   part 4: --augment's crops drawn in Python's arithmetic (a: main) against torchvision's get_params an image at a
#           time (b: old_draws.py, as before), on the camera-like copy, 16 cores, in the order a b b a after a short
#           run that makes the copy (the first run on a new copy stalls); then a on 8 cores and a3. old_draws.py
#           lies under the git-ignored results/: add it with git add -f, or carry it, or its runs exit 2
#   part 5 (written after part 4, not run yet; about 6 minutes, carrying .device/wall): part 4's A/B in one
#           command, a b b a on the camera-like copy and a b on the wallpapers' (16 cores, each after a short run
#           that makes its copy), then the camera-like copy at 768 with the draws in Python
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T0822Z-NVIDIA-H100-augment-targets/run.sh PART (from the repository root; carry .device/wall);
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
  [a]="copy-augment --resized-cache --augment"
  [c]="copy768-augment --resized-cache --augment --cache-size 768"
  [A]="copy-augment-planes --resized-cache --augment --gpu-decoder nvjpeg"
  [C]="copy768-augment-planes --resized-cache --augment --cache-size 768 --gpu-decoder nvjpeg"
  [r]="copy --resized-cache"
)
draws() {  # NAME ORDER ARGS...: pair's runs, code a with main's draws, b with old_draws.py's
  local name=$1 order=$2 k=0 run; shift 2
  for run in $(grep -o '[ab]' <<< "$order"); do k=$((k + 1))
    if [ $run = a ]; then one "$name-$k-python-draws" "${C:-0-15}" "$@"
    else SCRIPT=$here/old_draws.py one "$name-$k-get-params" "${C:-0-15}" "$@"; fi
  done
}
camera_set
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers $workers --worker-nice 10)
case $part in
1)
  LIMIT=${LIMIT:-480}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam P3 "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  T=120 pair cam-copy aA3C3 "${cam[@]}"
  wallpaper_copies
  T=120 pair wall-copy aA3C3 "${wall[@]}"
  T=120 C=0-7 pair cam8-copy A3C3 "${cam8[@]}"
  pair cam-one P "${cam[@]}"
  C=0-7 pair cam8-one p "${cam8[@]}"
  ;;
2)
  LIMIT=${LIMIT:-480}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  T=120 pair wall P3 "${wall[@]/600/300}"
  T=60 one wall-survey-planes 0-15 "${wall[@]}" --survey --baseline-copy --gpu-decoder nvjpeg --decode-threads 3
  # (a dry run's --no-compile refuses --loader-only, with exit 2; the survey's record has no steps: read its .log)
  T=120 one wall-loader-planes-pf3-t3 0-15 "${wall[@]/600/300}" --loader-only --baseline-copy --gpu-decoder nvjpeg \
    --prefetch-factor 3 --decode-threads 3
  pair default d --variant jpeg-gpu --workers $workers
  C=0-7 pair default8 d --variant jpeg-gpu --workers 8
  T=120 pair cam-copy c "${cam[@]}"
  T=120 pair wall-copy c "${wall[@]}"
  pair cam-again P3 "${cam[@]}"
  C=0-7 pair cam8-again p3 "${cam8[@]}"
  ;;
3)
  LIMIT=${LIMIT:-150}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam P3 "${cam[@]}"
  T=120 pair cam-copy C3A3 "${cam[@]}"
  C=0-7 pair cam8 p3 "${cam8[@]}"
  ;;
2b)
  LIMIT=${LIMIT:-330}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  T=100 pair cam-copy a3c3r "${cam[@]}"
  T=100 pair wall-copy c3r "${wall[@]}"
  T=100 C=0-7 pair cam8-copy c3cr "${cam8[@]}"
  ;;
4)
  LIMIT=${LIMIT:-270}
  one ceiling 0-15 --variant compiled --data-on-gpu
  T=60 one cam-copy-make 0-15 "${cam[@]/600/100}" --resized-cache --augment
  T=100 draws cam-copy abba "${cam[@]}" --resized-cache --augment
  T=100 C=0-7 draws cam8-copy a "${cam8[@]}" --resized-cache --augment
  T=100 draws cam-copy-t3 a "${cam[@]}" --resized-cache --augment --decode-threads 3
  ;;
5)
  LIMIT=${LIMIT:-420}
  one ceiling 0-15 --variant compiled --data-on-gpu
  T=60 one cam-copy-make 0-15 "${cam[@]/600/100}" --resized-cache --augment
  T=100 draws cam-copy abba "${cam[@]}" --resized-cache --augment
  wallpaper_copies
  T=60 one wall-copy-make 0-15 "${wall[@]/600/100}" --resized-cache --augment
  T=100 draws wall-copy ab "${wall[@]}" --resized-cache --augment
  T=60 one cam-copy768-make 0-15 "${cam[@]/600/100}" --resized-cache --augment --cache-size 768
  T=100 draws cam-copy768 a "${cam[@]}" --resized-cache --augment --cache-size 768
  ;;
esac
lease_end "$part"
