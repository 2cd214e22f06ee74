#!/usr/bin/env bash
# The main job: installs (and records the commit in PROVENANCE.json), runs the default kernel
# benchmark (hardware=auto: the cpu preset without a GPU), then writes the tables and
# flops_report plots. Extra arguments go to Hydra.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install.sh
"$PY" -m bench.kernels "$@"
