#!/usr/bin/env bash
# Session 65: one round of the forward's item-order arms (LPT_ITEMS, DYNAMIC), each in its own
# process, appended to $OUT/s65_fwd_arms.csv.   bash scripts/dev/_s65_fwd_arms.sh ROUND [--check]
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
ROUND=$1; CHECK=${2:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
for arm in "0 0" "1 0" "1 1"; do
    a=${arm% *}; b=${arm#* }
    echo "== round $ROUND arm $arm" >> $OUT/s65_fwd_arms.log
    timeout 150 python3 scripts/dev/fwd_fa4_probe.py --direction fwd --seqlens 16384 65536 \
        --masks full causal causal_document full_document block_causal_document \
        sliding_window_causal --rounds 1 $CHECK --variant LPT_ITEMS=$a --variant DYNAMIC=$b \
        --label "$SHA LPT_ITEMS=$a DYNAMIC=$b" --out $OUT/s65_fwd_arms.csv \
        >> $OUT/s65_fwd_arms.log 2>&1 || echo "arm $arm round $ROUND failed rc $?" >> $OUT/s65_fwd_arms.log
done
