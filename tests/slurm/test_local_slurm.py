"""tests/slurm/local_slurm.py: the cluster runs batch jobs, accounts for them, and stops every daemon it started,
also when starting fails half-way."""
from __future__ import annotations

import subprocess

import pytest
from local_slurm import ClusterError, LocalSlurmCluster

pytestmark = pytest.mark.slurm


def test_batch_job_runs_and_is_accounted(slurm_cluster, tmp_path):
    out = tmp_path / "job.out"
    submitted = subprocess.run(["sbatch", "--parsable", "-o", str(out), "--wrap", "echo hello from $SLURM_JOB_ID"],
                               env=slurm_cluster.env(), capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    killed = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "kill -9 $$"],
                            env=slurm_cluster.env(), capture_output=True, text=True, check=True)
    killed_id = killed.stdout.strip().split(";")[0]
    slurm_cluster.wait_until_queue_empty(timeout_s=60)
    assert out.read_text().strip() == f"hello from {job_id}"
    states = {j: slurm_cluster.wait_for_accounting(j, num_tasks=1, timeout_s=30)[j]["State"]
              for j in (job_id, killed_id)}
    assert states == {job_id: "COMPLETED", killed_id: "FAILED"}


def test_failed_start_stops_what_it_started(slurm_programs, tmp_path, monkeypatch):
    cluster = LocalSlurmCluster(tmp_path / "broken")

    def fail(self):
        raise ClusterError("injected: slurm did not start")

    monkeypatch.setattr(LocalSlurmCluster, "_start_slurm", fail)
    with pytest.raises(ClusterError, match="injected"):
        cluster.start()
    started = set(cluster._procs)
    assert started == {"munged", "mariadbd"}
    assert all(p.poll() is not None for p in cluster._procs.values()), "a daemon survived the failed start"
    assert cluster.leftover_pids() == []
