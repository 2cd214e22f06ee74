#!/usr/bin/env bash
# Session 66, call 1 (one H200, nothing staged): the Gluon GPU tests (the forward's section
# arithmetic in its new form, O_DIRECT's bit-equality, KV_SECTIONS against the reference), then
# the forward's O_DIRECT A/B at 16k and 64k on six masks, two rounds.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
timeout 240 python3 -m pytest -n 8 -q tests/magi_attention/kernels/test_triton_gpu.py -k gluon \
    > $OUT/s66_pytest_gluon_$SHA.log 2>&1; echo "pytest rc $?"; tail -3 $OUT/s66_pytest_gluon_$SHA.log
bash scripts/dev/_s66_ab.sh fwd O_DIRECT 2 "16384 65536" \
    "full causal causal_document block_causal_document full_document sliding_window_causal"
