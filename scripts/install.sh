#!/usr/bin/env bash
# Installs the project on a fresh machine. torch first: on a CPU box the pinned CPU build
# (a plain `torch` requirement would pull several GB of CUDA wheels); a machine that already
# has torch (a GPU node) keeps its own. Last, the commit and dirty flag go to PROVENANCE.json,
# which result rows read where the tree has no .git (scripts/provenance.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
    "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q -e ".[test]"
bash scripts/provenance.sh
