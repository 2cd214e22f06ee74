# session 58 call 5 (2 H200s, after `stage_all.sh stage 1..4`): FA4 16k document cells at cp 2,
# magi_timed beside magi and the six baselines
set -u
source scripts/device/stage_all.sh install > $OUT/install.log 2>&1 || { tail $OUT/install.log; exit 1; }
python3 -c "import flash_attn.cute, hydra" && echo fa4 hydra ok
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-520} bash scripts/device/gpu_session.sh cp fa4timed16k 2 experiment=cp_h200x2 hardware=auto local_kernel=fa4 hardware.rounds=3 \
  'mask=[full_document,causal_document,block_causal_document]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
