#!/usr/bin/env bash
# more before/after processes of the two noisy ones: prefetch (16 workers) and part 2's streams, alternating
set -uo pipefail
export XDG_CACHE_HOME=$PWD/.device/cache PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl
R=$OUT/rep; mkdir -p $R
trap 'python3 .device/summary.py $R > $OUT/rep-summary.txt; tar -czf $OUT/rep.tgz -C $OUT rep; rm -rf $R' EXIT
one() {
  local tree=$1 name=$2 script=$3; shift 3
  local dir=.; [ $tree = before ] && dir=.device/before
  (cd $dir && timeout 100 python3 $script "$@" --json $R/$name.json > $R/$name.log 2>&1); echo "$name rc=$? $(grep -v '^\[' $R/$name.log | tail -1 | cut -c1-110)"
}
for round in 3 4 5 6; do
  for t in after before; do one $t $t-prefetch-$round train.py --variant prefetch --workers 16; done
done
for round in 3 4 5; do
  for t in after before; do one $t $t-infer-streams-$round infer.py --variant streams; done
done
