#!/usr/bin/env bash
# Session 62, call 3 (one H200, FA4 staged): the Gluon forward's turns on named barriers
# (NAMED_TURNS) and the softmax under the PV (SOFTMAX_UNDER_PV): three arms, each in its own
# process, three rounds in turn, FA4 in every process; the Gluon forward GPU tests at HEAD;
# ncu of the new default.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s62_named_turns.csv
for r in 1 2 3; do
    for arm in "1 1" "0 1" "0 0"; do
        set -- $arm
        timeout 120 python3 scripts/dev/fwd_fa4_probe.py --seqlens 16384 --masks full causal --rounds 1 \
            --variant NAMED_TURNS=$1 --variant SOFTMAX_UNDER_PV=$2 --label "$SHA named=$1 under_pv=$2" \
            --out $CSV >> $OUT/s62_ab3.log 2>&1
    done
done
timeout 300 python3 -m pytest -q -x -n 8 tests/magi_attention/kernels/test_triton_gpu.py -k "gluon_forward or gluon_kernel or gluon_dynamic or gluon_kernels_read" \
    > $OUT/s62_pytest_gluon_fwd_$SHA.log 2>&1; tail -3 $OUT/s62_pytest_gluon_fwd_$SHA.log
timeout 100 /usr/local/cuda/bin/ncu --kernel-name regex:_fwd_kernel --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section InstructionStats --section SchedulerStats \
    --csv --page details python3 scripts/dev/fwd_fa4_probe.py --one ffa --masks full > $OUT/s62_ncu_ffa_full_named.csv 2>&1
cat $CSV
