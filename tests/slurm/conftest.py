"""Fixtures for the Slurm tests: one local cluster per session (see local_slurm.py).

Without the packages or without root the tests FAIL, loudly, rather than skip: CI installs the packages with
.ci/slurm_setup.sh, and a Slurm test that skips there would hide exactly what it exists to catch. Deselect them
on a workstation with ``pytest -m "not slurm"``.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # local_slurm, _slurm_conf, _sweeps (the rootdir uses --import-mode=importlib)

from local_slurm import ClusterError, LocalSlurmCluster, missing_programs  # noqa: E402


@pytest.fixture(scope="session")
def slurm_programs() -> None:
    missing = missing_programs()
    if missing:
        pytest.fail(f"SLURM NOT INSTALLED: missing {missing}; run `bash .ci/slurm_setup.sh` as root "
                    f"(or deselect with -m 'not slurm')", pytrace=False)


@pytest.fixture(scope="session")
def slurm_cluster(slurm_programs, tmp_path_factory):
    cluster = LocalSlurmCluster(tmp_path_factory.mktemp("slurm"))
    start = time.monotonic()
    try:
        cluster.start()
    except ClusterError as e:
        pytest.fail(f"local Slurm cluster did not start: {e}", pytrace=False)
    print(f"\n[slurm] cluster up in {time.monotonic() - start:.1f}s under {cluster.root}: {cluster.sinfo()}")
    try:
        yield cluster
    finally:
        start = time.monotonic()
        cluster.stop()
        print(f"\n[slurm] cluster stopped in {time.monotonic() - start:.1f}s")
        leftovers = cluster.leftover_pids()
        assert not leftovers, f"processes of the test cluster still alive after stop: {leftovers}"
