#!/usr/bin/env bash
# session 48 call 7: install the staged wheels, then issue 14's kernel masks at 16k on one H200
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
git log -1 --format=%h 2>/dev/null; cat PROVENANCE.json 2>/dev/null | head -5
source scripts/device/stage_all.sh install > $OUT/install.log 2>&1; tail -3 $OUT/install.log
SWEEP_TIMEOUT=520 bash scripts/device/gpu_session.sh sweep kmask16k h200 experiment=kernel_masks 'kernel=[ffa,fa4,flex]' 'seqlens=[16384]'
