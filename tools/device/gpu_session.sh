#!/usr/bin/env bash
# Steps of a GPU session on a device machine where stage_all.sh has installed the packages.
# Each step writes what it measures under $OUT as it goes (flat names: the device brings back
# files two folders deep at most), so a step cut by the call's time limit loses nothing.
#   bash tools/device/gpu_session.sh tests 1|2|all|flashinfer [WORKERS]  # pytest -m gpu tests
#   bash tools/device/gpu_session.sh sweep NAME HW [hydra overrides...]   # python -m bench.kernels
#   bash tools/device/gpu_session.sh cp NAME NPROC [hydra overrides...]   # torchrun -m bench.cp
#   bash tools/device/gpu_session.sh flashinfer-jit        # compile FlashInfer in the background
#   bash tools/device/gpu_session.sh pack-caches           # compiled kernels -> $OUT/cache_*.tgz
#   bash tools/device/gpu_session.sh unpack-caches DIR     # ... back on a fresh machine
# The whole `pytest -m gpu tests` runs longer than one call (10 min) in one process on a fresh
# machine (every Triton and FA4 kernel compiles, one CPU core at a time), so it runs either as
# shards (1 = everything but the Triton kernel tests and FlashInfer, 2 = test_triton_gpu.py,
# flashinfer = its adapter tests, nvcc JIT at first use) or as `all` over WORKERS processes that
# share the GPU, each given every WORKERS-th test. Together the shards are the whole suite.
set -u
TRITON_TESTS=tests/magi_attention/kernels/test_triton_gpu.py
# compiled-kernel caches worth carrying to the next machine (same sm_90a on H100 and H200):
# Triton's, FA4's (CuTe DSL), FlashInfer's nvcc JIT and torch.compile's (Flex)
# (CACHE_DIRS, colon-separated, names others: the test's)
CACHES=(/root/.triton/cache "/tmp/$(id -un)/flash_attention_cute_dsl_cache" /root/peers_jit/.cache
        "/tmp/torchinductor_$(id -un)")
[ -z "${CACHE_DIRS:-}" ] || IFS=: read -r -a CACHES <<< "$CACHE_DIRS"
# shellcheck disable=SC1091
source /root/stage_env.sh 2>/dev/null || echo "no /root/stage_env.sh: run stage_all.sh install first"
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-/root/runs}
mkdir -p "$RUNS"

# N pytest processes on the one GPU, test i going to process i mod N. Each stops itself before
# the call's limit (TEST_TIMEOUT) so that the combined log always comes back.
run_test_workers() {
    local workers=$1 log=$2 dir=$RUNS/tests rc=0 part pid
    shift 2
    rm -rf "$dir" && mkdir -p "$dir"
    python3 -m pytest -m gpu "$@" -p no:cacheprovider -q --collect-only 2>/dev/null \
        | grep '::' > "$dir/ids"
    echo "$(wc -l < "$dir/ids") tests over $workers workers"
    split -n "r/$workers" -d "$dir/ids" "$dir/part."
    for part in "$dir"/part.??; do
        mapfile -t ids < "$part"
        timeout "${TEST_TIMEOUT:-520}" python3 -m pytest -m gpu -p no:cacheprovider -q -rfEs \
            --durations=5 "${ids[@]}" > "$part.log" 2>&1 &
    done
    # pytest exits 1 when tests failed (which a lone rerun may clear), other codes (timeout 124,
    # interrupted 2, ...) mean the worker did not finish: those keep the step failed
    local code broken=0
    for pid in $(jobs -p); do
        wait "$pid"; code=$?
        [ "$code" -eq 0 ] || rc=1
        [ "$code" -le 1 ] || broken=1
    done
    for part in "$dir"/part.??.log; do echo "=== $part"; cat "$part"; done > "$log"
    # each worker's last line: "N passed, M skipped in T s" (or its timeout's silence)
    for part in "$dir"/part.??.log; do echo "$(basename "$part"): $(tail -1 "$part")"; done
    grep -h -E "^(FAILED|ERROR)" "$dir"/part.??.log | head -40
    # Six workers' dense references can fill an 80 GB GPU together (H100: two FA4 8k cases
    # ran out of memory that pass on the 141 GB H200), so every failure runs once more alone;
    # the log keeps both verdicts, and the step fails if the lone run fails.
    grep -h -E "^(FAILED|ERROR) " "$dir"/part.??.log | awk '{print $2}' | sort -u > "$dir/failed"
    if [ -s "$dir/failed" ]; then
        mapfile -t ids < "$dir/failed"
        echo "=== rerun alone: ${#ids[@]} failed while sharing the GPU" | tee -a "$log"
        timeout "${RERUN_TIMEOUT:-120}" python3 -m pytest -m gpu -p no:cacheprovider -q -rfEs \
            "${ids[@]}" > "$dir/rerun.log" 2>&1
        rc=$(( $? != 0 || broken ))
        cat "$dir/rerun.log" >> "$log"
        echo "rerun alone: $(tail -1 "$dir/rerun.log")"
    fi
    return $rc
}

