#!/usr/bin/env bash
# The camera-like folder without the resized copy, with --baseline-copy (its progressive files read from a copy
# made once as baseline files): torchvision's decoder (b) against nvjpeg's planes (p: --gpu-decoder nvjpeg, the
# hardware engines, called once a kind of file), with --prefetch-factor 3 (capitals) where 16 workers' slots were
# too small for 21 of the device's files. 600 steps a run; each record now says how busy the decoding thread
# was (decode_thread), which says whether its host work caps the path.
#   part 1: the ceiling; the camera-like set on 16 cores B P b P; on 8 cores p b p
#   part 2 (the same machine, the ceiling of part 1): KDE's wallpapers (carry .device/wall: their 24 JPEGs,
#           copied 11 times), 16 cores, 300 steps, P and B, then the CPU path (jpeg-compiled, a default run);
#           --verify over 300 steps of P on the camera-like set
#   part 3 (after parts 1 and 2 found the decoding thread busy 98-99% of every window, its CPU time its wall
#           time: its host work capped the path): --decode-threads N (a digit after the code: that many threads,
#           each with a decoder and a stream of its own); the ceiling; the camera-like set on 16 cores P P2 P P2
#           P3 b2, on 8 cores p2 p; the wallpapers P2 (300 steps); --verify over 300 steps of P2. With less
#           device time left, a smaller LIMIT (seconds after which no run starts) runs its first runs only
#   part 5 (the same machine as part 3, its ceiling, with the device time part 3 left): the camera-like set on 16
#           cores P3 (named planes-t3), on 8 cores p3, then on 16 P and P3 again
#   part 4 (not yet run: the H200's rows that decide jpeg-gpu's defaults and the copy's, default runs): the
#           ceiling; the default set (512x512 PIL-made baseline files) on 16 and 8 cores, torchvision's decoder (d)
#           against the planes (n); then the resized copy with --augment (a) on both folders, 16 and 8 cores, 600
#           steps
# Records under $OUT/rec, log $OUT/logPART.txt (tools/lease.sh).
# usage: results/20261206T2130Z-NVIDIA-H100-planes-copy/run.sh PART (from the repository root; carry
#   .device/wall); DRY=1 for a small CPU run here
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
part=${1:?usage: run.sh PART}
source "$here/../../tools/lease.sh"
lease_start "$part"
pair() {  # name order args...: runs of each code in order (b p B P d n a c, above; a digit after one: its threads) on cores $C
  local name=$1 order=$2 k=0; shift 2
  for run in $(echo "$order" | grep -o '[a-zA-Z][0-9]*'); do
    k=$((k + 1)) code=${run:0:1} n=${run:1}
    threads=(${n:+--decode-threads $n})
    case $code in
      b) one "$name-$k-baseline${n:+-t$n}" "${C:-0-15}" "$@" --baseline-copy "${threads[@]}" ;;
      p) one "$name-$k-planes${n:+-t$n}" "${C:-0-15}" "$@" --baseline-copy --gpu-decoder nvjpeg "${threads[@]}" ;;
      B) one "$name-$k-baseline-pf3${n:+-t$n}" "${C:-0-15}" "$@" --baseline-copy --prefetch-factor 3 "${threads[@]}" ;;
      P) one "$name-$k-planes-pf3${n:+-t$n}" "${C:-0-15}" "$@" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3 \
           "${threads[@]}" ;;
      d) one "$name-$k-default" "${C:-0-15}" "$@" ;;
      n) one "$name-$k-default-planes" "${C:-0-15}" "$@" --gpu-decoder nvjpeg ;;
      a) one "$name-$k-copy-augment" "${C:-0-15}" "$@" --resized-cache --augment ;;
      c) one "$name-$k-cpu-path" "${C:-0-15}" "${@/jpeg-gpu/jpeg-compiled}" ;;
    esac
  done
}
[ -d /tmp/cam ] || python3 tools/photo_sets.py camera /tmp/cam --files $files >> "$log" 2>&1
cam=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers $workers --worker-nice 10)
cam8=(--variant jpeg-gpu --data-dir /tmp/cam --steps 600 --workers 8 --worker-nice 10)
wall=(--variant jpeg-gpu --data-dir /tmp/wall --steps 300 --workers $workers --worker-nice 10)
case $part in
1)
  LIMIT=${LIMIT:-480}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam BPbP "${cam[@]}"
  C=0-7 pair cam8 pbp "${cam8[@]}"
  ;;
2)
  LIMIT=${LIMIT:-440}
  wallpaper_copies
  T=120 pair wall PB "${wall[@]}"
  T=150 pair wall c --variant jpeg-gpu --data-dir /tmp/wall --workers $workers --worker-nice 10
  pair cam-verify P "${cam[@]/600/300}" --verify --settle 0
  ;;
3)
  LIMIT=${LIMIT:-470}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair cam PP2PP2P3b2 "${cam[@]}"
  C=0-7 pair cam8 p2p "${cam8[@]}"
  wallpaper_copies
  T=120 pair wall P2 "${wall[@]}"
  pair cam-verify P2 "${cam[@]/600/300}" --verify --settle 0
  ;;
5)
  LIMIT=${LIMIT:-150}
  one cam-1-planes-t3 0-15 "${cam[@]}" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3 --decode-threads 3
  one cam8-1-planes-t3 0-7 "${cam8[@]}" --baseline-copy --gpu-decoder nvjpeg --decode-threads 3
  one cam-2-planes 0-15 "${cam[@]}" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3
  one cam-3-planes-t3 0-15 "${cam[@]}" --baseline-copy --gpu-decoder nvjpeg --prefetch-factor 3 --decode-threads 3
  ;;
4)
  LIMIT=${LIMIT:-460}
  one ceiling 0-15 --variant compiled --data-on-gpu
  pair default dndn --variant jpeg-gpu --workers $workers
  C=0-7 pair default8 dn --variant jpeg-gpu --workers 8
  T=120 pair cam a "${cam[@]}"
  T=120 C=0-7 pair cam8 a "${cam8[@]}"
  wallpaper_copies
  T=120 pair wall a "${wall[@]/300/600}"
  T=120 C=0-7 pair wall8 a --variant jpeg-gpu --data-dir /tmp/wall --steps 600 --workers 8 --worker-nice 10
  ;;
esac
lease_end "$part"
