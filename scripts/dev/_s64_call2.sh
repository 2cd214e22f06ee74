#!/usr/bin/env bash
# Session 64, call 2 (warm from call 1): the backward arms' rounds 2 and 3, then ncu of the
# backward by instruction (FFA's Gluon kernel and FA4's SM90 kernel, full 16k), the source
# pages exported as csv and packed into one tarball.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
for r in 2 3; do bash scripts/dev/_s64_arms.sh bwd $r; done
grep -E "failed|Error" $OUT/s64_bwd_arms.log | head -20
python3 scripts/dev/_s64_summary.py $OUT/s64_bwd_arms.csv
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/ncu
timeout 90 $NCU --kernel-name regex:_bwd_kernel --launch-skip 1 --launch-count 1 --set full \
    --import-source yes -f -o /tmp/ncu/ffa_bwd_full python3 scripts/dev/gluon_bwd_profile.py --mask full \
    > /tmp/ncu/ffa_bwd_full.log 2>&1
timeout 120 $NCU --kernel-name regex:bwd_sm90 --launch-skip 1 --launch-count 1 --set full \
    --import-source yes -f -o /tmp/ncu/fa4_bwd_full python3 scripts/dev/fa4_bwd_once.py --mask full \
    > /tmp/ncu/fa4_bwd_full.log 2>&1
for k in ffa fa4; do
    r=/tmp/ncu/${k}_bwd_full.ncu-rep
    if [ -f $r ]; then
        $NCU -i $r --csv --page details 2>/dev/null | grep -v '^==PROF==' > /tmp/ncu/${k}_details.csv
        $NCU -i $r --csv --page source --print-source sass 2>/dev/null | grep -v '^==PROF==' \
            | gzip > /tmp/ncu/${k}_source_sass.csv.gz
    fi
    tail -3 /tmp/ncu/${k}_bwd_full.log
done
rm -f /tmp/ncu/*.ncu-rep.gz
tar czf $OUT/s64_ncu_bwd.tgz -C /tmp/ncu .
ls -la /tmp/ncu
