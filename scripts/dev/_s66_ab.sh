#!/usr/bin/env bash
# Session 66: an A/B of one module switch of the Gluon forward (fwd) or backward (bwd), arms 0
# and 1 alternating, each arm its own process (a switch is read at compile), ROUNDS rounds, the
# first round of arm 1 with --check; rows appended to $OUT/s66_<NAME>.csv.
#   bash scripts/dev/_s66_ab.sh DIRECTION NAME ROUNDS "SEQLENS" "MASKS" [EXTRA --variant ...]
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
DIR=$1; NAME=$2; ROUNDS=$3; SEQLENS=$4; MASKS=$5; shift 5
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/s66_$NAME.csv; LOG=$OUT/s66_$NAME.log
for r in $(seq 1 "$ROUNDS"); do
    for a in 0 1; do
        c=""; [ "$r" = 1 ] && [ $a = 1 ] && c=--check
        echo "== round $r $NAME=$a" >> "$LOG"
        timeout 170 python3 scripts/dev/fwd_fa4_probe.py --direction "$DIR" --seqlens $SEQLENS \
            --masks $MASKS --rounds 1 $c --variant "$NAME=$a" "$@" --label "$SHA $NAME=$a" \
            --out "$CSV" >> "$LOG" 2>&1 || echo "$NAME=$a round $r rc $?" | tee -a "$LOG"
    done
done
grep -E "^check|rc [0-9]|Error" "$LOG" | head -20
python3 - "$CSV" "$NAME" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
d = d[d.kernel != "fa4"]
t = d.groupby(["seqlen", "mask", "label"])["tflops"].median().unstack(2)
t["on/off"] = t.iloc[:, 1] / t.iloc[:, 0]
print(t.round(3).to_string())
PY
