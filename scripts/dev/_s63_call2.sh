#!/usr/bin/env bash
# Session 63, call 2 (one H200, FA4 staged): where the softmax under the PV starts to pay.
# Two arms (UNDER_PV_MIN_TILES 0: always; 1e9: never), each in its own process, three rounds in
# turn, masks from ~9 to 512 key tiles per q tile at 16k and 64k, checked against the torch
# reference in round 1; first the Gluon forward GPU tests at HEAD (the plan rule and both waits).
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
timeout 200 python3 -m pytest -q -x -n 8 tests/magi_attention/kernels/test_triton_gpu.py \
    -k "gluon_forward or gluon_kernel or gluon_dynamic or gluon_kernels_read" \
    > $OUT/s63_pytest_gluon_fwd_$SHA.log 2>&1; tail -3 $OUT/s63_pytest_gluon_fwd_$SHA.log
CSV=$OUT/s63_under_pv_rule.csv
LOG=$OUT/s63_under_pv_rule.log
for r in 1 2 3; do
    check=""; [ $r = 1 ] && check="--check"
    for min in 0 1000000000; do
        for s in 16384 65536; do
            masks="full causal causal_document full_document block_causal_document sliding_window_causal"
            [ $s = 65536 ] && masks="causal_document full_document block_causal_document"
            echo "== round $r min $min seqlen $s" >> $LOG
            timeout 200 python3 scripts/dev/fwd_fa4_probe.py --seqlens $s --masks $masks --rounds 1 $check \
                --variant UNDER_PV_MIN_TILES=$min --label "$SHA under_pv_min_tiles=$min" \
                --out $CSV >> $LOG 2>&1 || echo "min $min seqlen $s round $r failed rc $?" >> $LOG
        done
    done
done
grep -E "check|failed|Error" $LOG | head -40
python3 - "$CSV" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["seqlen", "mask", "kernel", "label"])["tflops"].apply(
    lambda x: " ".join(f"{v:.0f}" for v in x)).unstack("label").to_string())
PY
