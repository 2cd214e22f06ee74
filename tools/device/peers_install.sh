#!/usr/bin/env bash
# Install the peer kernels that the device image lacks (cuDNN frontend, FA3 forward, FlashInfer)
# on a device machine that has no network (tools/README.md has the exact `run` calls).
#
# The wheels (~105 MB) exceed one device call's 64 MiB carry limit, so they travel in three
# calls to the same warm machine (it stays warm ~30 s between calls):
#   here:            bash tools/device/peers_install.sh download   # fills .peers/a .peers/b .peers/c
#   device, call 1:  bash tools/device/peers_install.sh stage-a    # carry [".peers/a"]
#   device, call 2:  bash tools/device/peers_install.sh stage-b    # carry [".peers/b"]
#   device, call 3:  source tools/device/peers_install.sh install  # carry [".peers/c"], then run
# `install` joins the split wheel, pip-installs into $PEERS_PREFIX and exports PYTHONPATH and
# FLASHINFER_WORKSPACE_BASE (source it; later calls on the same machine: `source ... env`).
#
# Versions, and what the device image already has (KINDS.md, 2026-11-17): torch 2.11.0+cu130
# (with FA2 2.5.7 kernels and cuDNN 9.19 through nvidia-cudnn-cu13), einops, ninja, numpy,
# nvidia-ml-py, cuda-bindings, tabulate, requests, tqdm, packaging, click. Carried:
#   nvidia-cudnn-frontend 1.32.0  (its nvidia-cutlass-dsl[cu13] dependency is left out on
#                                  purpose: it only feeds the frontend's own CuTe DSL engines,
#                                  which the cudnn adapter deselects)
#   fa3-fwd 0.0.3                 (abi3, sm90a, torch stable ABI: loads on torch 2.11)
#   flashinfer-python 0.7.2.post1 (JIT: compiles its kernels with nvcc at first use; of its
#                                  dependencies only apache-tvm-ffi is imported and missing;
#                                  cuda-tile, nccl4py, nccl-extensions, nvidia-cutlass-dsl serve
#                                  other kernels and are not carried)
#   apache-tvm-ffi 0.1.15.post2   (flashinfer's JIT runtime; the version FA4's install carries)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"

PEERS_PREFIX=${PEERS_PREFIX:-/tmp/site}
PEERS_WHEELS=${PEERS_WHEELS:-/root/peers_wh}
# FlashInfer's JIT cache ($FLASHINFER_WORKSPACE_BASE/.cache/flashinfer): outside $OUT and the
# repo, so it survives between calls on one warm machine.
PEERS_JIT=${PEERS_JIT:-/root/peers_jit}
CUDNN_FRONTEND_VERSION=1.32.0
FA3_FWD_VERSION=0.0.3
FLASHINFER_VERSION=0.7.2.post1
TVM_FFI_VERSION=0.1.15.post2
SPLIT_BYTES=46000000

peers_env() {
    export PYTHONPATH="$PEERS_PREFIX:${PYTHONPATH:-}"
    export FLASHINFER_WORKSPACE_BASE="$PEERS_JIT"
}

peers_download() {
    # Python 3.12 / manylinux x86_64 wheels for the device image.
    local plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64"
    local dl=.peers/dl exclude
    mkdir -p "$dl" .peers/a .peers/b .peers/c
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    grep -qx '/.peers/' "$exclude" 2>/dev/null || { mkdir -p "$(dirname "$exclude")"; echo /.peers/ >> "$exclude"; }
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp $plat -d "$dl" \
        "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" "fa3-fwd==$FA3_FWD_VERSION" \
        "flashinfer-python==$FLASHINFER_VERSION" "apache-tvm-ffi==$TVM_FFI_VERSION" || return 1
    rm -f .peers/a/* .peers/b/* .peers/c/*
    local big
    big=$(ls "$dl"/flashinfer_python-*.whl)
    split -b $SPLIT_BYTES -d "$big" ".peers/$(basename "$big").part"
    mv ".peers/$(basename "$big").part00" .peers/a/
    mv .peers/*.part* .peers/b/
    cp "$dl"/fa3_fwd-*.whl "$dl"/apache_tvm_ffi-*.whl .peers/b/
    cp "$dl"/nvidia_cudnn_frontend-*.whl .peers/c/
    du -sh .peers/a .peers/b .peers/c
}

peers_stage() {
    mkdir -p "$PEERS_WHEELS" && cp ".peers/$1"/* "$PEERS_WHEELS"/ && ls -la "$PEERS_WHEELS"
}

peers_install() {
    [ -d "$PEERS_WHEELS" ] || { echo "peers_install: $PEERS_WHEELS missing: run stage-a and stage-b on this machine first" >&2; return 1; }
    cp .peers/c/* "$PEERS_WHEELS"/ || return 1
    join_split_wheels "$PEERS_WHEELS"
    ls -la "$PEERS_WHEELS"
    install_wheels "$PEERS_WHEELS" "$PEERS_PREFIX" || return 1
    peers_env
    peers_check
}

peers_check() {
    # one probe per peer, so one broken install does not hide the others
    python3 -c "import torch, cudnn; print('cudnn frontend', cudnn.__version__, 'backend', cudnn.backend_version_string(), '| torch cudnn', torch.backends.cudnn.version())" || true
    python3 -c "import fa3_fwd_interface, fa3_fwd_config as c; print('fa3_fwd', fa3_fwd_interface.__file__, {k: v for k, v in c.CONFIG['build_flags'].items() if v})" || true
    python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)" || true
    python3 -c "import torch; print('torch', torch.__version__, 'FA2', torch.nn.attention._get_flash_version(), 'flash available', torch.backends.cuda.is_flash_attention_available())" || true
}

peers_pack_jit() {
    # FlashInfer's compiled kernels, for the record or a later machine: $OUT/flashinfer_jit.tgz
    # (skipped above 15 MB: what one call brings back is limited)
    local out="${OUT:-.}/flashinfer_jit.tgz"
    [ -d "$PEERS_JIT/.cache/flashinfer" ] || { echo "no FlashInfer JIT cache under $PEERS_JIT"; return 0; }
    tar -czf "$out" -C "$PEERS_JIT" .cache/flashinfer
    if [ "$(stat -c %s "$out")" -gt 15000000 ]; then
        echo "JIT cache $(du -h "$out" | cut -f1) is too big to bring back; removed"; rm -f "$out"
    fi
    find "$PEERS_JIT/.cache/flashinfer" -name "*.so" -exec ls -la {} \;
}

case "${1:-}" in
    download) peers_download ;;
    stage-a) peers_stage a ;;
    stage-b) peers_stage b ;;
    install) peers_install ;;
    env) peers_env ;;
    check) peers_env; peers_check ;;
    pack-jit) peers_pack_jit ;;
    *) echo "usage: peers_install.sh download|stage-a|stage-b|install|env|check|pack-jit" >&2; false ;;
esac
