#!/usr/bin/env bash
# The test command: installs what the tests need, then runs every test this machine can run.
# GPU tests skip themselves without CUDA; the Slurm test needs root and Debian's slurm packages,
# which .ci/slurm_setup.sh installs (it fails loudly where it cannot).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install.sh
if [ -x .ci/slurm_setup.sh ]; then
    bash .ci/slurm_setup.sh
fi
exec "$PY" -m pytest -q "$@"
