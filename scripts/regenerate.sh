#!/usr/bin/env bash
# Redraws every published figure and rewrites docs/results.md (and the README's headline table)
# from the committed result files, without measuring anything (python -m bench.regenerate):
#   results/<hw>/kernels/<experiment>.csv -> plots/<hw>/kernels/<experiment>/<mask>/<fwd|bwd>/
#   results/<hw>/cp/<experiment>.csv      -> plots/<hw>/cp/<experiment>/<mask>/<fwd|bwd>/
#   (the dispatch solver)                 -> plots/dispatch/
# A results file whose rows come from several commits is not drawn (it is named, with the
# command that measures it again). Extra arguments go to bench.regenerate (--no-dispatch).
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m bench.regenerate "$@"
