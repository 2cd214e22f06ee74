#!/usr/bin/env bash
# Session 68 call 1: the cut-tile GPU tests (forward and backward), then the backward A/B of
# cut against grid, 16k and 64k, four document-ish masks, two rounds.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 python3 -m pytest -q -n 8 tests/magi_attention/kernels/test_triton_gpu.py \
    -k "cut_at_the_slices" -p no:cacheprovider > $OUT/s68_cut_tests.log 2>&1; echo "tests rc $?"
tail -5 $OUT/s68_cut_tests.log
bash scripts/dev/_s68_ab.sh bwd CUTB 2 "16384 65536" \
    "causal_document block_causal_document full_document sliding_window_causal" \
    "CUT_AT_SLICES=0;CUT_AT_SLICES=1"
