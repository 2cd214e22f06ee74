#!/usr/bin/env bash
# The CP benchmark on one multi-GPU node (nvidia-h200-x4 or -x2): issue 15's cp 4 check
# (configs/experiment/cp_h200x4.yaml: MagiAttention, magi_unequal and every baseline, the five
# masks, cp 1 and 4 at 16k tokens per GPU; on a 2-GPU node the cp 4 rows become "unsupported:
# needs cp_size ranks"). One torchrun launch covers every cp_size.
#
# The device image has no Hydra; its wheels travel in .whl (pure Python, ~400 KB):
#   here:    bash tools/device/cp_sweep.sh wheels        # fills .whl/, git-ignored
#   device:  bash tools/device/cp_sweep.sh               # run(carry=[".whl"], kind=nvidia-h200-x4)
# Rows go to $OUT/results/<hw>/cp/, figures to $OUT/plots/<hw>/cp/; copy them into results/ and
# plots/ here. Extra arguments go to Hydra (e.g. 'seqlen_per_gpu=[8192]' 'mask=[causal]').
# CP_SWEEP_TIMEOUT (default 450 s) stops the sweep in time for the figures: rows measured so far
# are kept, and a rerun into the same folder skips them.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"
cd "$(dirname "$0")/../.."

HYDRA_WHEELS="hydra-core==1.3.8 omegaconf==2.3.1"
ANTLR="antlr4-python3-runtime==4.9.3"   # sdist only on PyPI: built into a wheel here

if [ "${1:-}" = "wheels" ]; then
    mkdir -p .whl
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp -d .whl $HYDRA_WHEELS || exit 1
    python3 -m pip wheel -q --no-deps -w .whl "$ANTLR" || exit 1
    ls -la .whl
    exit 0
fi

# NVLink multicast stays off (KINDS.md): NCCL, PyTorch symmetric memory, NVSHMEM
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONPATH="$PWD:${PYTHONPATH:-}"
if ! python3 -c "import hydra" 2>/dev/null; then
    [ -d .whl ] || { echo "no Hydra and no .whl: run 'bash $0 wheels' here and carry .whl"; exit 1; }
    install_wheels .whl /tmp/site || exit 1
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

OUT=${OUT:-out}
HW=${HW:-h200}
NGPU=$(nvidia-smi -L | wc -l)
echo "cp_sweep: $NGPU GPUs, hardware=$HW, out=$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1
nvidia-smi topo -m 2>/dev/null | head -8

timeout --signal=INT --kill-after=20 "${CP_SWEEP_TIMEOUT:-450}" \
    python3 -m torch.distributed.run --standalone --nproc-per-node="$NGPU" -m bench.cp \
    experiment=cp_h200x4 hardware="$HW" out_dir="$OUT/results/$HW" plots_dir="$OUT/plots/$HW" \
    progress=false report=false "$@"
status=$?
echo "sweep exit status $status"
python3 -m bench.cp.plot --results "$OUT/results/$HW/cp" --out "$OUT/plots/$HW/cp"
exit $status
