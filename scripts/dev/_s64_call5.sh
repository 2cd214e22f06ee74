#!/usr/bin/env bash
# Session 64, call 5 (one H200, FA4 staged): the backward's EARLY_ROW_STATS arm (lse2 loaded
# before the step's MMAs; ncu: 6% of samples on short-scoreboard waits for it) off / on on full,
# causal and causal_document 16k, each arm its own process, three rounds (check in the first);
# then the kernel_masks sweep at 64k with session 64's rules.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s64_bwd_row_stats.csv
LOG=$OUT/s64_bwd_row_stats.log
for r in 1 2 3; do
    c=""; [ $r = 1 ] && c=--check
    for a in 0 1; do
        echo "== round $r EARLY_ROW_STATS=$a" >> $LOG
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --direction bwd --seqlens 16384 \
            --masks full causal causal_document --rounds 1 $c --variant EARLY_ROW_STATS=$a \
            --label "$SHA EARLY_ROW_STATS=$a" --out $CSV >> $LOG 2>&1 \
            || echo "arm $a round $r failed rc $?" >> $LOG
    done
done
grep -E "^check|failed|Error" $LOG | head
python3 scripts/dev/_s64_summary.py $CSV
SWEEP_TIMEOUT=300 bash scripts/device/gpu_session.sh sweep kernel_masks_64k h200 experiment=kernel_masks \
    'kernel=[ffa,fa4,flex]' 'seqlens=[65536]' 2>&1 | tail -6
