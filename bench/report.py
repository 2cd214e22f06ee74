"""Tables of one experiment's result rows: one per (hardware, mask, direction, cp_size) and
metric, with seqlen (or another x column) as rows and kernels as columns; Markdown and CSV.

    python -m bench.report --results runs/cpu --out runs/cpu/tables/default   # one experiment
    python -m bench.report --results runs/cpu --experiment default --out t    # one of several
    python -m bench.report --results results/h200/kernels/*.csv --out results/h200/tables
    python -m bench.report docs [--check]   # docs/results.md from results/ (bench.results_page)

A folder gives the job files of one experiment (``<experiment>[__<overrides>].csv``, see
``bench.results.experiment_files``), never every CSV it holds, so an ad-hoc run does not land
in another experiment's tables; files given by name are merged as given. A cell that did not run
shows ``X (<status>)`` in Markdown (``missing``: its package is not installed here) and is empty
in CSV; the Markdown lists the reasons under each table. A cell of the experiment with no row at
all (a sweep that stopped early) shows ``not measured``. A metric no row recorded (peak memory on
CPU) gets a line saying why instead of a table. Rows read with their file (a job's report,
``bench.kernels.runner``) get a line per table naming the file each kernel's rows came from.
A column that holds the rows of several custom targets (one ``label=`` given to two) is named
in a warning; each cell shows the newest row.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from bench.results import (LOCAL_KERNEL, SOURCE, experiment_files, job_log_of, latest_rows,
                           read_results, seqlen_per_gpu)
from bench.status import NOT_MEASURED, experiment_cells, with_missing

__all__ = ["METRICS", "pivot", "write_tables", "shared_columns", "source_lines", "main"]

METRICS = {"tflops_per_s": "TFLOPs/s", "peak_mem_gb": "peak memory (GiB)", "runtime_ms": "runtime (ms)"}
# seqlen_per_gpu and the last: CP rows (whose tables have cp_size as rows, so one table per
# tokens-a-GPU; a CP row's seqlen is the whole sequence, seqlen_per_gpu * cp_size)
TABLE_GROUPS = ("hardware", "seqlen_per_gpu", "mask", "direction", "cp_size", LOCAL_KERNEL)
DESCRIPTION = ("Write Markdown and CSV tables (x values as rows, kernels as columns) from the "
               "result rows of one experiment, or of the files given.")


def pivot(rows: pd.DataFrame, value: str, x: str = "seqlen", series: str = "kernel",
          xs: Iterable | None = None, names: Iterable[str] | None = None) -> pd.DataFrame:
    """``x`` as rows, ``series`` as columns, ``value`` where status is ok, else ``X (status)``.
    ``xs`` and ``names`` add the experiment's other cells, shown ``not measured`` without a row."""
    cells = rows.assign(cell=[
        (f"{v:.4g}" if pd.notna(v) else "-") if s == "ok" else
        NOT_MEASURED if s == NOT_MEASURED else f"X ({s})"
        for v, s in zip(rows[value], rows["status"])])
    table = cells.pivot_table(index=x, columns=series, values="cell", aggfunc="last")
    order = list(dict.fromkeys([*(names or ()), *rows[series]]))
    index = sorted(set(table.index) | set(xs or ()))
    return table.reindex(index=index, columns=order).astype(object).fillna(NOT_MEASURED)


def _numeric(rows: pd.DataFrame, value: str, x: str, series: str) -> pd.DataFrame:
    ok = rows[rows["status"] == "ok"]
    table = ok.pivot_table(index=x, columns=series, values=value, aggfunc="last")
    order = list(dict.fromkeys(rows[series]))
    return table.reindex(columns=[c for c in order if c in table.columns]).sort_index()


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub Markdown table (no tabulate dependency)."""
    header = [str(table.index.name or "")] + [str(c) for c in table.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx)] + [str(v) for v in row]) + " |")
    return "\n".join(lines)


def _slug(*parts) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9_.=-]", "_", str(p)) for p in parts)


def _log_note(row: dict) -> str:
    """Where a failed cell's traceback is, for rows measured in a Slurm job."""
    log = job_log_of(row.get("env", ""))
    return f" [job log: {log}]" if log and row["status"] == "error" else ""


