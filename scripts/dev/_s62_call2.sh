#!/usr/bin/env bash
# Session 62, call 2 (one H200, FA4 staged): the Gluon forward's softmax under the PV MMA
# (gluon_forward.SOFTMAX_UNDER_PV) against the plain wait, each arm in its own process, three
# rounds in turn, FA4 in every process; then the Gluon GPU tests; then ncu of the new arm.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s62_softmax_under_pv.csv
for r in 1 2 3; do
    for arm in 1 0; do
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --seqlens 16384 --masks full causal --rounds 1 \
            --variant SOFTMAX_UNDER_PV=$arm --label "$SHA under_pv=$arm" --out $CSV >> $OUT/s62_ab.log 2>&1
    done
done
timeout 300 python3 -m pytest -q -x -n 8 tests/magi_attention/kernels/test_triton_gpu.py -k "gluon_forward or gluon_kernel or gluon_dynamic or gluon_kernels_read" \
    > $OUT/s62_pytest_gluon_fwd_$SHA.log 2>&1; tail -3 $OUT/s62_pytest_gluon_fwd_$SHA.log
timeout 100 /usr/local/cuda/bin/ncu --kernel-name regex:_fwd_kernel --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats \
    --csv --page details python3 scripts/dev/fwd_fa4_probe.py --one ffa --masks full > $OUT/s62_ncu_ffa_full_under_pv.csv 2>&1
cat $CSV
