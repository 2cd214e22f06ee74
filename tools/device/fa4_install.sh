#!/usr/bin/env bash
# Install flash-attn-4 (FA4, module flash_attn.cute) on a device machine that has no network.
#
# The wheels (about 100 MB) exceed one device call's 64 MiB carry limit, so they travel in two
# calls to the same warm machine (tools/README.md has the exact `run` calls):
#   here:            bash tools/device/fa4_install.sh download   # fills .fa4/a and .fa4/b
#   device, call 1:  bash tools/device/fa4_install.sh stage      # carry [".fa4/a"]
#   device, call 2:  source tools/device/fa4_install.sh install  # carry [".fa4/b"]
# `install` joins the split wheel, pip-installs everything into $FA4_PREFIX and exports
# PYTHONPATH (source it, or re-export in later commands: see fa4_pythonpath below).
set -u
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"

FA4_PREFIX=${FA4_PREFIX:-/root/fa4}
FA4_WHEELS=${FA4_WHEELS:-/root/wh}
FA4_VERSION=${FA4_VERSION:-4.0.0b36}
CUTLASS_DSL_VERSION=${CUTLASS_DSL_VERSION:-4.8.1}
SPLIT_BYTES=46000000

fa4_pythonpath() {
    # nvidia_cutlass_dsl ships a .pth that adds dsl_packages; --target installs skip .pth files.
    export PYTHONPATH="$FA4_PREFIX:$FA4_PREFIX/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}"
}

fa4_download() {
    # Python 3.12 / manylinux x86_64 wheels for the device image (torch 2.11, CUDA 13).
    local plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64"
    local dl=.fa4/dl
    mkdir -p "$dl" .fa4/a .fa4/b
    grep -qx '/.fa4/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo /.fa4/ >> .git/info/exclude; }
    # shellcheck disable=SC2086
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp $plat -d "$dl" \
        "flash-attn-4==$FA4_VERSION" "nvidia-cutlass-dsl==$CUTLASS_DSL_VERSION" \
        "nvidia-cutlass-dsl-libs-base==$CUTLASS_DSL_VERSION" \
        "nvidia-cutlass-dsl-libs-core==$CUTLASS_DSL_VERSION" \
        "nvidia-cutlass-dsl-libs-cu13==$CUTLASS_DSL_VERSION" \
        "quack-kernels==0.6.5" "apache-tvm-ffi==0.1.15.post2" "torch-c-dlpack-ext==0.1.5" || return 1
    rm -f .fa4/a/* .fa4/b/*
    local big
    big=$(ls "$dl"/nvidia_cutlass_dsl_libs_cu13-*.whl)
    split -b $SPLIT_BYTES -d "$big" ".fa4/$(basename "$big").part"
    mv ".fa4/$(basename "$big").part00" .fa4/a/
    mv .fa4/*.part* .fa4/b/
    for w in "$dl"/*.whl; do [ "$w" = "$big" ] || cp "$w" .fa4/b/; done
    du -sh .fa4/a .fa4/b
}

fa4_stage() {
    mkdir -p "$FA4_WHEELS" && cp .fa4/a/* "$FA4_WHEELS"/ && ls -la "$FA4_WHEELS"
}

fa4_install() {
    [ -d "$FA4_WHEELS" ] || { echo "fa4_install: $FA4_WHEELS missing: run 'stage' on this machine first" >&2; return 1; }
    cp .fa4/b/* "$FA4_WHEELS"/ || return 1
    join_split_wheels "$FA4_WHEELS"
    install_wheels "$FA4_WHEELS" "$FA4_PREFIX" || return 1
    fa4_pythonpath
    python3 -c "import flash_attn.cute as m; print('flash_attn.cute', m.__file__)"
}

case "${1:-}" in
    download) fa4_download ;;
    stage) fa4_stage ;;
    install) fa4_install ;;
    pythonpath) fa4_pythonpath ;;
    *) echo "usage: fa4_install.sh download|stage|install|pythonpath" >&2; false ;;
esac
