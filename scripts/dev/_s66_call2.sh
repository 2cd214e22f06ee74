#!/usr/bin/env bash
# Session 66, call 2 (warm): the backward's KV_SECTIONS A/B, 16k on six masks and 64k on two
# document masks (the host model: 16k document masks' span 3-5% shorter, the rest unchanged),
# two rounds; then the section order on the counter-fed forward grid (LPT_DYNAMIC, DYNAMIC on).
set -u
bash scripts/dev/_s66_ab.sh bwd KV_SECTIONS 2 "16384" \
    "full causal causal_document block_causal_document full_document sliding_window_causal"
bash scripts/dev/_s66_ab.sh bwd KV_SECTIONS 2 "65536" "causal_document full_document"
bash scripts/dev/_s66_ab.sh fwd LPT_DYNAMIC 2 "16384 65536" \
    "full causal causal_document block_causal_document full_document" --variant DYNAMIC=1
