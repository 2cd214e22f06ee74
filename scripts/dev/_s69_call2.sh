#!/usr/bin/env bash
# Session 69, call 2 (one H200): ncu of the Gluon forward on the full mask's grid tiles, the
# grid's kernel against the cut one (call 1: the cut kernel 0.956-0.969x, though the two
# kernels' step loops are instruction for instruction the same on the full steps' path, CPU
# SASS), then the backward's the same way (0.979-0.985x). Details and SASS source pages as csv.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/ncu
prof() {  # prof DIRECTION PLAN KERNEL_REGEX
    local name=$1_$2
    timeout 120 $NCU --kernel-name "regex:$3" --launch-skip 1 --launch-count 1 --set full \
        --import-source yes -f -o /tmp/ncu/$name python3 scripts/dev/fwd_fa4_probe.py \
        --direction "$1" --plan "$2" --one ffa --masks full --seqlens 16384 \
        > /tmp/ncu/$name.log 2>&1
    tail -2 /tmp/ncu/$name.log
    $NCU -i /tmp/ncu/$name.ncu-rep --csv --page details 2>/dev/null | grep -v '^==PROF==' \
        > /tmp/ncu/${name}_details.csv
    $NCU -i /tmp/ncu/$name.ncu-rep --csv --page source --print-source sass 2>/dev/null \
        | grep -v '^==PROF==' | gzip > /tmp/ncu/${name}_source_sass.csv.gz
}
prof fwd grid _fwd_kernel
prof fwd cut _fwd_kernel
prof bwd grid _bwd_kernel
prof bwd cut _bwd_kernel
rm -f /tmp/ncu/*.ncu-rep
tar czf $OUT/s69_ncu_cut.tgz -C /tmp/ncu .
ls -la /tmp/ncu
