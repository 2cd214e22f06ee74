#!/usr/bin/env bash
# Session 65: one round of the backward's prepared switch arms (KV_VIEWS_PER_STEP x
# DQ_SWIZZLE_32), each in its own process (the switches are read at compile), appended to
# $OUT/s65_bwd_arms.csv.   bash scripts/dev/_s65_arms.sh ROUND [--check]
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
ROUND=$1; CHECK=${2:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s65_bwd_arms.csv
LOG=$OUT/s65_bwd_arms.log
for arm in "0 0" "1 0" "0 1" "1 1"; do
    a=${arm% *}; b=${arm#* }
    label="$SHA KV_VIEWS_PER_STEP=$a DQ_SWIZZLE_32=$b"
    echo "== round $ROUND arm $arm" >> $LOG
    timeout 150 python3 scripts/dev/fwd_fa4_probe.py --direction bwd --seqlens 16384 \
        --masks full causal causal_document --rounds 1 $CHECK \
        --variant KV_VIEWS_PER_STEP=$a --variant DQ_SWIZZLE_32=$b --label "$label" \
        --out $CSV >> $LOG 2>&1 || echo "arm $arm round $ROUND failed rc $?" >> $LOG
done
