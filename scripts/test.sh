#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/install.sh), then runs every test this
# machine can run. Extra arguments go to pytest.
#   bash scripts/test.sh                         # all of them
#   bash scripts/test.sh -x -k report            # a few
#   PYTHON=.venv/bin/python bash scripts/test.sh # the Python (e.g. a venv's) to install into and
#                                                # test with; default: python3 on PATH
#   TEST_WORKERS=0 bash scripts/test.sh          # in one process (default: 3 pytest-xdist workers)
# The tests run in TEST_WORKERS processes (pytest-xdist), each taking whole files, the longest
# first (tests/conftest.py; three workers on two cores fill the time the tests spend waiting on
# subprocesses, gloo ranks and Slurm daemons): ~11.5 min on a 2-core machine. What the tests'
# processes imported is frozen out of the garbage collector (tests/conftest.py, tests/_cli.py):
# the sweeps collect before every cell and timing, and the suite took 945 s without that.
# GPU tests skip themselves without CUDA. The Slurm tests (marker slurm) start a one-machine
# Slurm cluster and need root: as root, .ci/slurm_setup.sh first installs Debian's slurm-wlm,
# slurmdbd, munge and mariadb-server system-wide (it says so before it does, and fails loudly
# where it cannot); without root they are skipped, with one line saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
bash scripts/install.sh
WORKERS=(-n "${TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder)
if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: not root, so the Slurm tests (marker slurm) are skipped: .ci/slurm_setup.sh needs root to install slurm-wlm, slurmdbd, munge and mariadb-server"
    exec "$PY" -m pytest -q "${WORKERS[@]}" -m "not slurm" "$@"
fi
bash .ci/slurm_setup.sh
exec "$PY" -m pytest -q "${WORKERS[@]}" "$@"
