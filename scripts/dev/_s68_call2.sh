#!/usr/bin/env bash
# Session 68 call 2: the cut-tile GPU tests (row TMA no longer asked of cut plans), then where
# the backward's cut plans lose at 64k: the grid plan, the cut plan with the q row read after
# the MMAs (as session 67 wrote it) and under them, on full (a cut kernel on grid tiles: the
# kernel's own cost) and three document masks, 16k and 64k, two rounds.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 python3 -m pytest -q -n 8 tests/magi_attention/kernels/test_triton_gpu.py \
    -k "cut_at_the_slices" -p no:cacheprovider > $OUT/s68_cut_tests.log 2>&1; echo "tests rc $?"
tail -3 $OUT/s68_cut_tests.log
bash scripts/dev/_s68_ab.sh bwd CUTROW 2 "16384 65536" \
    "full full_document block_causal_document causal_document" \
    "plan=grid;plan=cut,CUT_ROW_UNDER_MMA=0;plan=cut,CUT_ROW_UNDER_MMA=1"
