#!/usr/bin/env bash
# Session 63, call 4 (the machine still warm from call 3): the kernel_masks sweep at 64k, then
# ncu of the backward, FFA's Gluon kernel and FA4's SM90 kernel on full and causal 16k (a
# breakdown for the next session), the reports packed into one tarball.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
SWEEP_TIMEOUT=300 bash scripts/device/gpu_session.sh sweep kernel_masks_64k h200 experiment=kernel_masks \
    'kernel=[ffa,fa4,flex]' 'seqlens=[65536]'
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/ncu
for m in full causal; do
    timeout 90 $NCU --kernel-name regex:_bwd_kernel --launch-skip 1 --launch-count 1 --set full \
        --import-source yes -f -o /tmp/ncu/ffa_bwd_$m python3 scripts/dev/gluon_bwd_profile.py --mask $m \
        > /tmp/ncu/ffa_bwd_$m.log 2>&1
    timeout 120 $NCU --kernel-name regex:Backward --launch-skip 3 --launch-count 3 --set full \
        --import-source yes -f -o /tmp/ncu/fa4_bwd_$m python3 scripts/dev/fa4_bwd_once.py --mask $m \
        > /tmp/ncu/fa4_bwd_$m.log 2>&1
    for k in ffa fa4; do
        [ -f /tmp/ncu/${k}_bwd_$m.ncu-rep ] && $NCU -i /tmp/ncu/${k}_bwd_$m.ncu-rep --csv --page details \
            2>/dev/null | grep -v '^==PROF==' > /tmp/ncu/${k}_bwd_${m}_details.csv
        tail -2 /tmp/ncu/${k}_bwd_$m.log
    done
done
tar czf $OUT/s63_ncu_bwd.tgz -C /tmp/ncu .
ls -la /tmp/ncu
