# session 58 call 2 (2 H200s): dispatch_alg="timed"'s NCCL test (Triton), then Triton's 16k
# document cells at cp 2 with magi, magi_timed, magi_unequal and the six baselines
set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
timeout 150 python3 -m pytest -m gpu -p no:cacheprovider -q -rfE -s tests/magi_attention/api/test_magi_attn_nccl.py -k "dispatch_timed and triton" > $OUT/timed_nccl_test.log 2>&1
echo "nccl test: $(tail -1 $OUT/timed_nccl_test.log)"; grep -E "dispatch_ms=|FAIL|ERROR" $OUT/timed_nccl_test.log | head -12
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-420} bash scripts/device/gpu_session.sh cp timed16k 2 experiment=cp_h200x2 hardware=auto local_kernel=triton hardware.rounds=3 \
  'mask=[full_document,causal_document,block_causal_document]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,magi_unequal,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]'
