"""The kernel sweep: for each cell (mask, seqlen, kernel, direction) check, gate, time, write a row.

Per (mask, seqlen) the mask is built once (document lengths from ``bench.data``), so every
kernel sees the same mask and the same q, k, v. Per kernel: ``supports`` (else rows
``unsupported``), ``prepare`` (untimed), the correctness gate (else rows ``wrong``), then per
direction: reset the peak-memory counter, time with CUDA events (median of ``repeat`` after
``warmup``), read the peak, write the row at once. Exceptions become rows as ``bench.sweep``
says (unsupported, missing, oom, error; memory is freed first); the sweep goes on. Cells with a
final row in the results folder for the same measured function (``bench.results.RESUME_KEY``:
the label's adapter, options, import target code and version) are skipped unless ``force``; the
job's tables and figures still show them, read from the file that holds them. Ctrl-C raises
``SweepInterrupted`` with the number of rows written. The folders a run writes are checked
before its first cell; a row that cannot be written mid-run (a full disk) stops the sweep with
``RowsNotWritten``, never recorded as the kernel's failure.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from bench.config import KernelBenchConfig, KernelChoice, MaskChoice
from bench.gate import check_prepared, gate_rows, reference, restrict_dout
from bench.masks import Mask, UnsupportedMask
from bench.metrics import peak_mem_gb, reset_peak_mem, time_cuda_ms
from bench.problem import Shapes, make_dout, make_inputs
from bench.results import (FINAL_STATUSES, SOURCE, ResultRow, RowsNotWritten, RunMeta,
                           SweepInterrupted, check_writable, done_cells, record_row, repair_file,
                           rows_of_cells, run_meta)
from bench.spec import measured_spec
from bench.sweep import (RowSource, cell_mask, error_message, failure_of, free_memory,
                         supports_failure)

from . import load_adapter
from .base import KernelAdapter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobReport:
    """What a job's report wrote: its tables' index, its figures, and the results files the
    rows in them were read from (the job's own file and those of jobs that measured a cell the
    job skipped)."""

    tables: Path
    figures: list[Path]
    sources: list[Path]


@dataclass(frozen=True)
class JobResult:
    """A finished job: the rows it wrote, the cells it skipped as measured elsewhere, and its
    report (None without ``report``)."""

    rows: list[ResultRow]
    skipped: int = 0
    report: JobReport | None = None


@dataclass
class _Cell:
    """What the rows of one (kernel, mask, seqlen) share."""

    kernel: KernelChoice
    adapter: KernelAdapter
    mask_label: str
    mask: Mask
    shapes: Shapes


def _version(adapter: KernelAdapter) -> str:
    try:
        return adapter.version()
    except Exception as e:  # a version probe must not lose the rows
        return f"unknown ({error_message(e)})"


class KernelRunner:
    """Runs one ``KernelBenchConfig``; ``run()`` returns the rows it wrote."""

    def __init__(self, config: KernelBenchConfig) -> None:
        self.config = config
        if config.hardware.device == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"hardware {config.hardware.name!r} wants device 'cuda', but CUDA is "
                             f"not available; use hardware=cpu or hardware=auto")
        check_writable(config.results_dir, "out_dir")
        if config.report:
            check_writable(config.tables_dir, "out_dir")
            if config.plots_dir is not None:
                check_writable(config.plots_dir, "plots_dir")
        self.device = torch.device(config.hardware.device)
        self.meta: RunMeta = run_meta()
        self.source = RowSource(self.meta, config.hardware.name, self.meta.env)
        self.adapters = {k.label: load_adapter(k.name, **dict(k.options)) for k in config.kernels}
        # what each label measures, for the resume key and the rows
        self.specs = {k.label: measured_spec(k.name, k.options) for k in config.kernels}
        self.versions = {label: _version(a) for label, a in self.adapters.items()}
        repair_file(config.out_file)  # a torn last row from a crash: repaired before reading
        self.done = set() if config.force else done_cells(config.results_dir, FINAL_STATUSES) \
            if config.results_dir.exists() else set()
        self.rows: list[ResultRow] = []
        self.skipped = 0
        self.logged: set[tuple[str, str]] = set()  # (label, message) of the errors logged
        # resume key -> key columns of every cell this job asks for, for its report
        self.asked: dict[tuple, dict] = {}

    # -- rows ------------------------------------------------------------------------------
    def _ask(self, cell: _Cell, direction: str) -> tuple:
        """The resume key of a cell, noted (with its columns) as one the job's report shows."""
        label = cell.kernel.label
        key = self.source.key(label=label, mask_label=cell.mask_label, shapes=cell.shapes,
                              direction=direction, cp_size=1, spec=self.specs[label],
                              version=self.versions[label])
        s = cell.shapes
        self.asked[key] = dict(hardware=self.source.hardware, kernel=label, mask=cell.mask_label,
                               seqlen=s.seqlen, batch=s.batch, num_heads_q=s.num_heads_q,
                               num_heads_kv=s.num_heads_kv, head_dim=s.head_dim, dtype=s.dtype,
                               direction=direction, cp_size=1, spec=self.specs[label],
                               kernel_version=self.versions[label])
        return key

    def _write(self, cell: _Cell, direction: str, status: str, message: str = "",
               runtime_ms: float | None = None, peak: float | None = None,
               build_ms: float | None = None) -> None:
        label = cell.kernel.label
        row = self.source.row(label=label, version=self.versions[label], spec=self.specs[label],
                              mask_label=cell.mask_label, mask=cell.mask, shapes=cell.shapes,
                              direction=direction, cp_size=1, status=status, message=message,
                              runtime_ms=runtime_ms, peak_mem_gb=peak, build_ms=build_ms)
        record_row(self.config.out_file, row, self.rows)

    # -- cells -----------------------------------------------------------------------------
    def _measure(self, cell: _Cell, pending: list[str], reference_cache: dict) -> None:
        """Everything after ``supports``: prepare, gate, time each pending direction."""
        config, remaining = self.config, list(pending)
        failure: tuple[str, str] | None = None
        inputs = prepared = None
        try:
            inputs = make_inputs(cell.shapes, self.device, seed=config.seed)
            if config.gate.enabled:
                self._gate_inputs(cell, inputs, reference_cache)
            prepared = cell.adapter.prepare(cell.mask, cell.shapes, self.device, inputs)
            inputs = None  # the adapter holds its own copies; the peak should not count ours
            verdict = None
            for direction in sorted(pending, key=("fwd", "bwd").index):  # forward first
                if config.gate.enabled:  # per direction: a backward the kernel cannot run
                    # (raising) must not cost the forward its row
                    verdict = check_prepared(prepared, reference_cache["ref"], cell.shapes.dtype,
                                             with_grads=direction == "bwd", seed=config.gate.seed)
                if verdict is not None and verdict.status(direction) == "wrong":
                    self._write(cell, direction, "wrong", verdict.message(direction))
                    remaining.remove(direction)
                    continue
                notes = [verdict.message(direction) if verdict is not None else ""]
                if direction == "bwd" and reference_cache.get("restricted"):
                    notes.append(self._time_with_whole_dout(cell, prepared))
                fn = prepared.fwd if direction == "fwd" else prepared.bwd
                reset_peak_mem(self.device)
                hw = config.hardware
                runtime = time_cuda_ms(fn, hw.warmup, hw.repeat, hw.warmup_ms)
                notes += [f"{k}={v}" for k, v in prepared.extra.items()]
                self._write(cell, direction, "ok", "; ".join(n for n in notes if n), runtime,
                            peak_mem_gb(self.device), prepared.build_ms)
                remaining.remove(direction)
        except RowsNotWritten:  # the results file, not the kernel: no later row could be kept
            raise
        except Exception as e:  # the sweep goes on; the row carries the status and the error
            failure = failure_of(e)
            if failure[0] == "error" and (cell.kernel.label, failure[1]) not in self.logged:
                # once per kernel and message: a misspelt custom target fails every cell alike
                self.logged.add((cell.kernel.label, failure[1]))
                log.warning("kernel %s on %s S=%d failed: %s", cell.kernel.label,
                            cell.mask_label, cell.shapes.seqlen, failure[1])
        finally:
            # leave the except blocks first, so no traceback still holds the tensors
            del inputs, prepared
            free_memory(self.device)
            if failure is not None:
                for direction in remaining:
                    self._write(cell, direction, *failure)

    def _time_with_whole_dout(self, cell: _Cell, prepared) -> str:
        """After the gate (dout zero off its rows), the whole dout for the timed backward: the
        values change the GPU's power draw and clocks (bench.kernels.base.Prepared.set_dout).
        Returns the row's note where the adapter cannot swap it."""
        if prepared.set_dout is None:
            return "dout=gate rows only (the adapter cannot swap it)"
        prepared.set_dout(make_dout(cell.shapes, self.device, seed=self.config.seed))
        return ""

    def _gate_inputs(self, cell: _Cell, inputs, reference_cache: dict) -> None:
        """Restrict dout to the gate's rows; build the cell's reference once for all kernels."""
        gate = self.config.gate
        if "rows" not in reference_cache:
            reference_cache["rows"] = gate_rows(cell.shapes.seqlen, rows=gate.rows,
                                                full_max_seqlen=gate.full_max_seqlen,
                                                seed=gate.seed)
        restrict_dout(inputs, reference_cache["rows"])
        reference_cache["restricted"] = len(reference_cache["rows"]) < cell.shapes.seqlen
        if "ref" not in reference_cache:
            reference_cache["ref"] = reference(cell.mask, cell.shapes, inputs,
                                               reference_cache["rows"],
                                               grads="bwd" in self.config.directions)

    def _run_cell(self, cell: _Cell, pending: list[str], reference_cache: dict) -> None:
        failure = supports_failure(lambda: cell.adapter.supports(cell.mask, cell.shapes,
                                                                 self.device))
        per_direction = getattr(cell.adapter, "supports_direction", lambda d: None)
        runnable = []
        for direction in pending:
            refused = failure or supports_failure(lambda: per_direction(direction))
            if refused is None:
                runnable.append(direction)
            else:
                self._write(cell, direction, *refused)
        if runnable:
            self._measure(cell, runnable, reference_cache)

    def run(self) -> list[ResultRow]:
        config = self.config
        cells = [(m, s) for m in config.masks for s in config.seqlens_for(m)]
        total = len(cells) * len(config.kernels) * len(config.directions)
        bar = tqdm(total=total, desc="kernel cells", unit="cell", disable=not config.progress)
        try:
            self._run_cells(cells, bar)
        finally:  # also on Ctrl-C, so the entry point's last line starts on a line of its own
            bar.close()
        return self.rows

    def _run_cells(self, cells: list[tuple[MaskChoice, int]], bar: tqdm) -> None:
        config = self.config
        for choice, seqlen in cells:
            shapes = config.shapes(seqlen)
            reference_cache: dict = {}
            mask: Mask | None = None
            mask_error = None
            try:
                mask = cell_mask(choice, seqlen, config.data, shapes.num_heads_kv)
            except (ValueError, UnsupportedMask) as e:
                mask_error = error_message(e)
            for kernel in config.kernels:
                cell = _Cell(kernel, self.adapters[kernel.label], choice.label, mask, shapes)
                pending = [d for d in config.directions if self._ask(cell, d) not in self.done]
                self.skipped += len(config.directions) - len(pending)
                bar.set_postfix_str(f"{kernel.label} {choice.label} S={seqlen}")
                if pending and mask_error is not None:
                    for direction in pending:
                        self._write(cell, direction, "error", f"mask: {mask_error}")
                elif pending:
                    self._run_cell(cell, pending, reference_cache)
                bar.update(len(config.directions))
            reference_cache.clear()
            free_memory(self.device)


