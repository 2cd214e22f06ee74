# session 60 call 1 (4 H200s, fresh, Triton wheels): GPUs 0-1 Triton 64k full at cp 2 with magi,
# magi_timed and the six baselines (issue 15's last cell without magi_timed); GPUs 2-3 at once
# the bench-vs-key probe at cp 2 (cp_ab.py --clock both: each block timed the runner's way and
# the key's way in turn; does magi fall more than the baselines under the key's clock?)
set -u
nvidia-smi -L
n=$(nvidia-smi -L | wc -l); [ "$n" -ge 4 ] || { echo "only $n GPUs: stopping"; exit 3; }
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
CUDA_VISIBLE_DEVICES=0,1 SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-545} bash scripts/device/gpu_session.sh cp tri64kfull 2 \
  experiment=cp_h200x2 hardware=auto local_kernel=triton hardware.rounds=3 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]' \
  'cp=[magi,magi_timed,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 'mask=[full]' > $OUT/tri64kfull.log 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=2,3
  timeout 300 torchrun --standalone --nproc-per-node 2 scripts/dev/cp_ab.py --out $OUT/kc2 --rounds 3 --clock both -- \
    experiment=cp_h200x2 hardware=auto local_kernel=triton 'cp=[magi,ulysses,hybrid_cp]' \
    'mask=[full,causal,block_causal_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]' > $OUT/kc2.log 2>&1
  echo "kc2 rc $?" >> $OUT/kc2.log
) &
wait
tar czf $OUT/kc2.tgz -C $OUT kc2 2>/dev/null
for f in $OUT/kc2.log $OUT/tri64kfull.log; do echo "== $f"; grep -v "UserWarning\|return func" $f | tail -30; done
