# session 61 call 1 (4 H200s, fresh, Triton wheels). GPUs 0-1: the forward's 1% rule where it now
# decides differently (Triton 16k causal cp 2: magi, magi_whole, magi_cut_fwd, ring_allgather);
# GPUs 2-3 at once: the same question on Triton 64k full_document cp 2 (its key timed the cut
# forward 1.4% faster). Then all four GPUs: the cut backward at cp 4 under both clocks (Triton
# full / causal: magi, magi_whole, magi_cut_bwd, ulysses).
set -u
start=$(date +%s)
nvidia-smi -L
n=$(nvidia-smi -L | wc -l); [ "$n" -ge 4 ] || { echo "only $n GPUs: stopping"; exit 3; }
source scripts/device/wheels.sh; install_wheels .whl /tmp/site >/dev/null; export PYTHONPATH=$PWD:/tmp/site
ab() {  # ab NAME GPUS NPROC TIMEOUT [cp_ab args...]
    local name=$1 gpus=$2 nproc=$3 limit=$4; shift 4
    CUDA_VISIBLE_DEVICES=$gpus timeout "$limit" torchrun --standalone --nproc-per-node "$nproc" \
        scripts/dev/cp_ab.py --out "$OUT/$name" "$@" > "$OUT/$name.log" 2>&1
    echo "$name rc $?" >> "$OUT/$name.log"
    tar czf "$OUT/$name.tgz" -C "$OUT" "$name" 2>/dev/null
}
ab cf 0,1 2 250 --rounds 5 -- experiment=cp_h200x2 hardware=auto local_kernel=triton \
    'cp=[magi,magi_whole,magi_cut_fwd,ring_allgather]' 'mask=[causal]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]' &
ab cf64 2,3 2 250 --rounds 3 -- experiment=cp_h200x2 hardware=auto local_kernel=triton \
    'cp=[magi,magi_whole,magi_cut_fwd,usp]' 'mask=[full_document]' 'seqlen_per_gpu=[65536]' 'cp_sizes=[2]' &
wait
left=$(( 575 - ($(date +%s) - start) ))
echo "cp 4 probe gets ${left}s"
ab cbtri 0,1,2,3 4 "$left" --rounds 3 --clock both -- experiment=cp_h200x4 hardware=auto local_kernel=triton \
    'cp=[magi,magi_whole,magi_cut_bwd,ulysses]' 'mask=[full,causal]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[4]'
for f in cf cf64 cbtri; do echo "== $f"; grep "rounds\| rc " "$OUT/$f.log" | tail -34; done
