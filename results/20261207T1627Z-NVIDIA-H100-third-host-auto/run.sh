#!/usr/bin/env bash
# The photo issue's acceptance rows with the flags the verdict now proposes, each a share of the compiled
# ceiling measured in the same command, with the host's CPU in the log (the workers' share depends on it):
#   part 1 (carry .device/wall): both folders' copies (512, and 1024 for --augment) made by a short run each;
#           then on each folder the copy on the CPU path (16 workers), --augment with --cpu-decoded auto on 16
#           cores; on 8 cores the copy on the device, the copy with auto, --augment with auto
#   part 2 (carry .device/wall; after part 1 on the same machine, or it makes the copies again): the camera-like
#           set without the copy (planes, 3 threads) on 16 and 8 cores; the default set on 16 and 8; --augment
#           with --cpu-decoded 0 on both folders, the rows auto is timed against; --survey of the wallpapers'
#           copy; --verify over 300 steps on the planes (camera-like)
#   part 3 (carry .device/wall): the wallpapers without the copy in default runs (jpeg-gpu as it comes, the
#           planes on 3 threads, jpeg-compiled); --verify over 300 steps on the wallpapers' planes
#   part 4 (after part 2 on the same machine): the wallpapers' 8-core rows that part 1 left (the copy and
#           --augment with auto), and --augment with --cpu-decoded 0 on 8 cores on both folders
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T1627Z-NVIDIA-H100-third-host-auto/run.sh PART (from the repository root); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
camera_set
wallpaper_copies
base=(--variant jpeg-gpu --steps 600 --worker-nice 10)
cam=("${base[@]}" --data-dir /tmp/cam --workers $workers)
cam8=("${base[@]}" --data-dir /tmp/cam --workers 8)
wall=("${base[@]}" --data-dir /tmp/wall --workers $workers)
wall8=("${base[@]}" --data-dir /tmp/wall --workers 8)
planes=(--baseline-copy --gpu-decoder nvjpeg --decode-threads 3)
copy=(--resized-cache)
cpu=(--resized-cache --variant jpeg-compiled)
augment=(--resized-cache --augment --gpu-decoder nvjpeg)

one ceiling 0-15 --variant compiled --data-on-gpu
case $part in
1)
  LIMIT=${LIMIT:-520}
  copies cam "${cam[@]}"
  copies wall "${wall[@]}"
  for set in cam wall; do
    declare -n sixteen=$set eight=${set}8
    one $set-copy-cpu 0-15 "${sixteen[@]}" "${cpu[@]}"
    one $set-augment-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cpu-decoded auto
    one ${set}8-copy-gpu 0-7 "${eight[@]}" "${copy[@]}"
    one ${set}8-copy-auto 0-7 "${eight[@]}" "${copy[@]}" --cpu-decoded auto
    one ${set}8-augment-auto 0-7 "${eight[@]}" "${augment[@]}" --cpu-decoded auto
  done
  ;;
2)
  LIMIT=${LIMIT:-500}
  copies cam "${cam[@]}"
  copies wall "${wall[@]}"
  one cam-planes 0-15 "${cam[@]}" "${planes[@]}" --prefetch-factor 3
  one cam8-planes 0-7 "${cam8[@]}" "${planes[@]}"
  one default 0-15 --variant jpeg-gpu --workers $workers
  one default8 0-7 --variant jpeg-gpu --workers 8
  one cam-augment-n0 0-15 "${cam[@]}" "${augment[@]}"
  one wall-augment-n0 0-15 "${wall[@]}" "${augment[@]}"
  # the survey prints its advice, and its record holds no rate: its output's tail goes into the log
  timeout 90 python3 train.py --survey --data-dir /tmp/wall --workers $workers --resized-cache "${extra[@]}" \
    --json "$rec/wall-survey.json" > "$rec/wall-survey.log" 2>&1
  { echo "wall-survey rc=$?:"; tail -12 "$rec/wall-survey.log"; } >> "$log"
  T=90 one cam-verify-planes 0-15 "${cam[@]/600/300}" "${planes[@]}" --prefetch-factor 3 --verify
  ;;
3)
  LIMIT=${LIMIT:-450}
  wall_default=(--variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10)
  T=150 one wall-default 0-15 "${wall_default[@]}"
  T=150 one wall-default-planes 0-15 "${wall_default[@]}" "${planes[@]}" --prefetch-factor 3
  T=150 one wall-default-cpu 0-15 "${wall_default[@]}" --variant jpeg-compiled
  T=120 one wall-verify-planes 0-15 "${wall[@]/600/300}" "${planes[@]}" --prefetch-factor 3 --verify
  ;;
4)
  LIMIT=${LIMIT:-200}
  one wall8-copy-auto 0-7 "${wall8[@]}" "${copy[@]}" --cpu-decoded auto
  one wall8-augment-auto 0-7 "${wall8[@]}" "${augment[@]}" --cpu-decoded auto
  one wall8-augment-n0 0-7 "${wall8[@]}" "${augment[@]}"
  one cam8-augment-n0 0-7 "${cam8[@]}" "${augment[@]}"
  ;;
esac
lease_end "$part"
