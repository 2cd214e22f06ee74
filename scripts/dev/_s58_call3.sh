# session 58 call 3 (2 H200s): Triton 16k full and causal at cp 2, magi_timed beside magi and the
# six baselines (equal shares should be kept there)
set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-400} bash scripts/device/gpu_session.sh cp timed16kfc 2 experiment=cp_h200x2 hardware=auto local_kernel=triton hardware.rounds=3 \
  'mask=[full,causal]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
