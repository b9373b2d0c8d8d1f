#!/usr/bin/env bash
# The photo issue's acceptance rows again, on whatever GPU the lease brings, each a share of the compiled
# ceiling measured in the same command, with the flags the verdict now proposes: the camera-like folder
# without the copy (nvjpeg's planes on 3 decoding threads), the resized copy without --augment decoded by the
# workers (the CPU path) and by the device, the copy with --augment on nvjpeg's planes with N images of each
# batch decoded and cut by the workers (--cpu-decoded N: 2 a worker, and one step either side), on 16 and 8
# cores and both folders; --cpu-decoded auto on the copy; --survey on the wallpapers' copy; the default set.
#   part 1: the ceiling; the camera-like set: planes --baseline-copy on 3 threads, 16 and 8 cores; its copies
#           made by a short run each (the first run on a new copy stalls); on 16 cores the copy on the CPU path,
#           on the device, with --augment N 32, 24 and auto; on 8 cores the CPU path, the device, N 16 and 20
#   part 2 (carry .device/wall): the ceiling; the same on the wallpapers' copies (auto left out); --survey of
#           the copy; the default set on 16 and 8 cores
#   part 3 (carry .device/wall): the ceiling; the wallpapers without the copy in default runs (jpeg-gpu as it
#           comes, the planes on 3 threads and their loader alone, jpeg-compiled); --verify over 300 steps on
#           the planes (both folders) and on jpeg-gpu's routing (camera-like)
#   part 4 (in place of part 3 where it ran on this kind of GPU before): the copy with --augment again, for
#           the spread: N 32 on both folders on 16 cores, N 16 and 20 on 8; the copy at 768 with N 16 on 8 cores
#   part 5 (carry .device/wall; where the lease may bring one command only): the rows of parts 1 and 2 that the
#           issue's targets name, in one command: the camera-like set without the copy on 16 and 8 cores; on both
#           folders' copies the CPU path and --augment (N 32 on 16 cores, 16 on 8), 16 and 8 cores; the default set
#   parts 6 and 7 (inline commands after part 5, written here as they ran, on the copies part 5 made): the host's
#           CPU into the log, the ceiling, the camera-like copy with --augment on the planes with N 0, 16, auto
#           and 32 on 16 cores; then the camera-like copy on 8 cores on the device and on the CPU path
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T1407Z-NVIDIA-H100-second-host/run.sh PART (from the repository root); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
camera_set
base=(--variant jpeg-gpu --steps 600 --worker-nice 10)
cam=("${base[@]}" --data-dir /tmp/cam --workers $workers)
cam8=("${base[@]}" --data-dir /tmp/cam --workers 8)
wall=("${base[@]}" --data-dir /tmp/wall --workers $workers)
wall8=("${base[@]}" --data-dir /tmp/wall --workers 8)
planes=(--baseline-copy --gpu-decoder nvjpeg --decode-threads 3)
copy=(--resized-cache)
cpu=(--resized-cache --variant jpeg-compiled)
augment=(--resized-cache --augment --gpu-decoder nvjpeg)

copies() {  # NAME ARGS...: the set's copies (512, and 1024 for --augment) made by 100 steps each
  local name=$1; shift
  T=60 one $name-copy-make 0-15 "${@/600/100}" --resized-cache
  T=60 one $name-copy-augment-make 0-15 "${@/600/100}" --resized-cache --augment
}

acceptance() {  # NAME ARGS16 -- ARGS8: the copy's rows on 16 and then 8 cores
  local name=$1 sixteen=() eight=(); shift
  while [ "$1" != -- ]; do sixteen+=("$1"); shift; done; shift; eight=("$@")
  one $name-copy-cpu 0-15 "${sixteen[@]}" "${cpu[@]}"
  one $name-copy-gpu 0-15 "${sixteen[@]}" "${copy[@]}"
  one $name-augment-cpu32 0-15 "${sixteen[@]}" "${augment[@]}" --cpu-decoded 32
  one $name-augment-cpu24 0-15 "${sixteen[@]}" "${augment[@]}" --cpu-decoded 24
  one ${name}8-copy-cpu 0-7 "${eight[@]}" "${cpu[@]}"
  one ${name}8-copy-gpu 0-7 "${eight[@]}" "${copy[@]}"
  one ${name}8-augment-cpu16 0-7 "${eight[@]}" "${augment[@]}" --cpu-decoded 16
  one ${name}8-augment-cpu20 0-7 "${eight[@]}" "${augment[@]}" --cpu-decoded 20
}

case $part in
1)
  LIMIT=${LIMIT:-470}
  one ceiling 0-15 --variant compiled --data-on-gpu
  one cam-planes 0-15 "${cam[@]}" "${planes[@]}" --prefetch-factor 3
  one cam8-planes 0-7 "${cam8[@]}" "${planes[@]}"
  copies cam "${cam[@]}"
  acceptance cam "${cam[@]}" -- "${cam8[@]}"
  one cam-augment-auto 0-15 "${cam[@]}" "${augment[@]}" --cpu-decoded auto
  ;;
