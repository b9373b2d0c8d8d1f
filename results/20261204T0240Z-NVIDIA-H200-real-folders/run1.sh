#!/usr/bin/env bash
# The camera-like folder and the wallpapers on the GPU path, routed; the default set; the compiled ceiling.
# usage: run1.sh   (carry .device49: the wallpapers' files)
here=results/20261204T0240Z-NVIDIA-H200-real-folders
source $here/common.sh
python3 $here/kinds.py $OUT/kinds.json >> $log 2>&1
one ceiling 0-15 --variant compiled --data-on-gpu
one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16
one cam8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10
one wall16 0-15 --variant jpeg-gpu --data-dir /tmp/wall --workers 16
one wallcpu16 0-15 --variant jpeg-compiled --data-dir /tmp/wall --workers 16
one camcpu16 0-15 --variant jpeg-compiled --data-dir /tmp/cam --workers 16
one def16 0-15 --variant jpeg-gpu --workers 16
one def8 0-7 --variant jpeg-gpu --workers 8 --worker-nice 10
T=150 one cam16-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --steps 600
