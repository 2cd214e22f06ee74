#!/usr/bin/env bash
# Session 67, call 3: the Gluon GPU tests with cut tiles as a specialisation (CUT), then the
# forward on the masks with cuts at 16k and 64k, two rounds: grid plans (CUT_AT_SLICES=0, the
# kernel before cut tiles, SASS-identical) against the plans pick_plan takes.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
timeout 240 python3 -m pytest -n 8 -q tests/magi_attention/kernels/test_triton_gpu.py -k gluon \
    > $OUT/s67_pytest_gluon_$SHA.log 2>&1; echo "pytest rc $?"; tail -3 $OUT/s67_pytest_gluon_$SHA.log
grep -E "^FAILED" $OUT/s67_pytest_gluon_$SHA.log | head -10
bash scripts/dev/_s67_ab.sh fwd CUT2 2 "16384 65536" \
    "causal_document block_causal_document full_document sliding_window_causal" \
    "CUT_AT_SLICES=0;CUT_AT_SLICES=1"
