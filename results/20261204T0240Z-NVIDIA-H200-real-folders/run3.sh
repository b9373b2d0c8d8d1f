#!/usr/bin/env bash
# --cpu-decoded N on the camera-like folder (the largest files to the workers), 16 and 8 cores; the loader alone; the ceiling.
# usage: run3.sh   (carry .device49: the wallpapers' files)
here=results/20261204T0240Z-NVIDIA-H200-real-folders
source $here/common.sh
trap 'cd $OUT && tar -czf rec.tgz rec && rm -rf rec' EXIT
one ceiling 0-15 --variant compiled --data-on-gpu
one cam16-n8 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 8
one cam16-n16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 16
one cam8-n4 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --cpu-decoded 4
one cam16-alone 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --loader-only
one cam16-n24 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --cpu-decoded 24
one cam8-n8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --cpu-decoded 8
one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16
