#!/usr/bin/env bash
# Session 67, call 2: the Gluon GPU tests (tiles cut at the slices among them), then the
# forward at 16k and 64k on six masks, one round, three arms each in its own process: the kernel
# before cut tiles (gluon_forward.py at fd4f858, copied to _gluon_forward_s66.py, untracked),
# the new kernel on grid plans (CUT_AT_SLICES=0), and on the plans pick_plan takes.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
timeout 240 python3 -m pytest -n 8 -q tests/magi_attention/kernels/test_triton_gpu.py -k gluon \
    > $OUT/s67_pytest_gluon_$SHA.log 2>&1; echo "pytest rc $?"; tail -3 $OUT/s67_pytest_gluon_$SHA.log
grep -E "^FAILED" $OUT/s67_pytest_gluon_$SHA.log | head -10
bash scripts/dev/_s67_ab.sh fwd CUT ${ROUNDS:-1} "16384 65536" \
    "full causal causal_document block_causal_document full_document sliding_window_causal" \
    "module=_gluon_forward_s66;CUT_AT_SLICES=0;CUT_AT_SLICES=1"
