#!/usr/bin/env bash
# Session 63, call 3 (one H200, FA4 staged): the kernel_masks sweep at 16k with ffa / fa4 / flex
# (the forward's under-PV rule at HEAD).
set -u
SWEEP_TIMEOUT=520 bash scripts/device/gpu_session.sh sweep kernel_masks_16k h200 experiment=kernel_masks \
    'kernel=[ffa,fa4,flex]' 'seqlens=[16384]'
