#!/usr/bin/env bash
# Session 69, call 1 (one H200, no FA4 needed): the backward's producer reading q_starts before
# its empty wait (Q_ROW_EARLY) against after, cut plans, with the grid as the base; the forward's
# cut kernel on the full mask's grid tiles (plan=cut on full and causal) against the grid; then
# the backward's cut-tile GPU tests.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
bash scripts/dev/kernel_arms_ab.sh bwd s69_QROW 2 "16384 65536" \
    "full causal_document full_document block_causal_document" \
    "plan=grid;plan=cut;plan=cut,Q_ROW_EARLY=0"
bash scripts/dev/kernel_arms_ab.sh fwd s69_FWDCUT 2 "16384 65536" "full causal" \
    "plan=grid;plan=cut"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -x \
    tests/magi_attention/kernels/test_triton_gpu.py -k "gluon_backward_on_tiles_cut" \
    > "$OUT/s69_cut_tests.log" 2>&1
tail -3 "$OUT/s69_cut_tests.log"
