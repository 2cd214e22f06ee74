"""configs/hydra/launcher/slurm.yaml on a real (local) Slurm: a Hydra multirun becomes a Slurm job array through
submitit; a job that fails leaves the others' outputs intact, and its error can be read in the log file named."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _sweeps import CPU_OVERRIDES, REPO_ROOT, job_logs

pytestmark = pytest.mark.slurm

TOY_APP = Path(__file__).with_name("_toy_app.py")
GOOD_CELLS = ("a", "b", "c")


def run_sweep(cluster, tmp_path: Path, cells: list[str]) -> tuple[subprocess.CompletedProcess, Path, Path]:
    sweep_dir, out_dir = tmp_path / "sweep", tmp_path / "out"
    argv = [sys.executable, str(TOY_APP), "-m", "hydra/launcher=slurm",
            f"hydra.searchpath=[file://{REPO_ROOT / 'configs'}]", f"hydra.sweep.dir={sweep_dir}",
            *CPU_OVERRIDES, f"out_dir={out_dir}", f"cell={','.join(cells)}"]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO_ROOT, env=cluster.env(), capture_output=True, text=True, timeout=240)
    print(f"\n[slurm] sweep {cells} took {time.monotonic() - start:.1f}s, exit {proc.returncode}")
    cluster.wait_until_queue_empty(timeout_s=120)
    return proc, sweep_dir, out_dir


def read_rows(out_dir: Path) -> dict[str, dict]:
    rows = {}
    for path in sorted(out_dir.glob("*.jsonl")):
        lines = path.read_text().splitlines()
        assert len(lines) == 1, f"{path} has {len(lines)} rows, expected 1"
        rows[path.stem] = json.loads(lines[0])
    return rows


@pytest.mark.parametrize("failure", ["python_error", "killed"])
def test_sweep_runs_as_job_array_and_survives_failed_job(slurm_cluster, tmp_path, failure):
    bad_cell = {"python_error": "bad", "killed": "crash"}[failure]
    proc, sweep_dir, out_dir = run_sweep(slurm_cluster, tmp_path, ["a", "b", bad_cell, "c"])

    # The sweep as a whole fails, and says which job.
    assert proc.returncode != 0, proc.stdout + proc.stderr

    rows = read_rows(out_dir)
    assert sorted(rows) == sorted(GOOD_CELLS), f"rows for {sorted(rows)}\n{proc.stderr}"
    array_ids = {r["slurm_array_job_id"] for r in rows.values()}
    assert len(array_ids) == 1, f"jobs were not one array: {array_ids}"
    assert len({r["slurm_array_task_id"] for r in rows.values()}) == len(GOOD_CELLS)
    for row in rows.values():  # slurm/env.sh reached the jobs through the launcher's `setup`
        assert row["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and row["NCCL_NVLS_ENABLE"] == "0", row

    (array_id,) = array_ids
    acct = slurm_cluster.wait_for_accounting(array_id, num_tasks=4, timeout_s=60)
    bad_task = f"{array_id}_2"
    logs = job_logs(sweep_dir)
    assert sorted(logs) == sorted(f"{array_id}_{i}" for i in range(4))
    out_log, err_log = logs[bad_task]
    for task, row in acct.items():
        print(f"[slurm] job {task}: {row['State']} exit {row['ExitCode']}")
    if failure == "python_error":
        # submitit returned Hydra's FAILED JobReturn; Slurm saw a job that ended normally.
        assert acct[bad_task]["State"] == "COMPLETED", acct
        assert "Error executing job with overrides:" in proc.stderr and "'cell=bad']" in proc.stderr, proc.stderr
        assert "ValueError: injected bad cell" in out_log.read_text(), f"traceback not in {out_log}"
    else:
        # No result file: only Slurm's accounting (sacct) tells submitit that this job is over.
        assert acct[bad_task]["State"] == "FAILED", acct
        assert "has not produced any output (state: FAILED)" in proc.stderr, proc.stderr
        # submitit's error names the job, its folder (where the logs are) and quotes the job's error stream.
        assert f"Job {bad_task} " in proc.stderr and str(out_log.parent) in proc.stderr, proc.stderr
        assert "injected crash" in proc.stderr, proc.stderr
        assert "injected crash" in err_log.read_text(), f"error not in {err_log}"
    assert all(acct[f"{array_id}_{i}"]["State"] == "COMPLETED" for i in (0, 1, 3)), acct
    print(f"[slurm] failed job {bad_task}: log {out_log} / {err_log}")