2)
  LIMIT=${LIMIT:-470}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  copies wall "${wall[@]}"
  acceptance wall "${wall[@]}" -- "${wall8[@]}"
  # the survey prints its advice, and its record holds no rate: its output's tail goes into the log
  timeout 90 python3 train.py --survey --data-dir /tmp/wall --workers $workers --resized-cache "${extra[@]}" \
    --json "$rec/wall-survey.json" > "$rec/wall-survey.log" 2>&1
  { echo "wall-survey rc=$?:"; tail -12 "$rec/wall-survey.log"; } >> "$log"
  one default 0-15 --variant jpeg-gpu --workers $workers
  one default8 0-7 --variant jpeg-gpu --workers 8
  ;;
3)
  LIMIT=${LIMIT:-450}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  wall_default=(--variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=150 one wall-default 0-15 "${wall_default[@]}"
  T=150 one wall-default-planes 0-15 "${wall_default[@]}" "${planes[@]}" --prefetch-factor 3
  # (a dry run's --no-compile refuses --loader-only, with exit 2)
  T=90 one wall-loader-planes 0-15 "${wall_default[@]}" "${planes[@]}" --prefetch-factor 3 --loader-only
  T=150 one wall-default-cpu 0-15 "${wall_default[@]}" --variant jpeg-compiled
  T=90 one cam-verify-planes 0-15 "${cam[@]/600/300}" "${planes[@]}" --prefetch-factor 3 --verify
  T=90 one cam-verify-routing 0-15 "${cam[@]/600/300}" --verify
  T=120 one wall-verify-planes 0-15 "${wall[@]/600/300}" "${planes[@]}" --prefetch-factor 3 --verify
  ;;
4)
  LIMIT=${LIMIT:-450}
  one ceiling 0-15 --variant compiled --data-on-gpu
  wallpaper_copies
  one cam-augment-cpu32-again 0-15 "${cam[@]}" "${augment[@]}" --cpu-decoded 32
  one wall-augment-cpu32-again 0-15 "${wall[@]}" "${augment[@]}" --cpu-decoded 32
  one cam8-augment-cpu16-again 0-7 "${cam8[@]}" "${augment[@]}" --cpu-decoded 16
  one cam8-augment-cpu20-again 0-7 "${cam8[@]}" "${augment[@]}" --cpu-decoded 20
  one wall8-augment-cpu16-again 0-7 "${wall8[@]}" "${augment[@]}" --cpu-decoded 16
  T=60 one cam-copy768-make 0-15 "${cam[@]/600/100}" --resized-cache --augment --cache-size 768
  one cam8-augment768-cpu16 0-7 "${cam8[@]}" "${augment[@]}" --cache-size 768 --cpu-decoded 16
  one cam8-augment768-cpu24 0-7 "${cam8[@]}" "${augment[@]}" --cache-size 768 --cpu-decoded 24
  one cam-augment768-cpu32 0-15 "${cam[@]}" "${augment[@]}" --cache-size 768 --cpu-decoded 32
  ;;
5)
  LIMIT=${LIMIT:-480}
  one ceiling 0-15 --variant compiled --data-on-gpu
  one cam-planes 0-15 "${cam[@]}" "${planes[@]}" --prefetch-factor 3
  one cam8-planes 0-7 "${cam8[@]}" "${planes[@]}"
  wallpaper_copies
  copies cam "${cam[@]}"
  copies wall "${wall[@]}"
  for set in cam wall; do
    declare -n sixteen=$set eight=${set}8
    one $set-copy-cpu 0-15 "${sixteen[@]}" "${cpu[@]}"
    one $set-augment-cpu32 0-15 "${sixteen[@]}" "${augment[@]}" --cpu-decoded 32
    one ${set}8-copy-cpu 0-7 "${eight[@]}" "${cpu[@]}"
    one ${set}8-augment-cpu16 0-7 "${eight[@]}" "${augment[@]}" --cpu-decoded 16
  done
  one default 0-15 --variant jpeg-gpu --workers $workers
  ;;
6)
  LIMIT=${LIMIT:-220}
  c=("${cam[@]}" "${augment[@]}")
  one ceiling 0-15 --variant compiled --data-on-gpu
  one n0 0-15 "${c[@]}"
  one n16 0-15 "${c[@]}" --cpu-decoded 16
  one auto 0-15 "${c[@]}" --cpu-decoded auto
  one n32 0-15 "${c[@]}" --cpu-decoded 32
  ;;
7)
  LIMIT=${LIMIT:-90}
  one cam8-copy-gpu 0-7 "${cam8[@]}" "${copy[@]}"
  one cam8-copy-cpu 0-7 "${cam8[@]}" "${cpu[@]}"
  ;;
esac
lease_end "$part"
