#!/usr/bin/env bash
# Session 62, call 1 (one H200, FA4 staged by the call before): FFA's Gluon forward against
# FA4's SM90 forward at 16k, timed (interleaved rounds) and under ncu (one launch each, full set).
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
NCU=/usr/local/cuda/bin/ncu
SHA=$(python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])" 2>/dev/null || echo unknown)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > $OUT/gpu.txt
timeout 150 python3 scripts/dev/fwd_fa4_probe.py --seqlens 16384 --masks full causal --rounds 3 \
    --label $SHA --out $OUT/s62_fwd_fa4_time.csv > $OUT/s62_time.log 2>&1
for k in ffa fa4; do
    for m in full causal; do
        timeout 120 $NCU --kernel-name regex:'[Ff]orward|_fwd_kernel' --launch-skip 1 --launch-count 1 \
            --set full --import-source no -o /tmp/${k}_$m -f \
            python3 scripts/dev/fwd_fa4_probe.py --one $k --masks $m > $OUT/ncu_${k}_$m.log 2>&1
        $NCU --import /tmp/${k}_$m.ncu-rep --csv --page details > $OUT/s62_ncu_${k}_${m}_details.csv 2>>$OUT/ncu_${k}_$m.log
        $NCU --import /tmp/${k}_$m.ncu-rep --csv --page source --print-source sass 2>>$OUT/ncu_${k}_$m.log \
            | gzip > $OUT/s62_ncu_${k}_${m}_sass.csv.gz
    done
done
ls -la $OUT
