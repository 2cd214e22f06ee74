"""``python -m bench.kernels [overrides]``: the kernel sweep under Hydra (configs/kernels.yaml).

    python -m bench.kernels                                   # hardware=auto (cpu without a GPU)
    python -m bench.kernels experiment=kernel_masks hardware=h200
    python -m bench.kernels -m kernel=ffa,flex mask=causal    # one job per kernel
    python -m bench.kernels 'kernel=[naive,custom]' kernel.custom.target=my_pkg.attn:my_attention

Rows go to ``runs/<hardware>/kernels/<job>.csv`` unless ``out_dir=`` says otherwise. A bad
config value ends the run with one ``error:`` line before the first cell (in a ``-m`` sweep,
Hydra's "Error executing job with overrides" names the job instead); Ctrl-C ends it with one
line saying how many rows were written and how to resume.
"""
from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bench.config import CONFIGS_DIR, KernelBenchConfig, kernel_bench_config, register_schemas
from bench.kernels.runner import run_sweep
from bench.results import interrupted_line, summary_line

register_schemas()


def warn_unimportable_targets(config: KernelBenchConfig) -> None:
    """One line on the terminal for each kernel whose import target cannot be loaded here (its
    cells are recorded ``missing`` with the reason; a corrected target is measured anew)."""
    from bench.kernels.custom import load_target

    for kernel in config.kernels:
        target = kernel.options.get("target")
        if target is None:
            continue
        try:
            load_target(target)
        except Exception as e:  # anything the user's module raises on import: warn, go on
            print(f"warning: kernel.{kernel.label}.target={target} cannot be loaded here "
                  f"({type(e).__name__}: {e}); its cells are recorded missing",
                  file=sys.stderr)


@hydra.main(config_path=str(CONFIGS_DIR), config_name="kernels", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out_file = None
    try:
        config = kernel_bench_config(cfg, list(HydraConfig.get().overrides.task))
        out_file = config.out_file
        warn_unimportable_targets(config)
        rows = run_sweep(config)
    except ValueError as e:  # a bad config value: one line, no traceback
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # Hydra names the failed job; on Slurm its log keeps the traceback
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as e:
        print(interrupted_line(e, out_file), file=sys.stderr)
        sys.exit(130)
    print(summary_line(rows, config.out_file))
    if config.report:
        print(f"tables: {config.tables_dir}/README.md; figures: {config.plots_dir}/")


if __name__ == "__main__":
    main()
