#!/usr/bin/env bash
# Records the commit and a dirty flag in PROVENANCE.json (untracked, not ignored), so that rows
# measured on a copy of this tree without .git (the GPU machines) still name their code. Run it
# here before sending the tree to a device; scripts/install.sh (and so scripts/bench.sh) run it.
# Without git it keeps the file that came with the copy. See bench/provenance.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m bench.provenance "$@"
