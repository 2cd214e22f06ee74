#!/usr/bin/env bash
# session 48 call 9 (4 GPUs): cp 4 queue A/B (Triton), then early_start's third arm on GPUs 0-1
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader
source scripts/device/wheels.sh; install_wheels .whl /tmp/site > /dev/null; export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,nounits -l 1 > $OUT/clocks.csv &
for q in 8 1; do
  CUDA_DEVICE_MAX_CONNECTIONS=$q timeout 200 torchrun --standalone --nproc-per-node 4 scripts/dev/cp_ab.py --out $OUT/q$q --rounds 5 -- experiment=cp_h200x4 hardware=auto local_kernel=triton 'cp=[magi,ulysses]' 'mask=[full_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[4]' > $OUT/q$q.log 2>&1
  echo "q$q rc $?"; grep -v -i warn $OUT/q$q.log | tail -8
done
CUDA_VISIBLE_DEVICES=0,1 timeout 240 torchrun --standalone --nproc-per-node 2 scripts/dev/cp_ab.py --out $OUT/early --rounds 7 -- experiment=cp_h200x2 hardware=auto local_kernel=triton 'cp=[magi,magi_early_layout,magi_early,hybrid_cp]' 'mask=[causal_document,full_document,block_causal_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]' > $OUT/early.log 2>&1
echo "early rc $?"; grep -v -i warn $OUT/early.log | tail -30
