#!/usr/bin/env bash
# Session 68 call 4 (the last ~300 s): a cut plan's dQ gathered in the cast's pass
# (FUSED_DQ_GATHER) against cast then index_select, 16k documents, two rounds, --check in the
# first; then the backward's cut tests.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
bash scripts/dev/_s68_ab.sh bwd GATHER 2 "16384" "full_document causal_document block_causal_document" \
    "plan=cut,FUSED_DQ_GATHER=0;plan=cut,FUSED_DQ_GATHER=1"
timeout 100 python3 -m pytest -q -n 8 tests/magi_attention/kernels/test_triton_gpu.py -p no:cacheprovider \
    -k "gluon_backward_on_tiles_cut_at_the_slices and table" > $OUT/s68_gather_tests.log 2>&1; echo "tests rc $?"
tail -2 $OUT/s68_gather_tests.log
