# session 59 call 3 (the same 4 H200s, FA4 staged): two cp 2 runs at once, 64k a GPU, magi and
# magi_timed beside the six baselines: GPUs 0-1 FA4's block_causal_document, GPUs 2-3 Triton's
# full_document and block_causal_document (the issue-15 64k cells magi_timed has not run on)
set -u
source /root/stage_env.sh
common=(experiment=cp_h200x2 hardware=auto hardware.rounds=3 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]'
        'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]')
CUDA_VISIBLE_DEVICES=0,1 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-540} bash scripts/device/gpu_session.sh cp fa464kbcd 2 \
  "${common[@]}" local_kernel=fa4 'mask=[block_causal_document]' > $OUT/fa464kbcd.log 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-540} bash scripts/device/gpu_session.sh cp tri64kdocs 2 \
  "${common[@]}" local_kernel=triton 'mask=[full_document,block_causal_document]' > $OUT/tri64kdocs.log 2>&1 &
wait
for f in $OUT/fa464kbcd.log $OUT/tri64kdocs.log; do echo "== $f"; grep -v "UserWarning\|return func" $f | tail -25; done
