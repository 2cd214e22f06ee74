#!/usr/bin/env bash
# Session 63, call 5 (nvidia-h200-x2, the session's last ~300 s of device time, Hydra from .whl):
# issue 15's worst cp 2 cell, Triton 16k causal_document (magi 0.96x / 0.95x HybridCP, fwd / bwd,
# session 52), with the forward's under-PV rule (magi's local rows are short: the plain wait
# now): magi against hybrid_cp, interleaved rounds (cp_ab.py), rows flushed as they come.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source scripts/device/wheels.sh
install_wheels .whl /tmp/site
export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-}
nvidia-smi -L
timeout --signal=INT --kill-after=15 ${AB_TIMEOUT:-190} torchrun --standalone --nproc-per-node 2 \
    scripts/dev/cp_ab.py --out $OUT --rounds 3 -- experiment=cp_h200x2 hardware=auto \
    local_kernel=triton 'cp=[magi,hybrid_cp]' mask=causal_document 'seqlen_per_gpu=[16384]' \
    'cp_sizes=[2]' 2>&1 | grep -v Warning | tail -25
