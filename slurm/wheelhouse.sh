#!/bin/bash
# Offline installs for compute nodes without internet: download every wheel the project needs into a folder on a
# login node (same OS, CPU architecture and Python as the compute nodes, or say which with PIP_DOWNLOAD_ARGS), then
# install from that folder alone on the compute nodes.
#
#   login node:    bash slurm/wheelhouse.sh download [DIR] [REQUIREMENT ...]
#   compute node:  bash slurm/wheelhouse.sh install  [DIR] [REQUIREMENT ...]
#
# DIR defaults to ./wheelhouse; REQUIREMENTs default to `.[test]` (this checkout and its test tools). Put DIR on
# the shared file system, or copy it with the checkout. Variables (optional):
#   PYTHON             the interpreter whose pip runs; default python3
#   TORCH_INDEX_URL    where torch's wheels for the nodes' CUDA come from, e.g. https://download.pytorch.org/whl/cu128;
#                      without it, torch comes from PyPI (its default CUDA build)
#   PIP_DOWNLOAD_ARGS  extra `pip download` arguments, e.g. for other nodes than this one:
#                      "--python-version 3.11 --platform manylinux_2_28_x86_64 --only-binary=:all:"
set -euo pipefail

ACTION="${1:?usage: wheelhouse.sh download|install [DIR] [REQUIREMENT ...]}"
DIR="${2:-wheelhouse}"
shift $(( $# >= 2 ? 2 : $# ))
REQUIREMENTS=("$@")
EDITABLE=()
if [ ${#REQUIREMENTS[@]} -eq 0 ]; then
    REQUIREMENTS=(".[test]")
    EDITABLE=(-e)  # the checkout itself is installed editable, as scripts/install.sh does
fi
PY="${PYTHON:-python3}"
read -r -a EXTRA <<< "${PIP_DOWNLOAD_ARGS:-}"

case "$ACTION" in
download)
    mkdir -p "$DIR"
    # The build backend, so that `pip install -e .` works offline too (pyproject.toml's build-system.requires).
    "$PY" -m pip download -d "$DIR" "${EXTRA[@]}" "setuptools>=68" wheel
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        # torch first, from its CUDA index, so the requirements below find it already there.
        "$PY" -m pip download -d "$DIR" "${EXTRA[@]}" --index-url "$TORCH_INDEX_URL" torch
    fi
    "$PY" -m pip download -d "$DIR" "${EXTRA[@]}" --find-links "$DIR" "${REQUIREMENTS[@]}"
    echo "wheelhouse: $(ls "$DIR" | wc -l) files in $DIR"
    ;;
install)
    [ -d "$DIR" ] || { echo "wheelhouse: no folder $DIR; run 'wheelhouse.sh download $DIR' on a login node" >&2; exit 1; }
    # --no-index: nothing from the network; a wheel missing from DIR is an error, not a download.
    "$PY" -m pip install --no-index --find-links "$DIR" "${EDITABLE[@]}" "${REQUIREMENTS[@]}"
    ;;
*)
    echo "usage: wheelhouse.sh download|install [DIR] [REQUIREMENT ...]" >&2
    exit 2
    ;;
esac
