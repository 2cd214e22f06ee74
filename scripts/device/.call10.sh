#!/usr/bin/env bash
# session 48 call 10 (4 GPUs, after staging): cp 4 queue A/B with the FA4 local kernel
source scripts/device/stage_all.sh install > $OUT/install.log 2>&1; tail -2 $OUT/install.log
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,nounits -l 1 > $OUT/clocks_fa4.csv &
for q in 8 1; do
  CUDA_DEVICE_MAX_CONNECTIONS=$q timeout 220 torchrun --standalone --nproc-per-node 4 scripts/dev/cp_ab.py --out $OUT/fa4_q$q --rounds 5 -- experiment=cp_h200x4 hardware=auto local_kernel=fa4 'cp=[magi,ulysses]' 'mask=[full_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[4]' > $OUT/fa4_q$q.log 2>&1
  echo "fa4 q$q rc $?"; grep -v -i warn $OUT/fa4_q$q.log | tail -8
done
