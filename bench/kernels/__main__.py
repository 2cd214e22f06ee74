"""``python -m bench.kernels [overrides]``: the kernel sweep under Hydra (configs/kernels.yaml).

    python -m bench.kernels                                   # hardware=auto (cpu without a GPU)
    python -m bench.kernels experiment=kernel_masks hardware=h200
    python -m bench.kernels -m kernel=ffa,flex mask=causal    # one job per kernel
    python -m bench.kernels 'kernel=[naive,custom]' kernel.custom.target=my_pkg.attn:my_attention
"""
from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from bench.config import CONFIGS_DIR, kernel_bench_config, register_schemas
from bench.kernels.runner import run_sweep

register_schemas()


@hydra.main(config_path=str(CONFIGS_DIR), config_name="kernels", version_base="1.3")
def main(cfg: DictConfig) -> None:
    config = kernel_bench_config(cfg, list(HydraConfig.get().overrides.task))
    rows = run_sweep(config)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    print(f"wrote {len(rows)} rows to {config.out_file} {counts or '(all cells already done)'}")


if __name__ == "__main__":
    main()