def _not_recorded(rows: pd.DataFrame, metric: str) -> str | None:
    """Why no measured row has ``metric`` (None when some do, or none was measured)."""
    ok = rows[rows["status"] == "ok"]
    if ok.empty or ok[metric].notna().any():
        return None
    if metric == "peak_mem_gb" and (ok["gpu_name"].astype(str) == "cpu").all():
        return ("not recorded: these rows ran on the CPU, where torch keeps no peak-allocation "
                "counter (bench.metrics.peak_mem_gb measures CUDA memory only)")
    return "not recorded in these rows"


def _reasons(rows: pd.DataFrame, series: str) -> list[str]:
    failed = rows[~rows["status"].isin(("ok", NOT_MEASURED))]
    seen = dict.fromkeys(f"- {r[series]} ({r['status']}): {r['message']}" + _log_note(r)
                         for r in failed.to_dict("records"))
    return list(seen)


def source_lines(rows: pd.DataFrame, x: str = "seqlen", series: str = "kernel") -> list[str]:
    """``<file>: <series> (<x> 256, 512), ...``, one line per results file that ``rows`` were
    read from (their SOURCE column: a job's report); none for rows without the column."""
    if SOURCE not in rows.columns:
        return []
    measured = rows[rows[SOURCE].astype(str) != ""]
    lines = []
    for file, group in measured.groupby(SOURCE, sort=True):
        cells = [f"{name} ({x} {', '.join(str(v) for v in sorted(set(g[x])))})"
                 for name, g in group.groupby(series, sort=False)]
        lines.append(f"{file}: {'; '.join(cells)}")
    return lines


def _target(spec) -> str:
    """The import target in a spec (``name[target=pkg.mod:fn@sha1:..]``), or ""."""
    spec = "" if pd.isna(spec) else str(spec)
    return spec.split("target=", 1)[1].split("@", 1)[0].split(",", 1)[0].rstrip("]") \
        if "target=" in spec else ""


def shared_columns(rows: pd.DataFrame, series: str = "kernel") -> list[str]:
    """One line per column of ``series`` whose rows (all of them, not only each cell's newest)
    measured several import targets (a custom ``label=`` given to two targets): its cells show
    whichever target ran last."""
    if "spec" not in rows.columns or rows.empty:
        return []
    targets = rows.assign(target=rows["spec"].map(_target))
    targets = targets[targets["target"] != ""]
    return [f"column {name!r} holds the rows of {group['target'].nunique()} targets "
            f"({', '.join(sorted(group['target'].unique()))}); each cell shows the newest row; "
            f"give each target its own kernel.<name>.label"
            for name, group in targets.groupby(series, sort=True)
            if group["target"].nunique() > 1]


def _frame(results, experiment: str | None, kind: str | None) -> pd.DataFrame:
    """Rows as given (a DataFrame), or read from the files of one experiment."""
    if isinstance(results, pd.DataFrame):
        return results
    return read_results(experiment_files(results, experiment, kind))


