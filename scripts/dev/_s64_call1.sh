#!/usr/bin/env bash
# Session 64, call 1 (one H200, FA4 staged): the forward arms, three rounds in turn (the torch
# reference check in the first), then the backward arms' first round with the check.
set -u
for r in 1 2 3; do
    c=""; [ $r = 1 ] && c=--check
    bash scripts/dev/_s64_arms.sh fwd $r $c
done
bash scripts/dev/_s64_arms.sh bwd 1 --check
grep -E "^check|failed|Error" $OUT/s64_*_arms.log | head -60
python3 scripts/dev/_s64_summary.py $OUT/s64_fwd_arms.csv $OUT/s64_bwd_arms.csv
