"""The CPU kernel sweep on a real (local) Slurm: `python -m bench.kernels -m hydra/launcher=slurm ...` runs one
array task per mask. An injected bad cell becomes an `error` row and a line in its own job's log; a job that fails
as a whole (unknown mask pattern) fails the sweep, with its traceback in its job's log, and leaves the other jobs'
rows intact; `bench.report` and `bench.plot` merge the per-job files into tables and figures."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from _sweeps import CPU_OVERRIDES, REPO_ROOT, job_logs

from bench.results import latest_rows, read_results

pytestmark = pytest.mark.slurm

MASKS = ("full", "causal", "causal_document")  # one Slurm job each, in this order
FAILING_MASK = "testing_unknown"  # tests/slurm/configs/mask/testing_unknown.yaml: the last job, fails as a whole
KERNELS = ("naive", "testing_faulty")
BAD_CELL = ("testing_faulty", "causal")  # tests/slurm/configs/kernel/testing_faulty.yaml: error_cells [causal:256]
SEQLEN = 256


def _run(argv: list[str], env: dict, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)


def test_cpu_kernel_sweep_on_slurm(slurm_cluster, tmp_path):
    results, plots, tables, sweep = (tmp_path / n for n in ("results", "plots", "tables", "sweep"))
    argv = [sys.executable, "-m", "bench.kernels", "-m", "hydra/launcher=slurm",
            f"hydra.searchpath=[file://{Path(__file__).parent / 'configs'}]", f"hydra.sweep.dir={sweep}",
            *CPU_OVERRIDES, "hardware=cpu", f"kernel=[{','.join(KERNELS)}]", f"mask={','.join(MASKS + (FAILING_MASK,))}",
            f"seqlens=[{SEQLEN}]", f"out_dir={results}", f"plots_dir={plots}",
            # Jobs of one sweep must not all rewrite the same tables at once: report once, below.
            "report=false", "progress=false"]
    start = time.monotonic()
    proc = _run(argv, slurm_cluster.env(), timeout_s=300)
    print(f"\n[slurm] kernel sweep: {time.monotonic() - start:.1f}s, exit {proc.returncode}")
    slurm_cluster.wait_until_queue_empty(timeout_s=60)

    logs = job_logs(sweep)
    (array_id,) = {task.split("_")[0] for task in logs}
    acct = slurm_cluster.wait_for_accounting(array_id, num_tasks=len(MASKS) + 1, timeout_s=60)
    for task in sorted(acct):
        mask = (MASKS + (FAILING_MASK,))[int(task.split("_")[1])]
        print(f"[slurm] job {task} (mask={mask}): {acct[task]['State']}, log {logs[task][0]}")
    # Python errors end the job normally as far as Slurm knows; Hydra reports them.
    assert {r["State"] for r in acct.values()} == {"COMPLETED"}, acct

    # The failed job fails the sweep, named by its overrides, and its traceback is in its own log.
    failed_task = f"{array_id}_{len(MASKS)}"
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "Error executing job with overrides" in proc.stderr and f"mask={FAILING_MASK}" in proc.stderr
    failed_log = logs[failed_task][0].read_text()
    assert "ValueError: mask 'testing_unknown': unknown mask 'no_such_pattern'" in failed_log, failed_log
    print(f"[slurm] failed job {failed_task}: traceback in {logs[failed_task][0]}")

    rows = latest_rows(read_results(results))
    print(rows[["kernel", "mask", "seqlen", "direction", "status", "runtime_ms", "message"]].to_string(index=False))
    expected = {(k, m, SEQLEN, d) for k in KERNELS for m in MASKS for d in ("fwd", "bwd")}
    assert set(zip(rows["kernel"], rows["mask"], rows["seqlen"], rows["direction"])) == expected
    bad = (rows["kernel"] == BAD_CELL[0]) & (rows["mask"] == BAD_CELL[1])
    assert set(rows[bad]["status"]) == {"error"}
    assert rows[bad]["message"].str.contains(f"injected failure in {BAD_CELL[1]}:{SEQLEN}").all()
    good = rows[~bad]
    assert set(good["status"]) == {"ok"}, good[["kernel", "mask", "status", "message"]]
    assert (good["runtime_ms"] > 0).all()
    # slurm/env.sh ran before each job's Python started (the launcher's `setup`), and the rows recorded it.
    assert rows["env"].str.contains("CUDA_DEVICE_MAX_CONNECTIONS=1").all(), rows["env"]
    assert len(list((results / "kernels").glob("*.csv"))) == len(MASKS)  # one file per job that ran

    # The bad cell's error is in its own job's log, and only there.
    bad_task = f"{array_id}_{MASKS.index(BAD_CELL[1])}"
    for task, (out_log, _) in logs.items():
        has_error = f"injected failure in {BAD_CELL[1]}:{SEQLEN}" in out_log.read_text()
        assert has_error == (task == bad_task), f"{out_log}: error logged {has_error}"
    print(f"[slurm] bad cell {BAD_CELL} -> error row; its job {bad_task} logged it in {logs[bad_task][0]}")

    report = _run([sys.executable, "-m", "bench.report", "--results", str(results), "--out", str(tables)],
                  slurm_cluster.env(), timeout_s=120)
    plot = _run([sys.executable, "-m", "bench.plot", "--results", str(results), "--out", str(plots)],
                slurm_cluster.env(), timeout_s=120)
    assert report.returncode == 0 and plot.returncode == 0, report.stderr + plot.stderr
    # The report names the failed cell's job log: the log of the job that ran it, holding its error.
    named = [line.split("[job log: ", 1)[1].rstrip("]") for line in report.stdout.splitlines()
             if line.startswith("error:") and "[job log: " in line]
    assert named and {Path(p).resolve() for p in named} == {logs[bad_task][0].resolve()}, report.stdout
    print(f"[slurm] report names the job log of the bad cell: {named[0]}")
    figures = sorted(plots.rglob("*.png"))
    assert {p.relative_to(plots).parts[:2] for p in figures} == {(m, d) for m in MASKS for d in ("fwd", "bwd")}
    assert all(p.stat().st_size > 1000 for p in figures)
    causal_tables = "\n".join(p.read_text() for p in tables.rglob("*.md") if "causal" in p.name
                              and "document" not in p.name)
    assert "X (error)" in causal_tables
    print(f"[slurm] tables in {tables}; {len(figures)} figures, e.g. {figures[0]}")
