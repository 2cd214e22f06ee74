#!/usr/bin/env bash
# Session 63, call 1 (one H200, FA4 staged): the Gluon forward's arms on full, causal and the two
# short-row masks at 16k (causal_document, sliding_window_causal: session 62's -3.8% / -2.5%),
# each arm in its own process (the switches are read at compile), checked against the torch
# reference in its first round, three rounds in turn. Arms: NAMED_TURNS SOFTMAX_UNDER_PV
# SPLIT_RELEASE EARLY_Q.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s63_fwd_arms.csv
LOG=$OUT/s63_fwd_arms.log
ARMS=("1 1 0 0" "1 0 0 0" "0 0 0 0" "1 1 1 0" "1 1 0 1" "1 1 1 1")
for r in 1 2 3; do
    check=""; [ $r = 1 ] && check="--check"
    for arm in "${ARMS[@]}"; do
        set -- $arm
        echo "== round $r arm $arm" >> $LOG
        timeout 150 python3 scripts/dev/fwd_fa4_probe.py --seqlens 16384 \
            --masks full causal causal_document sliding_window_causal --rounds 1 $check \
            --variant NAMED_TURNS=$1 --variant SOFTMAX_UNDER_PV=$2 --variant SPLIT_RELEASE=$3 \
            --variant EARLY_Q=$4 --label "$SHA turns=$1 under_pv=$2 split=$3 early_q=$4" \
            --out $CSV >> $LOG 2>&1 || echo "arm $arm round $r failed rc $?" >> $LOG
    done
done
grep -E "check|failed|Error" $LOG | head -40
python3 - "$CSV" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["mask", "kernel", "label"])["tflops"].median().unstack(0).round(1).to_string())
PY
