# session 59 call 2 (the same 4 H200s, after `stage_all.sh stage 1..4`): FA4 staged, then FA4 at
# cp 4, 16k a GPU, the five masks, magi and magi_timed beside the six baselines
set -u
source scripts/device/stage_all.sh install || exit 1
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-520} bash scripts/device/gpu_session.sh cp fa416kcp4 4 experiment=cp_h200x4 hardware=auto local_kernel=fa4 hardware.rounds=3 \
  'cp_sizes=[4]' 'seqlen_per_gpu=[16384]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 2>&1 | grep -v "UserWarning\|return func"
