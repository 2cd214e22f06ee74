"""``torchrun ... -m bench.cp [overrides]``: the CP sweep under Hydra (configs/cp_bench.yaml).

    torchrun --nproc-per-node 4 -m bench.cp experiment=cp_h200x4 hardware=h200
    torchrun --nproc-per-node 2 -m bench.cp hardware=cpu 'cp=[magi,ulysses]' 'mask=[causal]'
    python -m bench.cp hardware=cpu cp_sizes=[1]          # without torchrun: a world of one

Groups: ``cp/`` one file per strategy (``cp.<label>.knobs.*``; several with ``cp=[a,b]``),
``mask/``, ``data/``, ``hardware/`` as for the kernel benchmark, ``experiment/cp_*`` recipes.
Every rank composes the same config; rank 0 writes ``<out_dir>/cp/<job>.csv`` (``out_dir``
default ``runs/<hardware>``, apart from the committed ``results/``) and the figures
``<plots_dir>/cp/<mask>/<fwd|bwd>/flops_report_<N>_per_gpu.png`` (default
``<out_dir>/plots/<job>``). A bad config value ends the run with one ``error:`` line before the
first cell; Ctrl-C ends it with one line on rank 0 saying how many rows were written.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, List, Optional

import hydra
import torch.distributed as dist
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import MISSING, DictConfig, OmegaConf

from bench.config import (CONFIGS_DIR, DataConfig, DataSchema, GateConfig, GateSchema,
                          HardwareSchema, MaskChoice, MaskSchema, check_cpu_sized, default_dirs,
                          job_key, register_schemas, resolve_hardware)
from bench.cp.runner import (DEFAULT_SEQLEN_PER_GPU, CPBenchConfig, StrategyChoice,
                             init_distributed, run_sweep)
from bench.results import interrupted_line, summary_line


# ----------------------------------------------------------------------------- Hydra schemas
@dataclass
class CPSchema:
    name: str = MISSING                   # registry name (bench.cp.STRATEGIES)
    target: Optional[str] = None          # "pkg.module:Class": a CPStrategy outside the registry
    knobs: Dict[str, Any] = field(default_factory=dict)   # null values: the strategy's default


@dataclass
class CPBenchSchema:
    cp: Dict[str, CPSchema] = field(default_factory=dict)
    mask: Dict[str, MaskSchema] = field(default_factory=dict)
    data: DataSchema = field(default_factory=DataSchema)
    hardware: HardwareSchema = field(default_factory=HardwareSchema)
    gate: GateSchema = field(default_factory=GateSchema)
    cp_sizes: List[int] = field(default_factory=lambda: [1, 2, 4, 8])
    seqlen_per_gpu: Optional[List[int]] = None   # None: 256 on cpu, 8192 on cuda
    directions: List[str] = field(default_factory=lambda: ["fwd", "bwd"])
    local_kernel: str = "auto"            # every strategy's local FFA backend
    experiment_name: str = "cp_default"
    out_dir: Optional[str] = None         # None: runs/<hardware>; rows in <out_dir>/cp/
    plots_dir: Optional[str] = None       # None: <out_dir>/plots/<job>; figures in <plots_dir>/cp/
    force: bool = False
    report: bool = True
    progress: bool = True
    seed: int = 0
    timeout_min: float = 10.0             # process-group timeout (a hung collective ends there)


def register_cp_schemas() -> None:
    register_schemas()  # mask, data, hardware base schemas of the kernel benchmark
    cs = ConfigStore.instance()
    cs.store(name="cp_bench_schema", node=CPBenchSchema)
    cs.store(group="cp", name="base_cp", node=CPSchema)


# ----------------------------------------------------------------------------- typed config
def cp_bench_config(cfg: DictConfig, overrides: list[str] | None = None) -> CPBenchConfig:
    """The typed config of a composed ``configs/cp_bench.yaml``.

    Raises:
        ValueError: a bad value, or a GPU-sized run that hardware=auto put on the CPU preset.
    """
    hardware = resolve_hardware(OmegaConf.to_container(cfg.hardware, resolve=True))
    strategies = tuple(
        StrategyChoice(label, s["name"], MappingProxyType(dict(s.get("knobs") or {})),
                       s.get("target"))
        for label, s in OmegaConf.to_container(cfg.cp, resolve=True).items())
    masks = tuple(MaskChoice(label, m["name"], MappingProxyType(dict(m["params"])),
                             tuple(m["seqlens"]) if m.get("seqlens") else None)
                  for label, m in OmegaConf.to_container(cfg.mask, resolve=True).items())
    seqlen_per_gpu = (tuple(cfg.seqlen_per_gpu) if cfg.seqlen_per_gpu is not None
                      else DEFAULT_SEQLEN_PER_GPU[hardware.device])
    key = job_key(cfg.experiment_name, [o for o in overrides or []
                                        if not o.startswith(("timeout_min",))])
    out_dir, plots_dir = default_dirs(cfg, hardware, key)
    check_cpu_sized(hardware, cfg.hardware.name == "auto",
                    max(seqlen_per_gpu) * max(cfg.cp_sizes, default=1),
                    f"experiment={cfg.experiment_name}" if cfg.experiment_name != "cp_default"
                    else "this run")
    return CPBenchConfig(
        hardware=hardware, strategies=strategies, masks=masks, seqlen_per_gpu=seqlen_per_gpu,
        cp_sizes=tuple(cfg.cp_sizes), directions=tuple(cfg.directions),
        local_kernel=cfg.local_kernel, data=DataConfig(**cfg.data), gate=GateConfig(**cfg.gate),
        out_file=out_dir / "cp" / f"{key}.csv", plots_dir=plots_dir, force=cfg.force,
        report=cfg.report, progress=cfg.progress, seed=cfg.seed)


register_cp_schemas()


@hydra.main(config_path=str(CONFIGS_DIR), config_name="cp_bench", version_base="1.3")
def main(cfg: DictConfig) -> None:
    rank0 = int(os.environ.get("RANK", 0)) == 0
    try:
        config = cp_bench_config(cfg, list(HydraConfig.get().overrides.task))
    except ValueError as e:  # the same on every rank: one line from rank 0, no traceback
        if rank0:
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    created = init_distributed(config.hardware.device, cfg.timeout_min)
    try:
        rows = run_sweep(config)
        if rank0:
            print(summary_line(rows, config.out_file))
    except ValueError as e:
        if rank0:
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:
        if rank0:
            print(interrupted_line(e, config.out_file), file=sys.stderr)
        sys.exit(130)
    finally:
        if created:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
