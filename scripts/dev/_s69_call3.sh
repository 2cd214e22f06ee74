#!/usr/bin/env bash
# Session 69, call 3 (one H200): why the forward's cut kernel on the full mask's grid tiles ran
# 0.956-0.969x the grid's in call 1 while ncu (clocks locked at base) gave both the same cycles
# (21.33 M cut, 21.43 M grid) and the same instructions, but L2 throughput 42% against 25%.
# (1) The forward A/B again with nvidia-smi's clock and power per arm, and a third arm: the grid
# kernel with the cut plan built too (the cut arm's allocations, the grid's kernel).
# (2) ncu at the GPU's own clocks (--clock-control none), each arm, a few duration and L2
# metrics, and the raw page of a base-clock full set for the L2 breakdown.
set -u
export PYTHONPATH=$PWD:${PYTHONPATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
CLOCKS=1 bash scripts/dev/kernel_arms_ab.sh fwd s69_FWDCUT_CLK 2 "16384 65536" "full" \
    "plan=grid;plan=cut;plan=grid_both"
cat "$OUT/s69_FWDCUT_CLK_clocks.csv"
NCU=/usr/local/cuda/bin/ncu
mkdir -p /tmp/ncu
M=gpu__time_duration.sum,sm__cycles_elapsed.max,gpc__cycles_elapsed.avg.per_second,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_l1.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum
for plan in grid cut grid_both; do
    timeout 90 $NCU --kernel-name regex:_fwd_kernel --launch-skip 2 --launch-count 3 \
        --clock-control none --cache-control none --metrics $M --csv \
        python3 scripts/dev/fwd_fa4_probe.py --direction fwd --plan $plan --one ffa --calls 5 \
        --masks full --seqlens 16384 2>&1 | grep -v '^==PROF==' > /tmp/ncu/boost_$plan.csv
    grep -E "gpu__time_duration|sm__cycles_elapsed.max|lts__t_sectors.sum|fabric" /tmp/ncu/boost_$plan.csv | tail -8
done
for plan in grid cut; do
    timeout 90 $NCU --kernel-name regex:_fwd_kernel --launch-skip 1 --launch-count 1 --set full \
        -f -o /tmp/ncu/raw_$plan python3 scripts/dev/fwd_fa4_probe.py --direction fwd \
        --plan $plan --one ffa --masks full --seqlens 16384 > /dev/null 2>&1
    $NCU -i /tmp/ncu/raw_$plan.ncu-rep --csv --page raw 2>/dev/null | grep -v '^==PROF==' \
        > /tmp/ncu/raw_$plan.csv
done
rm -f /tmp/ncu/*.ncu-rep
tar czf $OUT/s69_ncu_fwd_l2.tgz -C /tmp/ncu .
