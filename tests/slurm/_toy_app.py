"""A tiny Hydra app for the launcher test: each job appends one JSON row for its cell, or fails as told.

``cell=bad`` raises ValueError (Python error: Hydra marks the job FAILED and hands the exception to the launcher;
the launcher config's LogJobReturnCallback writes its traceback into the job's log);
``cell=crash`` kills its own process (no result file: only Slurm's accounting knows the job failed).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.config_store import ConfigStore


@dataclass
class ToyConfig:
    cell: str = "a"
    out_dir: str = "???"


ConfigStore.instance().store(name="toy", node=ToyConfig)


@hydra.main(version_base="1.3", config_path=None, config_name="toy")
def main(cfg: ToyConfig) -> str:
    print(f"toy job for cell {cfg.cell} in Slurm job {os.environ.get('SLURM_JOB_ID')}", flush=True)
    if cfg.cell == "bad":
        raise ValueError(f"injected bad cell {cfg.cell!r}")
    if cfg.cell == "crash":
        print("injected crash: SIGKILL to self", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    row = {
        "cell": cfg.cell,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "slurm_array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
        "slurm_array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "CUDA_DEVICE_MAX_CONNECTIONS": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
    }
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{cfg.cell}.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    return cfg.cell


if __name__ == "__main__":
    main()
