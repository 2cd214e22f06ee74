#!/usr/bin/env bash
# Every optional package of the GPU benchmarks on a device machine that has no network, in the
# fewest calls: FA4 (fa4_install.sh's wheels), the peers (peers_install.sh's: cuDNN frontend,
# fa3-fwd, FlashInfer) and Hydra (.whl, from `bash scripts/device/cp_sweep.sh wheels`).
#
# One call carries at most 64 MiB with the repo, so the ~210 MB of wheels travel as batches of
# <= 46 MB, to one warm machine, back to back:
#   here:              bash scripts/device/stage_all.sh pack         # fills .stage/1 .. .stage/5
#   device, calls 1-4: bash scripts/device/stage_all.sh stage N      # carry [".stage/N"]
#   device, call 5:    source scripts/device/stage_all.sh install    # carry [".stage/5"]
#   later calls:       source /root/stage_env.sh                     # same machine only
# `install` joins the split wheels, pip-installs all into $STAGE_PREFIX and writes the
# environment (PYTHONPATH, FlashInfer's JIT cache dir) to /root/stage_env.sh.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"

STAGE_PREFIX=${STAGE_PREFIX:-/root/site}
STAGE_WHEELS=${STAGE_WHEELS:-/root/stage_wh}
STAGE_ENV=/root/stage_env.sh

stage_pack() {
    local f
    for f in .fa4/a .fa4/b .fa4/c .peers/a .peers/b .peers/c .whl; do
        [ -d "$f" ] || { echo "missing $f: run fa4_install.sh download, peers_install.sh download, cp_sweep.sh wheels" >&2; return 1; }
    done
    grep -qx '/.stage/' .git/info/exclude || echo /.stage/ >> .git/info/exclude
    rm -rf .stage && mkdir -p .stage/1 .stage/2 .stage/3 .stage/4 .stage/5
    ln .fa4/a/*.part00 .stage/1/
    ln .fa4/c/*.part01 .stage/2/ 2>/dev/null || ln .fa4/b/*.part01 .stage/2/
    ln .peers/a/*.part00 .stage/3/
    ln .peers/b/*.part01 .peers/b/fa3_fwd-*.whl .whl/*.whl .stage/4/
    for f in .fa4/b/*.whl .peers/c/*.whl; do ln "$f" .stage/5/; done
    du -sh .stage/*
}

stage_copy() {
    mkdir -p "$STAGE_WHEELS" && cp ".stage/$1"/* "$STAGE_WHEELS"/ && ls "$STAGE_WHEELS" | wc -l
}

stage_install() {
    stage_copy 5 >/dev/null || return 1
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
    python3 -c "import flash_attn.cute, cudnn, fa3_fwd_interface, hydra; print('staged: fa4, cudnn frontend, fa3-fwd, hydra')"
    python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)"
}

case "${1:-}" in
    pack) stage_pack ;;
    stage) stage_copy "${2:?stage N}" ;;
    install) stage_install ;;
    *) echo "usage: stage_all.sh pack|stage N|install" >&2; false ;;
esac
