#!/usr/bin/env bash
# Session 67, call 1 (one H200, nothing staged): O_BUFFER's GPU bit-equality test, then the
# forward A/B/C at 16k and 64k on six masks, two rounds: O_BUFFER off (three K/V slots), on (O in
# its own smem, two slots), and two slots without O's buffer (separates the lost slot from the
# early Q release and the overlapped O store).
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
timeout 200 python3 -m pytest -n 8 -q tests/magi_attention/kernels/test_triton_gpu.py \
    -k "gluon and o_buffer" > $OUT/s67_pytest_obuf_$SHA.log 2>&1
echo "pytest rc $?"; tail -3 $OUT/s67_pytest_obuf_$SHA.log
bash scripts/dev/_s67_ab.sh fwd O_BUFFER 2 "16384 65536" \
    "full causal causal_document block_causal_document full_document sliding_window_causal" \
    "O_BUFFER=0;O_BUFFER=1;NUM_BUF=2"
