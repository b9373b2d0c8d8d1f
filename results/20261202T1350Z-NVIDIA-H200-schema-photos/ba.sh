#!/usr/bin/env bash
# before (7b302b2) and after (this tree), one command, interleaved: pool, prefetch and the ceiling at 16
# workers, jpeg-compiled (default set), part 2's streams and its ceiling
set -uo pipefail
export XDG_CACHE_HOME=$PWD/.device/cache PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .device/nvtx-*.whl
R=$OUT/ba; mkdir -p $R
trap 'python3 .device/summary.py $R > $OUT/ba-summary.txt; tar -czf $OUT/ba.tgz -C $OUT ba; rm -rf $R' EXIT
one() {  # tree name script args...
  local tree=$1 name=$2 script=$3; shift 3
  local dir=.; [ $tree = before ] && dir=.device/before
  (cd $dir && timeout 150 python3 $script "$@" --json $R/$name.json > $R/$name.log 2>&1); echo "$name rc=$? $(grep -v '^\[' $R/$name.log | tail -1 | cut -c1-140)"
}
for t in before after; do one $t $t-jpeg-compiled train.py --variant jpeg-compiled --workers 16; done
for round in 1 2; do
  for t in before after; do
    one $t $t-pool-$round train.py --variant pool --workers 16
    one $t $t-prefetch-$round train.py --variant prefetch --workers 16
    one $t $t-infer-streams-$round infer.py --variant streams
  done
done
for t in before after; do
  one $t $t-ceiling train.py --variant prefetch --data-on-gpu
  one $t $t-infer-ceiling infer.py --variant streams --outputs-on-gpu
  one $t $t-jpeg-compiled-2 train.py --variant jpeg-compiled --workers 16
done
