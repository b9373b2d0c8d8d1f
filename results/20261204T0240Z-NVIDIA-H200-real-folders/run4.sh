#!/usr/bin/env bash
# The workers read each file straight into its slot (no copy on the way): the camera-like folder on 16 and
# 8 cores, a 600-step check, the default set; the ceiling.
# usage: run4.sh   (carry .device49: the wallpapers' files)
here=results/20261204T0240Z-NVIDIA-H200-real-folders
source $here/common.sh
trap 'cd $OUT && tar -czf rec.tgz rec && rm -rf rec' EXIT
one ceiling 0-15 --variant compiled --data-on-gpu
one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16
T=100 one cam16-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --steps 600
one cam8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10
one def16 0-15 --variant jpeg-gpu --workers 16
