# session 61 call 3 (4 H200s, FA4 staged: run after `stage 1..4` with carry .stage/5): install,
# then the NCCL exactness / no-sync tests of the CP runtime at HEAD, every overlap mode, Triton on
# GPUs 0-1 and FA4 on GPUs 2-3 at once (issue 15: the GPU equality check after the changes)
set -u
start=$(date +%s)
source scripts/device/stage_all.sh install > "$OUT/install.log" 2>&1
tail -2 "$OUT/install.log"
left=$(( 570 - ($(date +%s) - start) ))
echo "tests get ${left}s"
sha=$(git rev-parse --short=12 HEAD 2>/dev/null || python3 -c "import json;print(json.load(open('PROVENANCE.json'))['git_sha'][:12])")
for backend in triton fa4; do
    gpus=0,1; [ "$backend" = fa4 ] && gpus=2,3
    CUDA_VISIBLE_DEVICES=$gpus timeout "$left" python3 -m pytest -m gpu -p no:cacheprovider -v -rfEs \
        tests/magi_attention/api/test_magi_attn_nccl.py -k "$backend" \
        > "$OUT/pytest_nccl_${backend}_${sha}.log" 2>&1 &
done
wait
for f in "$OUT"/pytest_nccl_*.log; do echo "== $f"; grep -E "PASSED|FAILED|ERROR|passed|failed" "$f" | tail -20; done
