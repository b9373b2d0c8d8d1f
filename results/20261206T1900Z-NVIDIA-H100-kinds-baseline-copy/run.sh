#!/usr/bin/env bash
# The camera-like folder without the resized copy, where its workers (the progressive files) and the device's
# decoder (batches that mix kinds of file) held it at 0.68-0.75 of the ceiling on an H100: main, which calls
# torchvision's decoder once a kind of file (t), and with --baseline-copy (b: the progressive files read from a
# copy made once as baseline files), against the code before both (o: main at 44233e1, carried as .device/old:
# git archive 44233e1 train.py starvation), in one command each beside the compiled ceiling; 600 steps a run.
#   part 1: the GPU tests of the decoders; probe2.py's mixed batches (the yuv-decode folder's: each decoder
#           called on a mixed batch, and once a kind of file); the camera-like set on 16 cores, o t b b t o
#   part 2: on 8 cores, o b b o; KDE's wallpapers (carry .device/wall: their 24 JPEGs, copied 11 times), 16
#           cores, 300 steps, t b; --verify over 300 steps of b on the camera-like set; the planes (p: --gpu-decoder
#           nvjpeg with --baseline-copy) on 16 cores
#   part 3 (parts 1 and 2 in one command, for a single lease, machines being scarce; LIMIT=500): the GPU tests,
#           the ceiling, the camera-like set on 16 cores o b t b, on 8 cores o b; then probe2.py's mixed batches;
#           then the wallpapers t b while time is left
#   part 4 (after part 3 found the planes' per-kind calls faster than torchvision's on mixed batches, and
#           torchvision's per-kind calls no faster, which were then taken out of main: b is main's code): the
#           ceiling; the camera-like set on 16 cores, B P b P (capitals: with --prefetch-factor 3, which part 3's
#           log named: with the copy 21 of the device's files outgrew a slot, and the workers decoded them)
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261206T1900Z-NVIDIA-H100-kinds-baseline-copy/run.sh PART (from the repository root; carry
#   .device/whl, .device/old and .device/wall); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
pair() {  # name order args...: runs of each code in order (o t b p B P, above) on cores $C
  local name=$1 order=$2 k=0; shift 2
  for code in $(echo "$order" | grep -o .); do
    k=$((k + 1))
    case $code in
      o) SCRIPT=.device/old/train.py one "$name-$k-before" "${C:-0-15}" "$@" ;;
      t) one "$name-$k-kinds" "${C:-0-15}" "$@" ;;
      b) one "$name-$k-baseline" "${C:-0-15}" "$@" --baseline-copy ;;
      p) one "$name-$k-planes-baseline" "${C:-0-15}" "$@" --baseline-copy --gpu-decoder nvjpeg ;;
      B) one "$name-$k-baseline-pf3" "${C:-0-15}" "$@" --baseline-copy --prefetch-factor 3 ;;
      P) one "$name-$k-planes-baseline-pf3" "${C:-0-15}" "$@" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3 ;;
    esac
  done
}
[ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
case $part in
1)
  gpu_tests 90 tests/test_photos.py -k "nvjpeg or kind or batch_decoder"
  [ -n "${DRY:-}" ] || timeout 70 python3 "$here/../20261206T1345Z-NVIDIA-H100-yuv-decode/probe2.py" /tmp/cam mixed \
    > "$OUT/probe2-mixed.txt" 2>&1
  echo "probe2 mixed rc=$?" >> "$log"
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam otbbto "${cam[@]}"
  ;;
2)
  one ceiling 0-15 --variant compiled --data-on-gpu
  cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
  C=0-7 pair cam8 obbo "${cam8[@]}"
  wallpaper_copies
  wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 300 --workers $workers --worker-nice 10)
  T=150 pair wall tb "${wall[@]}"
  pair cam-verify b "${cam[@]/600/300}" --verify --settle 0
  pair cam-planes p "${cam[@]}"
  ;;
3)
  LIMIT=${LIMIT:-500}
  gpu_tests 60 tests/test_photos.py -k "nvjpeg or kind or batch_decoder"
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam obtb "${cam[@]}"
  cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
  C=0-7 pair cam8 ob "${cam8[@]}"
  [ -n "${DRY:-}" ] || [ $SECONDS -gt 420 ] || timeout 70 python3 \
    "$here/../20261206T1345Z-NVIDIA-H100-yuv-decode/probe2.py" /tmp/cam mixed > "$OUT/probe2-mixed.txt" 2>&1
  echo "probe2 mixed rc=$? at ${SECONDS}s" >> "$log"
  wallpaper_copies
  wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 300 --workers $workers --worker-nice 10)
  pair wall bt "${wall[@]}"
  ;;
4)
  LIMIT=${LIMIT:-200}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam BPbP "${cam[@]}"
  ;;
esac
lease_end "$part"
