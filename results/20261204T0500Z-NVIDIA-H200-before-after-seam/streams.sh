#!/usr/bin/env bash
# Part 2's streams (4 output workers) alone, before and after alternately, four times each: its rate
# wanders from process to process with the workers' own speed, so two runs a tree are not its spread.
# usage: [TAG=name] results/20261204T0500Z-NVIDIA-H200-before-after-seam/streams.sh   (after run.sh, same lease)
set -uo pipefail
here=results/20261204T0500Z-NVIDIA-H200-before-after-seam
ROUND=streams
source <(sed -n '/^after=/,/^}$/p' $here/run.sh)
for k in 1 2 3 4; do
  if [ $((k % 2)) = 1 ]; then one before streams$k 0-15 infer.py --variant streams --workers 4; one after streams$k 0-15 infer.py --variant streams --workers 4
  else one after streams$k 0-15 infer.py --variant streams --workers 4; one before streams$k 0-15 infer.py --variant streams --workers 4; fi
done
