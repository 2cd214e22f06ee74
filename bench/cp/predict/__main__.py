"""``python -m bench.cp.predict [overrides]``: predicted CP step times, no GPU needed.

    python -m bench.cp.predict                                   # 8-64 GPUs, 8k a GPU, H100
    python -m bench.cp.predict hardware=h200 'cp_sizes=[8,16,32,64,128,256]' local_kernel=triton
    python -m bench.cp.predict experiment=cp_h200x4 hardware=h200   # a measured sweep's cells

Composes configs/predict.yaml (the CP sweep's groups plus the link model and node size),
predicts every cell (``bench.cp.predict.sweep``), writes ``<out_dir>/cp_predicted/<job>.csv``
with status ``predicted`` and, with ``report=true``, the figures under ``plots_dir``:
hatched bars (predicted) per mask and direction, and the communication volume per GPU. A bad
config value ends the run with one ``error:`` line.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bench.config import CONFIGS_DIR, register_schemas
from bench.results import summary_line

from .config import predict_config, register_predict_schema
from .figures import plot_predictions
from .sweep import predict_sweep

register_schemas()
register_predict_schema()


@hydra.main(config_path=str(CONFIGS_DIR), config_name="predict", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        config = predict_config(cfg, list(HydraConfig.get().overrides.task))
    except ValueError as e:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    progress = print if cfg.progress else None
    rows = predict_sweep(config, progress)
    print(summary_line(rows, config.out_file))
    if config.sweep.report:
        paths = plot_predictions(config.out_file, config.sweep.plots_dir)
        print(f"wrote {len(paths)} figures under {config.sweep.plots_dir}")


if __name__ == "__main__":
    main()
