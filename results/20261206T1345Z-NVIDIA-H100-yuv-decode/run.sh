#!/usr/bin/env bash
# --gpu-decoder nvjpeg (nvjpeg's planes, the colours converted after the resize) against torchvision's (t: RGB
# from nvjpeg, its colour kernel over every decoded pixel), in pairs in one command, each beside the compiled
# ceiling; 600 steps each, 16 cores.
#   part 1: the GPU tests of the kernels and the decoder; the camera-like copy at 1024 with --augment (t n), the
#           default set (t n), the camera-like set without the copy (t n), the copy again (n t), --verify of 300
#           steps of the copy (n)
#   part 2 (for a lease of about 200 s): the GPU tests; a camera-like set of 320 files, its copy at 1024 with
#           --augment, 300 steps each (t n); no ceiling
#   part 3 (after part 1, on the same machine or a fresh one): on 8 cores the camera-like set without the copy,
#           its copy with --augment and the default set (t n each); KDE's wallpapers (carry .device/wall), their
#           copy at 1024 with --augment, 16 cores (t n)
#   part 4 (part 1's copy with --augment ran at 0.71 of the ceiling against 0.94 in the two-pass folder, both
#           decoders): that copy with the code before the planes (o: main at 126a2e3, the two-pass folder's,
#           carried as .device/old: git archive 126a2e3 train.py starvation) against main's (t, n), o t n o t n;
#           then the ceiling. First probe2.py on the camera-like set (its nvjpeg run made 11.03 steps/s against
#           torchvision's 32.43 in part 1)
#   part 5 (a lease of about 90 s): probe2.py's mixed batches of a camera-like set of 320 files, after
#           YuvDecoder took each kind of file in a call of its own (and torchvision's decoder called so), and
#           the planes' images against torchvision's
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261206T1345Z-NVIDIA-H100-yuv-decode/run.sh PART (from the repository root; carry .device/whl,
#   pytest's wheels); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
pair() {  # name order args...: runs with torchvision's decoder (t) and nvjpeg's planes (n), in order, on cores $C
  local name=$1 order=$2 k=0; shift 2
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      o) SCRIPT=.device/old/train.py one "$name-$k-before" "${C:-0-15}" "$@" ;;
      t) one "$name-$k-torchvision" "${C:-0-15}" "$@" ;;
      n) one "$name-$k-nvjpeg" "${C:-0-15}" "$@" --gpu-decoder nvjpeg ;;
    esac
  done
}
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
case $part in
1)
  gpu_tests 150 tests/test_resize.py tests/test_photos.py -k "nvjpeg or compile"
  # (in the order a short lease needs them: a pair of each first, then the second pair of the copy)
  one ceiling 0-15 --variant compiled --data-on-gpu
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
  T=150 one camcopy-aug-made 0-15 "${cam[@]/600/20}" --warmup 5 --resized-cache --augment
  pair camcopy-aug tn "${cam[@]}" --resized-cache --augment
  pair default tn --variant jpeg-gpu --workers $workers --steps 600
  pair cam tn "${cam[@]}"
  pair camcopy-aug-again nt "${cam[@]}" --resized-cache --augment
  pair camcopy-aug-verify n "${cam[@]/600/300}" --resized-cache --augment --verify --settle 0
  ;;
2)
  gpu_tests 60 tests/test_resize.py tests/test_photos.py -k "nvjpeg or compile"
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $((files / 2)) >> "$log" 2>&1
  T=60 one camcopy-aug-made 0-15 "${cam[@]/600/20}" --warmup 5 --resized-cache --augment
  pair camcopy-aug tn "${cam[@]/600/300}" --resized-cache --augment
  ;;
3)
  one ceiling 0-15 --variant compiled --data-on-gpu
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
  cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
  T=150 one camcopy-aug-made 0-7 "${cam8[@]/600/20}" --warmup 5 --resized-cache --augment
  C=0-7 pair cam8 tn "${cam8[@]}"
  C=0-7 pair camcopy8-aug tn "${cam8[@]}" --resized-cache --augment
  C=0-7 pair default8 tn --variant jpeg-gpu --workers 8 --steps 600
  wallpaper_copies
  wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers $workers --worker-nice 10)
  T=150 one wallcopy-aug-made 0-15 "${wall[@]/600/20}" --warmup 5 --resized-cache --augment
  pair wallcopy-aug tn "${wall[@]}" --resized-cache --augment
  ;;
4)
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
  [ -n "${DRY:-}" ] || timeout 90 python3 "$here/probe2.py" /tmp/cam > "$OUT/probe2.txt" 2>&1
  echo "probe2 rc=$?" >> "$log"
  T=150 one camcopy-aug-made 0-15 "${cam[@]/600/20}" --warmup 5 --resized-cache --augment
  pair camcopy-aug otnotn "${cam[@]}" --resized-cache --augment
  one ceiling 0-15 --variant compiled --data-on-gpu
  ;;
5)
  [ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $((files / 2)) >> "$log" 2>&1
  [ -n "${DRY:-}" ] || timeout 70 python3 "$here/probe2.py" /tmp/cam mixed > "$OUT/probe2-mixed.txt" 2>&1
  echo "probe2 mixed rc=$?" >> "$log"
  ;;
esac
lease_end "$part"
