#!/usr/bin/env bash
# Session 65, call 1 (one H200, FA4 staged): the backward arms, three rounds in turn (the torch
# reference check in the first); the forward's item stamps on three masks and their GPU test.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
for r in 1 2 3; do
    c=""; [ $r = 1 ] && c=--check
    bash scripts/dev/_s65_arms.sh $r $c
done
grep -E "^check|failed|Error" $OUT/s65_bwd_arms.log | head -40
python3 - $OUT/s65_bwd_arms.csv <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["mask", "kernel", "label"])["tflops"].median().unstack(0).round(1).to_string())
PY
timeout 120 python3 scripts/dev/fwd_item_stamps.py --masks full causal causal_document \
    --out $OUT/s65_item_stamps.csv.gz > $OUT/s65_item_stamps.log 2>&1 || echo "stamps rc $?"
tail -40 $OUT/s65_item_stamps.log
timeout 150 python3 -m pytest -q tests/magi_attention/kernels/test_triton_gpu.py -k stamps \
    -p no:cacheprovider > $OUT/s65_pytest_stamps.log 2>&1
tail -3 $OUT/s65_pytest_stamps.log
