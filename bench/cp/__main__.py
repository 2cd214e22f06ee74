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

import hydra
import torch.distributed as dist
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bench.config import CONFIGS_DIR, cp_bench_config, register_schemas
from bench.cp.runner import default_cuda_connections, init_distributed, run_sweep
from bench.results import interrupted_line, summary_line

register_schemas()


@hydra.main(config_path=str(CONFIGS_DIR), config_name="cp_bench", version_base="1.3")
def main(cfg: DictConfig) -> None:
    # first: the config's hardware preset reads the GPU's name, which starts CUDA
    default_cuda_connections()
    rank0 = int(os.environ.get("RANK", 0)) == 0
    try:
        config = cp_bench_config(cfg, list(HydraConfig.get().overrides.task))
    except ValueError as e:  # the same on every rank: one line from rank 0, no traceback
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # Hydra names the failed job
        if rank0:
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    created = init_distributed(config.hardware.device, cfg.timeout_min)
    try:
        rows = run_sweep(config)
        if rank0:
            print(summary_line(rows, config.out_file))
    except ValueError as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise
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
