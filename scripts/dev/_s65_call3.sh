#!/usr/bin/env bash
# Session 65, call 3 (one H200, FA4 staged): the forward's item order by KV head sections
# (LPT_ITEMS) against the plain one at 16k and 64k, two rounds (check in the first); both
# orders' stamps; the Gluon GPU tests (KV_VIEWS_PER_STEP now the backward's default).
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
for r in 1 2; do
    for a in 0 1; do
        c=""; [ $r = 1 ] && [ $a = 1 ] && c=--check
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --direction fwd --seqlens 16384 65536 \
            --masks full causal causal_document block_causal_document full_document --rounds 1 \
            $c --variant LPT_ITEMS=$a --label "$SHA LPT_ITEMS=$a" --out $OUT/s65_fwd_sections.csv \
            >> $OUT/s65_fwd_sections.log 2>&1 || echo "arm $a round $r rc $?"
    done
done
grep -E "^check|failed" $OUT/s65_fwd_sections.log | head
python3 - $OUT/s65_fwd_sections.csv <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
print(d.groupby(["seqlen", "mask", "kernel", "label"])["tflops"].median().unstack(3).round(1).to_string())
PY
# (stamps and Gluon GPU tests: run in the first try of this call, FA4 unstaged)
