#!/usr/bin/env bash
# An A/B/C of Gluon kernel arms through fwd_fa4_probe.py: arms alternating, each arm its own
# process (a module switch is read at compile), ROUNDS rounds, every arm's first round with
# --check; rows appended to $OUT/<NAME>.csv, then the median table per arm and each arm's ratio
# to the first (the drift between processes of one arm was 0.98-1.02 in sessions 64-68).
#   bash scripts/dev/kernel_arms_ab.sh DIRECTION NAME ROUNDS "SEQLENS" "MASKS" "ARM1;ARM2;..."
#   an arm is one or more NAME=INT separated by commas, e.g. "O_BUFFER=0;O_BUFFER=1;NUM_BUF=2",
#   or module=NAME: a forward module of magi_attention.kernels.triton in gluon_forward's place,
#   or plan=grid|cut|pick|grid_both: the probed direction's tile plan (fwd_fa4_probe.py --plan)
# CLOCKS=1: nvidia-smi samples the SM clock and the board power every 100 ms while each arm's
# process runs; $OUT/<NAME>_clocks.csv gets a row an arm process (medians over the samples at
# more than 300 W, i.e. while kernels run), so a difference between arms can be read against
# the clock it ran at (a power-bound arm runs at a lower clock).
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
DIR=$1; NAME=$2; ROUNDS=$3; SEQLENS=$4; MASKS=$5; ARMS=$6
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
CSV=$OUT/$NAME.csv; LOG=$OUT/$NAME.log
IFS=';' read -ra ARM_LIST <<< "$ARMS"
for r in $(seq 1 "$ROUNDS"); do
    for arm in "${ARM_LIST[@]}"; do
        c=""; [ "$r" = 1 ] && c=--check
        v=(); IFS=',' read -ra sw <<< "$arm"
        for s in "${sw[@]}"; do  # module=NAME: that forward module in place of gluon_forward
            case $s in
                module=*) v+=(--fwd-module "${s#module=}") ;;
                plan=*) v+=(--plan "${s#plan=}") ;;
                *) v+=(--variant "$s") ;;
            esac
        done
        echo "== round $r $arm" >> "$LOG"
        if [ "${CLOCKS:-0}" = 1 ]; then
            nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu \
                --format=csv,noheader,nounits -lms 100 > "$OUT/.smi" 2>/dev/null &
            smi=$!
        fi
        timeout 170 python3 scripts/dev/fwd_fa4_probe.py --direction "$DIR" --seqlens $SEQLENS \
            --masks $MASKS --rounds 1 $c "${v[@]}" --label "$SHA $arm" \
            --out "$CSV" >> "$LOG" 2>&1 || echo "$arm round $r rc $?" | tee -a "$LOG"
        if [ "${CLOCKS:-0}" = 1 ]; then
            kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
            python3 - "$OUT/.smi" "$r" "$arm" "$OUT/${NAME}_clocks.csv" <<'PY'
import csv, os, statistics, sys
path, rnd, arm, out = sys.argv[1:]
rows = []
for line in open(path):
    try:
        rows.append([float(x) for x in line.split(",")])
    except ValueError:
        pass
busy = [r for r in rows if r[1] > 300]
new = not os.path.exists(out)
with open(out, "a", newline="") as f:
    w = csv.writer(f)
    if new:
        w.writerow(["round", "arm", "busy_samples", "sm_mhz_median", "power_w_median", "temp_c_max"])
    w.writerow([rnd, arm, len(busy),
                statistics.median(r[0] for r in busy) if busy else "",
                statistics.median(r[1] for r in busy) if busy else "",
                max((r[2] for r in rows), default="")])
PY
        fi
    done
done
grep -E "^check|rc [0-9]|Error" "$LOG" | head -20
python3 - "$CSV" "${ARM_LIST[0]}" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
d = d[d.kernel != "fa4"]
t = d.groupby(["seqlen", "mask", "label"])["tflops"].median().unstack(2)
base = [c for c in t.columns if c.endswith(" " + sys.argv[2])][0]
for c in list(t.columns):
    if c != base:
        t[c.split(" ", 1)[1] + "/base"] = t[c] / t[base]
print(t.round(3).to_string())
PY
