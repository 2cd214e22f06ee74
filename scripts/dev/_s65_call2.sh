#!/usr/bin/env bash
# Session 65, call 2 (one H200, FA4 staged): the forward's item order (LPT_ITEMS, DYNAMIC) at 16k
# and 64k, three rounds (check in the first); the item stamps of both orders; the backward's
# KV_VIEWS_PER_STEP at 64k, two rounds.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
summary() {
python3 - "$1" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["seqlen", "mask", "kernel", "label"])["tflops"].median().unstack(3).round(1).to_string())
PY
}
for r in 1 2 3; do
    c=""; [ $r = 1 ] && c=--check
    bash scripts/dev/_s65_fwd_arms.sh $r $c
done
grep -E "failed|Error|max abs|mismatch" $OUT/s65_fwd_arms.log | head -20
summary $OUT/s65_fwd_arms.csv
timeout 120 python3 scripts/dev/fwd_item_stamps.py --masks full causal causal_document \
    --lpt 0 1 --out $OUT/s65_item_stamps_lpt.csv.gz > $OUT/s65_item_stamps_lpt.log 2>&1 \
    || echo "stamps rc $?"
grep -v Warn $OUT/s65_item_stamps_lpt.log | tail -8
for r in 1 2; do
    for a in 0 1; do
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --direction bwd --seqlens 65536 \
            --masks full causal causal_document --rounds 1 --variant KV_VIEWS_PER_STEP=$a \
            --label "$SHA KV_VIEWS_PER_STEP=$a" --out $OUT/s65_bwd_kv_views_64k.csv \
            >> $OUT/s65_bwd_kv_views_64k.log 2>&1 || echo "bwd arm $a rc $?"
    done
done
summary $OUT/s65_bwd_kv_views_64k.csv
