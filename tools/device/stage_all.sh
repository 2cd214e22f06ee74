#!/usr/bin/env bash
# Every optional package of the GPU benchmarks on a device machine that has no network, in the
# fewest calls: FA4 (fa4_install.sh's wheels), the peers (peers_install.sh's: cuDNN frontend,
# fa3-fwd, FlashInfer) and Hydra (.whl, from `bash tools/device/cp_sweep.sh wheels`).
#
# One call carries at most 64 MiB with the repo, so the ~210 MB of wheels travel as batches of
# <= STAGE_MB, to one warm machine, back to back (pack prints how many):
#   here:                bash tools/device/stage_all.sh pack       # fills .stage/1 .. .stage/N
#   device, calls 1..N-1: bash tools/device/stage_all.sh stage K   # carry [".stage/K"]
#   device, call N:      source tools/device/stage_all.sh install  # carry [".stage/N"]
#   later calls:       source /root/stage_env.sh                     # same machine only
# `install` joins the split wheels, pip-installs all into $STAGE_PREFIX and writes the
# environment (PYTHONPATH, FlashInfer's JIT cache dir) to /root/stage_env.sh.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"

STAGE_PREFIX=${STAGE_PREFIX:-/root/site}
STAGE_WHEELS=${STAGE_WHEELS:-/root/stage_wh}
STAGE_ENV=/root/stage_env.sh

# A call carries the working tree too (64 MiB in all, the tree counted by its disk use: batches
# that left less than ~4 MB of headroom were refused), so a batch is at most STAGE_MB MB: every
# wheel joined, cut into parts of that size, packed in order. By default STAGE_MB is what the
# tree leaves of ~68 MB, at most 24; moving plots/ out of the tree for the staging calls (it is
# not needed on the device) leaves room for larger batches (STAGE_MB=40).
tree_mb() {
    git ls-files -co --exclude-standard -z | du -c -k --files0-from=- 2>/dev/null \
        | tail -1 | awk '{print int($1 / 1024) + 1}'
}

stage_pack() {
    local f mb tmp=.stage/.whole n=1 used=0 size tree
    tree=$(tree_mb)
    mb=${STAGE_MB:-$(( 68 - tree < 24 ? 68 - tree : 24 ))}
    [ "$mb" -ge 4 ] || { echo "the working tree takes ${tree} MB: no room for a batch" >&2; return 1; }
    echo "working tree ~${tree} MB: batches of ${mb} MB"
    # FA4 and Hydra are needed by every GPU session; the peers only by the kernel sweeps
    # (STAGE_PEERS=0 leaves them out: the CP runs need none, one staging call fewer)
    local dirs=(.fa4/a .fa4/b .whl)
    [ "${STAGE_PEERS:-1}" = 0 ] || dirs+=(.peers/a .peers/b .peers/c)
    for f in "${dirs[@]}"; do
        [ -d "$f" ] || { echo "missing $f: run fa4_install.sh download, peers_install.sh download, cp_sweep.sh wheels" >&2; return 1; }
    done
    grep -qx '/.stage/' .git/info/exclude || echo /.stage/ >> .git/info/exclude
    rm -rf .stage && mkdir -p "$tmp"
    # one copy of each file (apache_tvm_ffi sits in two folders); split wheels joined again
    local d
    for d in "${dirs[@]}"; do
        for f in "$d"/*; do [ -e "$tmp/$(basename "$f")" ] || ln "$f" "$tmp/"; done
    done
    join_split_wheels "$tmp"
    for f in "$tmp"/*.whl; do
        size=$(stat -c %s "$f")
        [ "$size" -le $((mb * 1000000)) ] || { split -b $((mb * 1000000)) -d -a 2 "$f" "$f.part" && rm "$f"; }
    done
    mkdir -p .stage/1
    for f in $(ls -S "$tmp"); do
        size=$(stat -c %s "$tmp/$f")
        if [ $((used + size)) -gt $((mb * 1000000)) ]; then n=$((n + 1)); used=0; mkdir -p ".stage/$n"; fi
        mv "$tmp/$f" ".stage/$n/" && used=$((used + size))
    done
    rmdir "$tmp"
    du -sh .stage/*
    echo "$n batches: calls 1..$((n - 1)) 'stage N', call $n 'install' (carry .stage/$n)"
}

stage_copy() {
    mkdir -p "$STAGE_WHEELS" && cp ".stage/$1"/* "$STAGE_WHEELS"/ && ls "$STAGE_WHEELS" | wc -l
}

stage_install() {
    # the last batch travels with this call
    stage_copy "$(ls .stage | sort -n | tail -1)" >/dev/null || return 1
    join_split_wheels "$STAGE_WHEELS"
    install_wheels "$STAGE_WHEELS" "$STAGE_PREFIX" || return 1
    # the cutlass dsl's .pth is not read from a --target dir
    cat > "$STAGE_ENV" <<EOF
export PYTHONPATH="$PWD:$STAGE_PREFIX:$STAGE_PREFIX/nvidia_cutlass_dsl/dsl_packages:\${PYTHONPATH:-}"
export FLASHINFER_WORKSPACE_BASE=/root/peers_jit
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1
export PYTHONUNBUFFERED=1
EOF
    # shellcheck disable=SC1090
    source "$STAGE_ENV"
    python3 -c "import flash_attn.cute, hydra; print('staged: fa4, hydra')" || return 1
    # the peers only where pack packed them (STAGE_PEERS=0 leaves them out: no failure then)
    if compgen -G "$STAGE_WHEELS/flashinfer_python-*.whl" >/dev/null; then
        python3 -c "import cudnn, fa3_fwd_interface, flashinfer
print('staged: cudnn frontend, fa3-fwd, flashinfer', flashinfer.__version__)"
    else
        echo "peers not staged (packed with STAGE_PEERS=0)"
    fi
}

case "${1:-}" in
    pack) stage_pack ;;
    stage) stage_copy "${2:?stage N}" ;;
    install) stage_install ;;
    *) echo "usage: stage_all.sh pack|stage N|install" >&2; false ;;
esac
