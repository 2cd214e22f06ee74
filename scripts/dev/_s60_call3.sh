# session 60 call 3 (4 H200s, FA4 staged on a fresh machine): the cut's threshold lowered to 1%
# (magi_attention/api/_tune_cut.py). GPUs 0-1: FA4 64k full at cp 2 again (session 60's key
# kept the forward whole at a 1.99% gain and lost 3.8% to the rings); GPUs 2-3 at once: FA4 16k
# at cp 2, the five masks, to see the 1% rule where the cut's timings are noisiest
set -u
source /root/stage_env.sh
common=(experiment=cp_h200x2 hardware=auto local_kernel=fa4 hardware.rounds=3 'cp_sizes=[2]'
        'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]')
CUDA_VISIBLE_DEVICES=0,1 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-480} bash scripts/device/gpu_session.sh cp fa464kfull 2 \
  "${common[@]}" 'seqlen_per_gpu=[65536]' 'mask=[full]' > $OUT/fa464kfull.log 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-480} bash scripts/device/gpu_session.sh cp fa416k 2 \
  "${common[@]}" 'seqlen_per_gpu=[16384]' > $OUT/fa416k.log 2>&1 &
wait
for f in $OUT/fa464kfull.log $OUT/fa416k.log; do echo "== $f"; grep -v "UserWarning\|return func\|generate_mlir\|^W1" $f | tail -14; done