def write_tables(results: str | os.PathLike | Iterable | pd.DataFrame, out_dir: str | os.PathLike,
                 x: str = "seqlen", series: str = "kernel",
                 metrics: Iterable[str] = ("tflops_per_s", "peak_mem_gb"),
                 kind: str | None = "kernels", experiment: str | None = None) -> list[Path]:
    """Write ``<out_dir>/<metric>__<hardware>_<mask>_<direction>_cp<cp_size>.{md,csv}`` and one
    ``README.md`` that holds every Markdown table. ``results``: rows already read (a DataFrame,
    e.g. ``bench.results.rows_of_cells``: rows of status ``not measured`` stand for cells
    without a row, a SOURCE column names each row's file), files, read as given, or folders (a
    hardware folder narrowed to its ``<kind>/`` subfolder; None: not narrowed), read for the
    files of ``experiment`` (see ``bench.results.experiment_files``). Returns the written paths.

    Raises:
        ValueError: a folder holding several experiments and no ``experiment`` chosen.
    """
    frame = _frame(results, experiment, kind)
    warnings = "".join(f"Warning: {line}\n\n" for line in shared_columns(frame, series))
    frame = with_missing(latest_rows(frame))
    if x == "cp_size" and {"seqlen", "cp_size"} <= set(frame.columns):
        frame["seqlen_per_gpu"] = seqlen_per_gpu(frame)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written, sections = [], []
    if frame.empty:
        index = out_dir / "README.md"
        index.write_text("# Results\n\nNo result rows found.\n")
        return [index]
    groups = [g for g in TABLE_GROUPS if g in frame.columns and g not in (x, series)]
    experiment = experiment_cells(frame, [g for g in groups if g != "direction"], x, series)
    for key, rows in frame.groupby(groups, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        xs, names = experiment[tuple(k for g, k in zip(groups, key) if g != "direction")]
        title = ", ".join(f"{g}={k}" for g, k in zip(groups, key))
        reasons = _reasons(rows, series)
        sources = [f"- {line}" for line in source_lines(rows, x, series)]
        for metric in metrics:
            stem = _slug(metric, *key)
            _numeric(rows, metric, x, series).to_csv(out_dir / f"{stem}.csv")
            why_not = _not_recorded(rows, metric)
            md = why_not or to_markdown(pivot(rows, metric, x, series, xs, names))
            text = f"## {METRICS.get(metric, metric)}: {title}\n\n{md}\n"
            if reasons:
                text += "\nDid not run:\n\n" + "\n".join(reasons) + "\n"
            if sources:
                text += "\nRows read from:\n\n" + "\n".join(sources) + "\n"
            (out_dir / f"{stem}.md").write_text(text)
            written += [out_dir / f"{stem}.csv", out_dir / f"{stem}.md"]
            sections.append(text)
    index = out_dir / "README.md"
    index.write_text("# Results\n\n" + warnings + "\n".join(sections))
    return written + [index]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["docs"]:  # the reference results page: bench.results_page
        from bench.results_page import main as docs_main
        sys.exit(docs_main(argv[1:]))
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--results", nargs="+", required=True,
                        help="result CSV files (merged as given) or folders (a hardware folder "
                             "means its <kind>/ subfolder; a folder gives one experiment's files)")
    parser.add_argument("--experiment", default=None,
                        help="in folders, read the job files of this experiment "
                             "(<experiment>.csv, <experiment>__*.csv); needed when a folder "
                             "holds several")
    parser.add_argument("--out", required=True, help="folder for the tables")
    parser.add_argument("--x", default="seqlen", help="row column (cp_size for CP results)")
    parser.add_argument("--series", default="kernel", help="column of the table's columns")
    parser.add_argument("--kind", default="kernels", help="subfolder of a hardware folder to read")
    args = parser.parse_args(argv)
    try:
        files = experiment_files(args.results, args.experiment, args.kind)
    except (ValueError, FileNotFoundError) as e:
        parser.error(str(e))
    frame = read_results(files)
    for line in shared_columns(frame, args.series):
        print(f"warning: {line}")
    paths = write_tables(frame, args.out, x=args.x, series=args.series)
    print(f"wrote {len(paths)} files to {args.out} from {len(files)} result file(s)")
    for line in failed_cells(frame):
        print(line)


def failed_cells(results) -> list[str]:
    """One line per cell whose latest row is an error, naming its job log when it has one.
    ``results``: rows (a DataFrame) or result files."""
    rows = latest_rows(results if isinstance(results, pd.DataFrame) else read_results(results))
    rows = rows[rows["status"] == "error"]
    return [f"error: {r.get('kernel')} {r['mask']} seqlen={r['seqlen']} {r['direction']}: "
            f"{r['message']}{_log_note(r)}" for r in rows.to_dict("records")]


if __name__ == "__main__":
    main()
