#!/usr/bin/env bash
# The main job: installs (and records the commit in PROVENANCE.json), runs the default kernel
# benchmark (hardware=auto: the cpu preset without a GPU) and writes its rows, tables and
# flops_report plots under runs/<hardware>/ (git-ignored; the committed reference rows in results/
# are neither read nor written). A rerun resumes: cells already measured are skipped; force=true
# measures them again. Extra arguments go to Hydra.
#   bash scripts/bench.sh                           # the default sweep
#   bash scripts/bench.sh mask=causal               # a part of it
#   PYTHON=.venv/bin/python bash scripts/bench.sh   # the Python (e.g. a venv's) to install into
#                                                   # and run with; default: python3 on PATH
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install.sh
"$PY" -m bench.kernels "$@"
