"""``python -m bench.kernels [overrides]``: the kernel sweep under Hydra (configs/kernels.yaml).

    python -m bench.kernels                                   # hardware=auto (cpu without a GPU)
    python -m bench.kernels experiment=kernel_masks hardware=h200
    python -m bench.kernels -m kernel=ffa,flex mask=causal    # one job per kernel
    python -m bench.kernels 'kernel=[naive,custom]' kernel.custom.target=my_pkg.attn:my_attention

Rows go to ``runs/<hardware>/kernels/<job>.csv`` unless ``out_dir=`` says otherwise; the job's
tables and figures show every cell it asked for, also those skipped because another job's file
already holds them (the last lines name the files they were read from). A bad config value (an
unknown kernel or mask, a folder that cannot be written) ends the run with one ``error:`` line
before the first cell (in a ``-m`` sweep, a value that only its job can check is named by
Hydra's "Error executing job with overrides"); Ctrl-C ends it with one line saying how many rows
were written and how to resume.
"""
from __future__ import annotations

import importlib.util
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from bench.config import (CONFIGS_DIR, KernelBenchConfig, check_group_choices, kernel_bench_config,
                          register_schemas)
from bench.kernels.runner import JobResult, run_job
from bench.results import RowsNotWritten, interrupted_line, summary_line

register_schemas()


def target_warnings(config: KernelBenchConfig) -> list[str]:
    """One line for each kernel whose import target's module is not on the path here: its
    cells are recorded missing, which the sweep does not log (a corrected target is measured
    anew). The module is looked up, not imported: a module without the named function gives
    error rows, and the sweep logs that error once, listing the module's functions."""
    lines = []
    for kernel in config.kernels:
        target = kernel.options.get("target")
        if target is None:
            continue
        module = str(target).partition(":")[0]
        try:
            found = importlib.util.find_spec(module) is not None
            reason = f"No module named {module!r}"
        except ImportError as e:  # a parent package that is absent
            found, reason = False, str(e)
        if not found:
            lines.append(f"warning: custom kernel target {target} cannot be imported "
                         f"({reason}); its cells are recorded missing; check the module name "
                         f"and that its folder is on PYTHONPATH")
    return lines


def report_lines(result: JobResult, config: KernelBenchConfig) -> list[str]:
    """The lines that end a finished run: the rows written, and where the tables and figures
    are and which result files they were read from (only paths that exist)."""
    lines = [summary_line(result.rows, config.out_file, read=result.skipped)]
    report = result.report
    if report is None:
        return lines
    sources = ", ".join(str(s) for s in report.sources) or "no result file"
    lines.append(f"tables: {report.tables} (rows from {sources})")
    if report.figures:
        lines.append(f"figures: {config.plots_dir}/ ({len(report.figures)} files)")
    return lines


@hydra.main(config_path=str(CONFIGS_DIR), config_name="kernels", version_base="1.3")
def main(cfg: DictConfig) -> None:
    out_file = None
    try:
        config = kernel_bench_config(cfg, list(HydraConfig.get().overrides.task))
        out_file = config.out_file
        for line in target_warnings(config):
            print(line, file=sys.stderr)
        result = run_job(config)
    except (ValueError, RowsNotWritten) as e:  # a bad config value, a full disk: one line
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # Hydra names the failed job; on Slurm its log keeps the traceback
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2 if isinstance(e, ValueError) else 1)
    except KeyboardInterrupt as e:
        print(interrupted_line(e, out_file), file=sys.stderr)
        sys.exit(130)
    for line in report_lines(result, config):
        print(line)


if __name__ == "__main__":
    try:  # before Hydra composes: its error for kernel=[a,typo] lists no known kernels
        check_group_choices(sys.argv[1:])
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    main()
