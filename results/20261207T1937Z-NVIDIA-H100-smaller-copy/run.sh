#!/usr/bin/env bash
# The copy with --augment at a smaller size, the verdict's next step after --cpu-decoded auto, on both folders and
# 16 and 8 cores, each a share of the compiled ceiling measured in the same command, with the host's CPU in the log:
#   part 1 (carry .device/wall): both folders' copies at 768 made by a short run each; then on each folder the copy
#           at 768 with --augment on nvjpeg's planes, --cpu-decoded 0 and auto, on 16 cores and on 8
#   part 2 (carry .device/wall; after part 1 on the same machine, or it makes the 768 copies again): the copies at
#           1024 (the default with --augment) made; on each folder, 16 cores, auto at 1024 and at 768 in one command;
#           then auto at 768 with the interpreter's switch interval at 0.5 ms (switch.py), against the 5 ms default
#   part 3 (carry .device/wall): the copy at 640 made; auto at 640 on both folders, 16 and 8 cores, and at 768 on
#           16 cores beside it
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261207T1937Z-NVIDIA-H100-smaller-copy/run.sh PART (from the repository root); DRY=1 for a small CPU run here
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
augment=(--resized-cache --augment --gpu-decoder nvjpeg)
# the copies' shorter sides (a dry run's images are 64 px: its copies at 1.25, 1.5 and 2 times that)
if [ -n "${DRY:-}" ]; then small=80 s=96 big=128; else small=640 s=768 big=1024; fi

copy_at() {  # SIZE: both folders' copies at SIZE with --augment, made by 100 steps each, once
  [ ! -f "/tmp/copies-$1-made" ] || return 0
  T=60 one cam-copy-$1-make 0-15 "${cam[@]/600/100}" "${augment[@]}" --cache-size $1
  T=60 one wall-copy-$1-make 0-15 "${wall[@]/600/100}" "${augment[@]}" --cache-size $1
  touch "/tmp/copies-$1-made"
}

one ceiling 0-15 --variant compiled --data-on-gpu
case $part in
1)
  LIMIT=${LIMIT:-520}
  copy_at $s
  for set in cam wall; do
    declare -n sixteen=$set eight=${set}8
    one $set-$s-n0 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $s
    one $set-$s-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $s --cpu-decoded auto
    one ${set}8-$s-n0 0-7 "${eight[@]}" "${augment[@]}" --cache-size $s
    one ${set}8-$s-auto 0-7 "${eight[@]}" "${augment[@]}" --cache-size $s --cpu-decoded auto
  done
  ;;
2)
  LIMIT=${LIMIT:-520}
  copy_at $big
  copy_at $s
  for set in cam wall; do
    declare -n sixteen=$set
    one $set-$big-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $big --cpu-decoded auto
    one $set-$s-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $s --cpu-decoded auto
    SCRIPT=$here/switch.py one $set-$s-auto-switch 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $s \
      --cpu-decoded auto
  done
  ;;
3)
  LIMIT=${LIMIT:-520}
  copy_at $small
  copy_at $s
  for set in cam wall; do
    declare -n sixteen=$set eight=${set}8
    one $set-$small-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $small --cpu-decoded auto
    one $set-$s-auto 0-15 "${sixteen[@]}" "${augment[@]}" --cache-size $s --cpu-decoded auto
    one ${set}8-$small-auto 0-7 "${eight[@]}" "${augment[@]}" --cache-size $small --cpu-decoded auto
  done
  ;;
esac
lease_end "$part"
