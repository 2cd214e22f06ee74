# session 61 call 2 (4 H200s, FA4 staged: run after `stage 1..4` with carry .stage/5): install,
# then the cut backward at cp 4 under both clocks with FA4 (full / causal: magi, magi_whole,
# magi_cut_bwd, magi_cut_fwd, ulysses; FA4 16k causal cp 4's official key timed the cut forward
# 1.4-1.6% faster and ran whole).
set -u
start=$(date +%s)
source scripts/device/stage_all.sh install > "$OUT/install.log" 2>&1
tail -3 "$OUT/install.log"
left=$(( 575 - ($(date +%s) - start) ))
echo "cp 4 probe gets ${left}s"
CUDA_VISIBLE_DEVICES=0,1,2,3 timeout "$left" torchrun --standalone --nproc-per-node 4 scripts/dev/cp_ab.py \
    --out "$OUT/cbfa4" --rounds 3 --clock both -- experiment=cp_h200x4 hardware=auto local_kernel=fa4 \
    'cp=[magi,magi_whole,magi_cut_bwd,magi_cut_fwd,ulysses]' 'mask=[full,causal]' 'seqlen_per_gpu=[16384]' \
    'cp_sizes=[4]' > "$OUT/cbfa4.log" 2>&1
echo "cbfa4 rc $?" >> "$OUT/cbfa4.log"
tar czf "$OUT/cbfa4.tgz" -C "$OUT" cbfa4 2>/dev/null
grep "rounds\| rc " "$OUT/cbfa4.log" | tail -44
