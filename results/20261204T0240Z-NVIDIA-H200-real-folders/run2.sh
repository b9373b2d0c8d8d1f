#!/usr/bin/env bash
# The camera-like folder, routed and packed; wallpapers on both paths; --verify, the resized copy; the ceiling.
# usage: run2.sh   (carry .device49: the wallpapers' files)
here=results/20261204T0240Z-NVIDIA-H200-real-folders
source $here/common.sh
trap 'cd $OUT && tar -czf rec.tgz rec && rm -rf rec' EXIT
one ceiling 0-15 --variant compiled --data-on-gpu
one cam16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16
one cam8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10
T=150 one cam16-600 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --steps 600
one wall16 0-15 --variant jpeg-gpu --data-dir /tmp/wall --workers 16
one camverify 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --verify --steps 300 --settle 0
one camcopy16 0-15 --variant jpeg-gpu --data-dir /tmp/cam --workers 16 --resized-cache
one wallcopy16 0-15 --variant jpeg-gpu --data-dir /tmp/wall --workers 16 --resized-cache
T=150 one cam8-600 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --steps 600
one wallcpu16 0-15 --variant jpeg-compiled --data-dir /tmp/wall --workers 16
one camcopy8 0-7 --variant jpeg-gpu --data-dir /tmp/cam --workers 8 --worker-nice 10 --resized-cache
