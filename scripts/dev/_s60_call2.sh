# session 60 call 2 (the same 4 H200s, FA4 staged): GPUs 0-1 FA4 64k full at cp 2 with magi,
# magi_timed and the six baselines; GPUs 2-3 at once the bench-vs-key probe at cp 2 with FA4
set -u
source /root/stage_env.sh
CUDA_VISIBLE_DEVICES=0,1 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-500} bash scripts/device/gpu_session.sh cp fa464kfull 2 \
  experiment=cp_h200x2 hardware=auto local_kernel=fa4 hardware.rounds=3 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 'mask=[full]' > $OUT/fa464kfull.log 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=2,3
  timeout 300 torchrun --standalone --nproc-per-node 2 scripts/dev/cp_ab.py --out $OUT/kf2 --rounds 3 --clock both -- \
    experiment=cp_h200x2 hardware=auto local_kernel=fa4 'cp=[magi,ulysses,hybrid_cp]' \
    'mask=[full,causal,block_causal_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]' > $OUT/kf2.log 2>&1
  echo "kf2 rc $?" >> $OUT/kf2.log
) &
wait
tar czf $OUT/kf2.tgz -C $OUT kf2 2>/dev/null
for f in $OUT/kf2.log $OUT/fa464kfull.log; do echo "== $f"; grep -v "UserWarning\|return func" $f | tail -30; done
