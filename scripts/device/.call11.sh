#!/usr/bin/env bash
# session 48 call 11 (2 GPUs): early_start's third arm; then, on H200s, issue 15's Triton 16k
# document masks at cp 1 and 2 under one queue (bench.cp's default)
nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv,noheader
source scripts/device/wheels.sh; install_wheels .whl /tmp/site > /dev/null; export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,nounits -l 1 > $OUT/clocks_early.csv &
smi=$!
timeout 260 torchrun --standalone --nproc-per-node 2 scripts/dev/cp_ab.py --out $OUT/early --rounds 7 -- experiment=cp_h200x2 hardware=auto local_kernel=triton 'cp=[magi,magi_early_layout,magi_early,hybrid_cp]' 'mask=[causal_document,full_document,block_causal_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]' > $OUT/early.log 2>&1
echo "early rc $?"; grep -v -i warn $OUT/early.log | tail -25
kill $smi
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SWEEP_TIMEOUT=300 bash scripts/device/gpu_session.sh cp triton16kdoc 2 experiment=cp_h200x2 hardware=auto local_kernel=triton 'cp=[magi,magi_unequal,single_gpu,ulysses,ring_p2p,ring_allgather,usp,loongtrain,hybrid_cp]' 'mask=[full_document,causal_document,block_causal_document]' 'cp_sizes=[1,2]' 'seqlen_per_gpu=[16384]' hardware.rounds=3 2>&1 | grep -v -i warn | tail -30
fi
