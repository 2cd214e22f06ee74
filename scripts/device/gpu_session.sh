#!/usr/bin/env bash
# Steps of a GPU session on a device machine where stage_all.sh has installed the packages.
# Each step writes what it measures under $OUT as it goes (flat names: the device brings back
# files two folders deep at most), so a step cut by the call's time limit loses nothing.
#   bash scripts/device/gpu_session.sh tests                 # pytest -m gpu tests (no FlashInfer)
#   bash scripts/device/gpu_session.sh sweep NAME HW [hydra overrides...]
#   bash scripts/device/gpu_session.sh flashinfer-jit        # compile FlashInfer in the background
set -u
# shellcheck disable=SC1091
source /root/stage_env.sh 2>/dev/null || echo "no /root/stage_env.sh: run stage_all.sh install first"
OUT=${OUT:-/tmp/out}
RUNS=/root/runs

case "${1:-}" in
    tests)
        set -o pipefail
        python3 -m pytest -m gpu tests -k "not flashinfer" -p no:cacheprovider -q -rs 2>&1 \
            | tee "$OUT/pytest_gpu.log" | tail -25
        ;;
    flashinfer-jit)
        # nvcc builds FlashInfer's kernels at first use (minutes); doing it beside the GPU runs
        # keeps it off the device clock. Its log says when it is done.
        setsid nohup python3 -m pytest -m gpu tests/bench/kernels -k flashinfer -p no:cacheprovider \
            -q -rs > /root/flashinfer_jit.log 2>&1 < /dev/null &
        echo "FlashInfer JIT started (pid $!)"
        ;;
    sweep)
        name=${2:?sweep NAME HW [overrides]}; hw=${3:?hardware}; shift 3
        python3 -m bench.kernels hardware="$hw" out_dir="$RUNS/$name" report=false progress=false "$@" \
            2>&1 | tail -15
        for f in "$RUNS/$name"/kernels/*.csv; do
            [ -e "$f" ] && cp "$f" "$OUT/${name}__$(basename "$f")"
        done
        python3 - "$OUT" "$name" <<'EOF'
import glob, sys
import pandas as pd
files = glob.glob(f"{sys.argv[1]}/{sys.argv[2]}__*.csv")
if files:
    d = pd.concat(pd.read_csv(f) for f in files)
    print(d.groupby(["kernel", "status"]).size().unstack(fill_value=0).to_string())
EOF
        ;;
    *) echo "usage: gpu_session.sh tests|flashinfer-jit|sweep NAME HW [overrides]" >&2; false ;;
esac
