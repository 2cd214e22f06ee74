#!/usr/bin/env bash
# Steps of a GPU session on a device machine where stage_all.sh has installed the packages.
# Each step writes what it measures under $OUT as it goes (flat names: the device brings back
# files two folders deep at most), so a step cut by the call's time limit loses nothing.
#   bash scripts/device/gpu_session.sh tests 1|2|flashinfer  # pytest -m gpu tests, in shards
#   bash scripts/device/gpu_session.sh sweep NAME HW [hydra overrides...]
#   bash scripts/device/gpu_session.sh flashinfer-jit        # compile FlashInfer in the background
#   bash scripts/device/gpu_session.sh pack-caches           # compiled kernels -> $OUT/cache_*.tgz
#   bash scripts/device/gpu_session.sh unpack-caches DIR     # ... back on a fresh machine
# The whole `pytest -m gpu tests` runs longer than one call (10 min) on a fresh machine (every
# Triton and FA4 kernel compiles), so it runs as shards: 1 = everything but the Triton kernel
# tests and FlashInfer, 2 = tests/magi_attention/kernels/test_triton_gpu.py, flashinfer = its
# adapter tests (nvcc JIT at first use). Together they are the whole suite.
set -u
TRITON_TESTS=tests/magi_attention/kernels/test_triton_gpu.py
# compiled-kernel caches worth carrying to the next machine (same sm_90a on H100 and H200)
CACHES=(/root/.triton/cache "/tmp/$(id -un)/flash_attention_cute_dsl_cache" /root/peers_jit/.cache)
# shellcheck disable=SC1091
source /root/stage_env.sh 2>/dev/null || echo "no /root/stage_env.sh: run stage_all.sh install first"
OUT=${OUT:-/tmp/out}
RUNS=/root/runs

case "${1:-}" in
    tests)
        shard=${2:?tests 1|2|flashinfer}
        case "$shard" in
            1) args=(tests --ignore="$TRITON_TESTS" -k "not flashinfer") ;;
            2) args=("$TRITON_TESTS") ;;
            flashinfer) args=(tests/bench/kernels -k flashinfer) ;;
            *) echo "unknown shard $shard" >&2; exit 2 ;;
        esac
        set -o pipefail
        python3 -m pytest -m gpu "${args[@]}" -p no:cacheprovider -q -rs --durations=15 2>&1 \
            | tee "$OUT/pytest_gpu_shard_$shard.log" | tail -40
        ;;
    pack-caches)
        i=0
        for dir in "${CACHES[@]}"; do
            i=$((i + 1))
            [ -d "$dir" ] || continue
            tar -czf "$OUT/cache_$i.tgz" -C / "${dir#/}"
            size=$(stat -c %s "$OUT/cache_$i.tgz")
            # one file back is at most 16 MB
            [ "$size" -le 15000000 ] || { echo "$dir: $size bytes, too big to bring back"; rm "$OUT/cache_$i.tgz"; }
        done
        ls -la "$OUT"
        ;;
    unpack-caches)
        for f in "${2:?unpack-caches DIR}"/cache_*.tgz; do [ -e "$f" ] && tar -xzf "$f" -C /; done
        du -sh "${CACHES[@]}" 2>/dev/null
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
        # the runner names its file after the overrides ('=' and ',' do not come back): rename
        i=0
        for f in "$RUNS/$name"/kernels/*.csv; do
            [ -e "$f" ] || continue
            i=$((i + 1))
            cp "$f" "$OUT/${name}__$i.csv"
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
    *) echo "usage: gpu_session.sh tests 1|2|flashinfer|flashinfer-jit|sweep NAME HW [overrides]|pack-caches|unpack-caches DIR" >&2; false ;;
esac
