#!/usr/bin/env bash
# Session 64, call 3 (one H200, FA4 staged): the backward's early-release rule between its
# measured points (17 q tiles a key tile: -8%, 129: +0.5%): always against never on the
# document masks at 16k (17-31 q tiles a key tile) and 64k (83-164), three rounds in turn;
# then the Gluon GPU tests with session 64's rules as defaults.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s64_bwd_early_rule.csv
LOG=$OUT/s64_bwd_early_rule.log
for r in 1 2 3; do
    for bound in 0 1000000000; do
        echo "== round $r EARLY_EMPTY_MIN_Q_TILES=$bound" >> $LOG
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --direction bwd --seqlens 16384 65536 \
            --masks causal_document full_document block_causal_document --rounds 1 \
            --variant EARLY_EMPTY_MIN_Q_TILES=$bound --label "$SHA EARLY_EMPTY_MIN_Q_TILES=$bound" \
            --out $CSV >> $LOG 2>&1 || echo "bound $bound round $r failed rc $?" >> $LOG
    done
done
grep -E "failed|Error" $LOG | head
python3 - "$CSV" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["seqlen", "mask", "label"])["tflops"].median().unstack(2).round(1).to_string())
PY
timeout 330 python3 -m pytest -q -n 8 tests/magi_attention/kernels/test_triton_gpu.py \
    -k "gluon" -p no:cacheprovider > $OUT/s64_pytest_gluon.log 2>&1
tail -5 $OUT/s64_pytest_gluon.log
