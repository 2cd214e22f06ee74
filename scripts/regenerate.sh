#!/usr/bin/env bash
# Regenerates every table and figure from the committed result files:
#   results/<hw>/kernels/*.csv -> results/<hw>/tables/ and plots/<hw>/<mask>/<fwd|bwd>/flops_report.png
#   results/<hw>/cp/*.csv      -> results/<hw>/cp_tables/ and plots/<hw>/cp/<mask>/<fwd|bwd>/
#                                 (TFLOPs/s/GPU against cp_size, plus magi ratio tables)
#                                 mask and cp size (bench.cp.dispatch_plot; no result file needed)
# Usage: bash scripts/regenerate.sh [results/<hw> ...]   (default: every folder under results/)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
folders=("$@")
[ ${#folders[@]} -gt 0 ] || folders=(results/*/)
for folder in "${folders[@]}"; do
    folder=${folder%/}
    hw=$(basename "$folder")
    if [ -d "$folder/kernels" ]; then
        # every committed file of the folder, named: bench.report reads one experiment per folder
        "$PY" -m bench.report --results "$folder"/kernels/*.csv --out "$folder/tables"
        "$PY" -m bench.plot --results "$folder" --out "plots/$hw"
    fi
    if [ -d "$folder/cp" ]; then
        "$PY" -m bench.report --results "$folder"/cp/*.csv --x cp_size --out "$folder/cp_tables"
        "$PY" -m bench.plot --results "$folder" --kind cp --out "plots/$hw/cp"
    fi
done
"$PY" -m bench.cp.dispatch_plot --out plots/dispatch
