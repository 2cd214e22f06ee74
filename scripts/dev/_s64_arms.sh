#!/usr/bin/env bash
# Session 64: one round of the prepared switch arms, each in its own process (the switches are
# read at compile), appended to $OUT/s64_<direction>_arms.csv.
#   bash scripts/dev/_s64_arms.sh fwd ROUND [--check]   # HOIST_MASK_LOADS x PREFETCH_ITEM
#   bash scripts/dev/_s64_arms.sh bwd ROUND [--check]   # EARLY_EMPTY, DS_FREE, DS_STORE_BARRIER
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
DIR=$1; ROUND=$2; CHECK=${3:-}
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s64_${DIR}_arms.csv
LOG=$OUT/s64_${DIR}_arms.log
if [ "$DIR" = fwd ]; then
    NAMES=(HOIST_MASK_LOADS PREFETCH_ITEM)
    ARMS=("0 0" "1 0" "0 1" "1 1")
    MASKS="full causal causal_document sliding_window_causal"
else
    NAMES=(EARLY_EMPTY DS_FREE DS_STORE_BARRIER)
    ARMS=("0 1 1" "1 0 0" "1 1 1" "0 0 1" "0 1 0")
    MASKS="full causal causal_document"
fi
for arm in "${ARMS[@]}"; do
    flags=(); label="$SHA"
    for i in "${!NAMES[@]}"; do
        v=$(echo $arm | cut -d' ' -f$((i + 1)))
        flags+=(--variant "${NAMES[$i]}=$v"); label="$label ${NAMES[$i]}=$v"
    done
    echo "== round $ROUND $DIR arm $arm" >> $LOG
    timeout 150 python3 scripts/dev/fwd_fa4_probe.py --direction $DIR --seqlens 16384 \
        --masks $MASKS --rounds 1 $CHECK "${flags[@]}" --label "$label" --out $CSV >> $LOG 2>&1 \
        || echo "arm $arm round $ROUND failed rc $?" >> $LOG
done
