#!/usr/bin/env bash
# Session 68 call 3: the backward's cut kernel by slot (consumers address q tile t at t * BLOCK_M:
# dQ by slot, gathered after; the row table by slot): its GPU tests (the table first, then row
# TMA on its own: that ran into an illegal instruction in call 1), the public route at 8k, then
# cut against grid on the full mask (the kernel's own cost) and three document masks, 16k and
# 64k, two rounds.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
T=tests/magi_attention/kernels/test_triton_gpu.py
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 200 python3 -m pytest -q -n 8 $T -p no:cacheprovider -k "(cut_at_the_slices and not row_tma) or (test_every_mask and S8192) or gluon_backward_runs_from_bwd" > $OUT/s68_cut_tests.log 2>&1; echo "tests rc $?"
tail -3 $OUT/s68_cut_tests.log
timeout 120 python3 -m pytest -q -n 8 $T -p no:cacheprovider -k "cut_at_the_slices and row_tma" > $OUT/s68_cut_row_tma.log 2>&1; echo "row_tma tests rc $?"
tail -3 $OUT/s68_cut_row_tma.log
bash scripts/dev/_s68_ab.sh bwd CUTSLOT 2 "16384 65536" \
    "full full_document block_causal_document causal_document" "plan=grid;plan=cut"