# The runners name their files after the overrides ('=' and ',' do not come back): flat names.
copy_rows() {
    local name=$1 i=0 f
    for f in "$RUNS/$name"/kernels/*.csv "$RUNS/$name"/cp/*.csv; do
        [ -e "$f" ] || continue
        i=$((i + 1))
        cp "$f" "$OUT/${name}__$i.csv"
    done
}

summarise_rows() {
    python3 - "$OUT" "$1" <<'EOF'
import glob, sys
import pandas as pd
files = glob.glob(f"{sys.argv[1]}/{sys.argv[2]}__*.csv")
if files:
    d = pd.concat(pd.read_csv(f) for f in files)
    print(d.groupby(["kernel", "status"]).size().unstack(fill_value=0).to_string())
EOF
}

# Runs a benchmark command in the background, copying its rows to $OUT every 15 s, so a call
# cut by its limit still brings back every row measured; SWEEP_TIMEOUT stops it before that.
# Beside it, every GPU's SM clock, power and temperature once a second ($OUT/clocks__NAME.csv,
# named apart from the rows' NAME__N.csv; GPU_CLOCKS=0: none): a cell far off its peers can then
# be matched, by the rows' `time`, against a clock drop during it.
run_and_copy_rows() {
    local name=$1 pid rc smi=
    shift
    if [ "${GPU_CLOCKS:-1}" != 0 ] && command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu \
            --format=csv,nounits -l 1 > "$OUT/clocks__${name}.csv" 2>/dev/null &
        smi=$!
    fi
    timeout "${SWEEP_TIMEOUT:-540}" "$@" out_dir="$RUNS/$name" report=false progress=false \
        > "$RUNS/$name.log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do sleep 15; copy_rows "$name"; done
    wait "$pid"; rc=$?
    [ -z "$smi" ] || kill "$smi" 2>/dev/null
    echo "$name: exit $rc"; tail -15 "$RUNS/$name.log"
    # a run cut by SWEEP_TIMEOUT (124) or failed: its whole log comes back, to say how far it got
    [ "$rc" -eq 0 ] || cp "$RUNS/$name.log" "$OUT/${name}.log"
    copy_rows "$name"
    summarise_rows "$name"
}

case "${1:-}" in
    tests)
        shard=${2:?tests 1|2|all|flashinfer [WORKERS]}
        workers=${3:-1}
        case "$shard" in
            1) args=(tests --ignore="$TRITON_TESTS" -k "not flashinfer") ;;
            2) args=("$TRITON_TESTS") ;;
            all) args=(tests -k "not flashinfer") ;;
            flashinfer) args=(tests/bench/kernels -k flashinfer) ;;
            *) echo "unknown shard $shard" >&2; exit 2 ;;
        esac
        log="$OUT/pytest_gpu_shard_$shard.log"
        if [ "$workers" -gt 1 ]; then
            run_test_workers "$workers" "$log" "${args[@]}"
        else
            set -o pipefail
            python3 -m pytest -m gpu "${args[@]}" -p no:cacheprovider -q -rfEs --durations=15 2>&1 \
                | tee "$log" | tail -40
        fi
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
        for dir in "${CACHES[@]}"; do [ ! -d "$dir" ] || du -sh "$dir"; done
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
        run_and_copy_rows "$name" python3 -m bench.kernels hardware="$hw" "$@"
        ;;
    cp)
        name=${2:?cp NAME NPROC [overrides]}; nproc=${3:?nproc}; shift 3
        # the runner stops its rounds 40 s before SWEEP_TIMEOUT would cut it, keeping what it timed
        run_and_copy_rows "$name" torchrun --standalone --nproc-per-node="$nproc" -m bench.cp \
            time_limit_s=$(( ${SWEEP_TIMEOUT:-540} - 40 )) "$@"
        ;;
    *) echo "usage: gpu_session.sh tests 1|2|all|flashinfer [WORKERS]|sweep NAME HW [overrides]|cp NAME NPROC [overrides]|flashinfer-jit|pack-caches|unpack-caches DIR" >&2; false ;;
esac
