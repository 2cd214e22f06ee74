"""slurm/sbatch_torchrun.sh on the local cluster: srun starts torchrun, whose ranks meet at the rendezvous taken from
SLURM_* variables and all-reduce over gloo (no GPUs here); slurm/env.sh reaches every rank; the CP benchmark
runs through it and writes its rows and figures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _sweeps import REPO_ROOT

from bench.results import latest_rows, read_results

pytestmark = pytest.mark.slurm

NPROC_PER_NODE = 2


def test_torchrun_ranks_rendezvous_and_allreduce(slurm_cluster, tmp_path):
    env = slurm_cluster.env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # the job's `python` is this one
    env["NPROC_PER_NODE"] = str(NPROC_PER_NODE)
    log = tmp_path / "torchrun.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--nodes=1", f"--cpus-per-task={slurm_cluster.node.cpus}", "--mem=4G",
         "--time=5", f"--output={log}", str(REPO_ROOT / "slurm" / "sbatch_torchrun.sh"),
         str(Path(__file__).with_name("_allreduce.py")), str(tmp_path)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    slurm_cluster.wait_until_queue_empty(timeout_s=120)
    state = slurm_cluster.wait_for_accounting(job_id, num_tasks=1, timeout_s=30)[job_id]["State"]
    print(f"\n[slurm] torchrun job {job_id}: {state}; log {log}\n{log.read_text()}")
    assert state == "COMPLETED", log.read_text()

    # The rendezvous endpoint came from SLURM_JOB_NODELIST (first node) and the job id.
    endpoint = f"rendezvous {slurm_cluster.layout.hostname}:{20000 + int(job_id) % 20000}"
    assert endpoint in log.read_text()
    rows = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(NPROC_PER_NODE)]
    expected_sum = sum(r + 1.0 for r in range(NPROC_PER_NODE))
    for row in rows:
        assert row["world_size"] == NPROC_PER_NODE and row["sum"] == expected_sum, row
        assert row["SLURM_JOB_ID"] == job_id and row["SLURM_NNODES"] == "1", row
        assert row["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and row["NCCL_NVLS_ENABLE"] == "0", row


def test_cp_sweep_through_sbatch_torchrun(slurm_cluster, tmp_path):
    """The CP benchmark as users submit it: `sbatch slurm/sbatch_torchrun.sh -m bench.cp ...` (2 CPU ranks, gloo)."""
    env = slurm_cluster.env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["NPROC_PER_NODE"] = str(NPROC_PER_NODE)
    results, plots, log = tmp_path / "results", tmp_path / "plots", tmp_path / "cp.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--nodes=1", f"--cpus-per-task={slurm_cluster.node.cpus}", "--mem=4G",
         "--time=5", f"--output={log}", str(REPO_ROOT / "slurm" / "sbatch_torchrun.sh"),
         "-m", "bench.cp", "hardware=cpu", "cp=[ulysses]", "mask=[causal]", "cp_sizes=[1,2]", "progress=false",
         f"out_dir={results}", f"plots_dir={plots}", f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    job_id = submitted.stdout.strip().split(";")[0]
    slurm_cluster.wait_until_queue_empty(timeout_s=180)
    state = slurm_cluster.wait_for_accounting(job_id, num_tasks=1, timeout_s=30)[job_id]["State"]
    print(f"\n[slurm] CP sweep job {job_id}: {state}; log {log}")
    assert state == "COMPLETED", log.read_text()

    rows = latest_rows(read_results(results))
    print(rows[["kernel", "mask", "cp_size", "direction", "status", "runtime_ms"]].to_string(index=False))
    assert set(zip(rows["cp_size"], rows["direction"], rows["status"])) == {
        (n, d, "ok") for n in (1, 2) for d in ("fwd", "bwd")}
    assert rows["env"].str.contains("CUDA_DEVICE_MAX_CONNECTIONS=1").all(), rows["env"]
    figures = sorted(plots.rglob("*.png"))
    assert figures, f"no figures under {plots}"
    print(f"[slurm] CP rows in {results}; figures e.g. {figures[0]}")
