"""What the Slurm sweep tests share: the repository root, CPU overrides for the launcher, the job-log layout."""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# configs/hydra/launcher/slurm.yaml asks for a GPU node; the test cluster is one CPU-only node.
CPU_OVERRIDES = ("hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1",
                 "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=5")


def job_logs(sweep_dir: Path) -> dict[str, tuple[Path, Path]]:
    """Array task (``<array id>_<task>``) -> (stdout log, stderr log), in submitit's folder layout."""
    logs = {}
    for folder in sorted((sweep_dir / ".submitit").iterdir()):
        if folder.is_dir() and "_" in folder.name:
            logs[folder.name] = (folder / f"{folder.name}_0_log.out", folder / f"{folder.name}_0_log.err")
    return logs
