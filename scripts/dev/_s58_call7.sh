# session 58 call 7 (same machine): FA4 64k causal_document, full_document at cp 2,
# magi_timed beside magi and the six baselines
set -u
source /root/stage_env.sh
python3 -c "import flash_attn.cute, hydra" && echo fa4 hydra ok
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-480} bash scripts/device/gpu_session.sh cp fa4timed64kcd 2 experiment=cp_h200x2 hardware=auto local_kernel=fa4 hardware.rounds=3 \
  'mask=[causal_document,full_document]' 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
