#!/usr/bin/env bash
# session 48 call 8: issue 14's kernel masks at 64k on the same H200
source /root/stage_env.sh
SWEEP_TIMEOUT=540 bash scripts/device/gpu_session.sh sweep kmask64k h200 experiment=kernel_masks 'kernel=[ffa,fa4,flex]' 'seqlens=[65536]'
