# session 58 last call (2 H200s, fresh, ~200 s of budget): Triton 64k causal_document at cp 2,
# magi_timed beside magi and the six baselines (the runner keeps the rounds done by its limit)
set -u
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-175} bash scripts/device/gpu_session.sh cp tri64kcd 2 experiment=cp_h200x2 hardware=auto local_kernel=triton hardware.rounds=3 \
  'mask=[causal_document]' 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