def run_job(config: KernelBenchConfig) -> JobResult:
    """Run the sweep of ``config``; rows go to ``config.out_file`` as they are measured. With
    ``report``, the tables of every cell the job asked for go to ``config.tables_dir`` and its
    figures to ``config.plots_dir``: the cells it measured, those it skipped because another
    file of the folder holds their row (read from there, the file named), and ``not measured``
    for any other (see ``bench.results.rows_of_cells``). Files of other jobs are not merged in
    beyond that: see ``bench.report``.

    Raises:
        ValueError: a CUDA preset without CUDA, an unknown kernel, a bad adapter option, a
            folder that cannot be written.
        SweepInterrupted: Ctrl-C; it carries the number of rows written.
        RowsNotWritten: a row could not be appended mid-run.

    Example:
        >>> result = run_job(config)   # config: bench.config.KernelBenchConfig
        >>> {r.status for r in result.rows} <= {"ok", "unsupported", "missing", "oom", "error", "wrong"}
        True
    """
    runner = KernelRunner(config)
    try:
        rows = runner.run()
    except KeyboardInterrupt:
        raise SweepInterrupted(len(runner.rows), config.out_file) from None
    report = write_job_report(config, runner.asked) if config.report else None
    return JobResult(rows, runner.skipped, report)


def write_job_report(config: KernelBenchConfig, asked: dict[tuple, dict]) -> JobReport:
    """The tables and figures of the cells ``asked`` (resume key -> key columns), each read
    from whichever file of ``config.results_dir`` holds its newest row."""
    from bench.plot import plot_results
    from bench.report import write_tables

    frame = rows_of_cells(config.results_dir, asked)
    write_tables(frame, config.tables_dir)
    figures = plot_results(frame, config.plots_dir) if config.plots_dir is not None else []
    sources = sorted({Path(f) for f in frame[SOURCE] if f}) if not frame.empty else []
    return JobReport(config.tables_dir / "README.md", figures, sources)


def run_sweep(config: KernelBenchConfig) -> list[ResultRow]:
    """:func:`run_job`, returning only the rows written by this call (skipped cells write none).

    Example:
        >>> rows = run_sweep(config)   # config: bench.config.KernelBenchConfig
    """
    return run_job(config).rows


__all__ = ["JobReport", "JobResult", "KernelRunner", "run_job", "run_sweep", "write_job_report"]
