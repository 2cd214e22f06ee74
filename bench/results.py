"""Result rows: the column schema, run metadata, appending one row at a time, reading them back.

One row per (kernel or CP strategy, mask, seqlen, direction, shapes, cp_size). A row is appended
and fsync'ed as soon as it is measured, so a sweep that dies loses nothing already measured, and
a rerun skips the cells whose row has a final status and the same measured function (the
resume key adds ``spec`` and ``kernel_version`` to the cell: a changed custom target, option,
backend or package version is measured again). Parallel jobs (Hydra multirun, Slurm) write one
file each; a file lock guards the rare case of two writers on one file.

A crash can tear the last line of a file; the next append repairs it first (whole rows kept,
the torn text set aside and named; ``bench.result_file``). Readers skip torn lines and empty or
damaged files with a warning that names them, so a damaged file never blocks a run. A row that
cannot be written at all raises ``RowsNotWritten``; ``check_writable`` finds that out before a
sweep's first cell.

A job's report reads its cells wherever they were measured: ``rows_of_cells`` gives, per resume
key the job asked for, the newest row in any file of the folder (its file in column SOURCE),
and a ``not measured`` row for a cell no file holds.
"""
from __future__ import annotations

import csv
import datetime as _dt
import functools
import hashlib
import io
import logging
import os
import signal
import tempfile
import threading
import uuid
from contextlib import contextmanager
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from filelock import FileLock

from bench import machine, provenance
from bench.result_file import describe_torn, repair, scan
from bench.status import NOT_MEASURED

__all__ = ["ID_DTYPES", "STATUSES", "FINAL_STATUSES", "CELL_KEY", "RESUME_KEY", "ENV_COLUMNS",
           "SOURCE", "ResultRow", "RunMeta", "SweepInterrupted", "RowsNotWritten", "append_row",
           "repair_file", "check_writable", "summary_line", "interrupted_line", "record_row",
           "job_log_of", "job_log_path", "kind_sources", "experiment_of", "experiment_files",
           "read_results", "latest_rows", "done_cells", "resume_key", "rows_of_cells",
           "custom_label", "run_meta", "seqlen_per_gpu"]

log = logging.getLogger(__name__)

# ok: measured; unsupported: the kernel cannot express the mask/shapes here; missing: its package
# is not installed here (bench.status); oom: ran out of device memory; error: any other
# exception; wrong: failed the correctness gate, so not timed; predicted: not measured, a
# model's prediction (bench.cp.predict; its own files, never mixed with measured rows).
STATUSES = ("ok", "unsupported", "missing", "oom", "error", "wrong", "predicted")
# A rerun skips these; "error" cells are measured again (errors are often transient or fixed),
# and so are "missing" ones (the package may have been installed since).
FINAL_STATUSES = ("ok", "unsupported", "oom", "wrong")
# Process-level settings that change kernel timings; copied into every row.
ENV_COLUMNS = ("CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_ALGO", "NCCL_PROTO", "TORCH_CUDNN_V8_API_ENABLED",
               "MAGI_ATTENTION_FA4_BACKEND")


@dataclass(frozen=True)
class ResultRow:
    """One measured cell. Units are in the names; None is written as an empty field."""

    run_id: str
    time: str
    git_sha: str
    hardware: str
    gpu_name: str
    torch_version: str
    kernel_version: str
    kernel: str
    mask: str
    seqlen: int
    batch: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    dtype: str
    direction: str
    cp_size: int
    mask_area: float | None
    flops: float | None
    runtime_ms: float | None
    tflops_per_s: float | None
    peak_mem_gb: float | None
    build_ms: float | None
    status: str
    message: str
    env: str
    # What defines the measured function beyond its label (bench.spec.measured_spec): adapter
    # or strategy name, options / knobs, an import target and its source hash.
    spec: str = ""
    # The machine beyond its GPU name (bench.machine): clock and power limits; driver, CUDA and
    # library versions. Empty in rows written before these columns existed.
    gpu_clocks: str = ""
    versions: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
# Hex identifiers, read as text: left to pandas, a commit "8917412022e3" or "123456789012"
# comes back as a number, and its rows as of no known commit
ID_DTYPES = {"run_id": str, "git_sha": str}
# The columns that name a cell: a rerun skips a cell whose key has a final-status row.
CELL_KEY = ("hardware", "kernel", "mask", "seqlen", "batch", "num_heads_q", "num_heads_kv",
            "head_dim", "dtype", "direction", "cp_size")
# The columns a rerun compares: the cell, and what was measured in it. Tables keep the newest
# row per CELL_KEY, so a re-measured kernel replaces its older numbers there.
RESUME_KEY = CELL_KEY + ("spec", "kernel_version")
# CP rows name their local attention kernel in kernel_version ("bench.cp.magi local=fa4");
# read_results derives this column from it, and tables and figures keep one row per cell AND
# local kernel, so runs of the same strategies on FA4 and on Triton stay apart.
LOCAL_KERNEL = "local_kernel"
TABLE_KEY = CELL_KEY + (LOCAL_KERNEL,)
# The file a row was read from (read_results(..., with_source=True)); never written to a file.
SOURCE = "source"
# A custom kernel's default label: "custom:" and its import target, so two targets never share
# a column (rows written under the bare label "custom" are read under this one).
CUSTOM_PREFIX = "custom:"


@dataclass(frozen=True)
class RunMeta:
    """What every row of one process shares."""

    run_id: str
    git_sha: str
    gpu_name: str
    torch_version: str
    env: str
    gpu_clocks: str = ""
    versions: str = ""


@functools.lru_cache(maxsize=1)
def _git_sha() -> str:
    """``<sha>``, ``<sha>-dirty`` or ``unknown``: from git, or from PROVENANCE.json on a copy of
    the tree without .git (bench.provenance)."""
    return provenance.current().label


def job_log_path() -> str | None:
    """The stdout log of the submitit job this process runs in (a sweep sent to Slurm with
    hydra/launcher=slurm), so that report lines of failed cells can name it; None elsewhere."""
    if "SUBMITIT_FOLDER" not in os.environ:
        return None
    import submitit

    try:
        return str(submitit.JobEnvironment().paths.stdout)
    except RuntimeError:  # SUBMITIT_FOLDER set, but not inside a job submitit recognises
        return None


def job_log_of(env: str) -> str | None:
    """The ``job_log=`` entry of a row's env field, if any."""
    for item in str(env or "").split(";"):
        if item.startswith("job_log="):
            return item[len("job_log="):]
    return None


def run_meta() -> RunMeta:
    """Run id, git commit, GPU name ('cpu' without CUDA), torch version, the ENV_COLUMNS set and
    the machine's clocks and versions (bench.machine)."""
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    env = ";".join(f"{k}={os.environ[k]}" for k in ENV_COLUMNS if k in os.environ)
    log = job_log_path()
    if log is not None:
        env = ";".join(filter(None, [env, f"job_log={log}"]))
    return RunMeta(run_id=uuid.uuid4().hex[:12], git_sha=_git_sha(), gpu_name=gpu,
                   torch_version=torch.__version__, env=env, gpu_clocks=machine.gpu_clocks(),
                   versions=machine.versions())


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _lock_path(path: Path) -> str:
    # in the temp dir, not next to the CSV, so results/ holds only results (parallel jobs on other
    # hosts write their own files; the lock only guards writers on one host)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"bench-results-{digest}.lock")


# Per file this process last wrote: (size after the write, header). A file of the same size
# is still as this process left it, so the next append skips the full check.
_CHECKED: dict[str, tuple[int, list[str]]] = {}


def _checked_header(path: Path) -> list[str] | None:
    """The header to append under, after repairing the file if it is not as we left it."""
    known = _CHECKED.get(str(path.resolve()))
    if known is not None and path.exists() and path.stat().st_size == known[0]:
        return known[1]
    return repair(path, COLUMNS)


def _one_line(value: Any) -> Any:
    # one row per line is what lets a reader tell a torn line from a whole one
    if value is None:
        return ""
    return value.replace("\r", " ").replace("\n", " ") if isinstance(value, str) else value


class RowsNotWritten(OSError):
    """A row could not be appended to its results file (disk full, folder removed or made
    read-only mid-run): the sweep stops, since no later row could be kept either."""


def check_writable(folder: str | os.PathLike, setting: str) -> None:
    """Create ``folder`` and a file in it, to fail before the first cell rather than at its row.

    Raises:
        ValueError: one line naming ``setting`` (the config key that chose the folder) and why.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise ValueError(f"{setting}: cannot write {folder} ({e.strerror or type(e).__name__}); "
                         f"choose a folder you can write, e.g. {setting}=$HOME/bench_runs") from None


def append_row(path: str | os.PathLike, row: ResultRow) -> None:
    """Append ``row`` to the CSV at ``path`` (header written on creation), flushed and fsync'ed.

    A file a crash left torn is repaired first (:func:`repair_file`).

    Raises:
        RowsNotWritten: the file or its folder cannot be written.
    """
    path = Path(path)
    try:
        _append(path, row)
    except OSError as e:
        raise RowsNotWritten(f"cannot write rows to {path} ({e.strerror or e})") from e


def _append(path: Path, row: ResultRow) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(_lock_path(path)):
        header = _checked_header(path)
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=header or COLUMNS, restval="")
            if header is None:
                writer.writeheader()
            writer.writerow({k: _one_line(v) for k, v in asdict(row).items()})
            f.flush()
            os.fsync(f.fileno())
        _CHECKED[str(path.resolve())] = (path.stat().st_size, header or list(COLUMNS))


def repair_file(path: str | os.PathLike) -> None:
    """Repair a results file before a run reads it: whole rows kept, torn lines dropped into
    ``<file>.dropped``, a file without a usable header set aside as ``<file>.damaged``, each
    named in a warning (``bench.result_file.repair``). Nothing happens to a sound file."""
    path = Path(path)
    if not path.exists():
        return
    with FileLock(_lock_path(path)):
        header = repair(path, COLUMNS)
        if header is not None:
            _CHECKED[str(path.resolve())] = (path.stat().st_size, header)


@contextmanager
def _interrupts_deferred():
    """Ctrl-C inside the block takes effect when the block ends (signals reach only the main
    thread; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt


def record_row(path: str | os.PathLike, row: ResultRow, rows: list[ResultRow]) -> None:
    """:func:`append_row`, then ``row`` added to ``rows``, as one step that Ctrl-C cannot split:
    the count a stopped run reports is the number of rows in its file."""
    with _interrupts_deferred():
        append_row(path, row)
        rows.append(row)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, carrying what the entry point's one-line message needs."""

    def __init__(self, rows_written: int, out_file: str | os.PathLike) -> None:
        super().__init__(f"interrupted after {rows_written} rows")
        self.rows_written = rows_written
        self.out_file = Path(out_file)


def summary_line(rows: Iterable[ResultRow], out_file: str | os.PathLike, read: int = 0) -> str:
    """The line that ends a finished run: rows written, by status, and ``read``, the number of
    cells skipped because a row elsewhere already measured them. A run that wrote nothing
    names no file (it may not exist)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    total = sum(counts.values())
    line = f"wrote {total} rows to {out_file} {counts}" if total else "wrote 0 rows"
    if read:
        line += (f"; {read} cells already measured were read, not run again "
                 f"(force=true measures them again)")
    elif not total:
        line += " (all cells already done)"
    return line


def interrupted_line(error: KeyboardInterrupt, out_file: str | os.PathLike | None) -> str:
    """The one line that ends a run stopped by Ctrl-C (``error`` a SweepInterrupted, or a plain
    KeyboardInterrupt from before the sweep started)."""
    written = getattr(error, "rows_written", None)
    done = (f"wrote {written} rows to {out_file}" if written is not None
            else f"rows measured so far are in {out_file}" if out_file else "no rows written")
    return f"interrupted: {done}; run the same command again to resume (done cells are skipped)"


def _csv_files(sources: Iterable[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    files: list[Path] = []
    for src in map(Path, sources):
        if src.is_dir():
            files += sorted(src.rglob("*.csv"))
        elif src.is_file():
            files.append(src)
        else:
            raise FileNotFoundError(f"results path {src} does not exist")
    return files


def kind_sources(sources: Iterable[str | os.PathLike] | str | os.PathLike, kind: str) -> list[Path]:
    """Narrow hardware folders to their ``<kind>/`` subfolder (``kernels`` or ``cp``) when they
    have one, so ``results/h200`` means the kernel rows to the kernel report and plots."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    return [Path(s) / kind if (Path(s) / kind).is_dir() else Path(s) for s in sources]


def experiment_of(file: str | os.PathLike) -> str:
    """The experiment a job file belongs to: ``<experiment>__<overrides>.csv`` -> experiment."""
    return Path(file).stem.split("__")[0]


def experiment_files(sources: Iterable[str | os.PathLike] | str | os.PathLike,
                     experiment: str | None = None, kind: str | None = None) -> list[Path]:
    """The result files of one experiment: files in ``sources`` as given; in a folder (narrowed
    to its ``<kind>/`` subfolder, see :func:`kind_sources`) the job files of ``experiment``
    (``<experiment>.csv``, ``<experiment>__*.csv``), or, with ``experiment`` None, all of them
    when they belong to one experiment.

    Raises:
        FileNotFoundError: a source that does not exist, or no file of ``experiment``.
        ValueError: a folder holding several experiments and no ``experiment`` chosen.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    files: list[Path] = []
    for src in (kind_sources(sources, kind) if kind else map(Path, sources)):
        if not src.is_dir():
            files += _csv_files(src)
            continue
        found = [f for f in _csv_files(src) if _is_results_file(f)]
        for empty in [f for f in found if f.stat().st_size == 0]:  # no rows, no experiment
            log.warning("%s: empty (0 bytes); skipped", empty)
            found.remove(empty)
        names = sorted({experiment_of(f) for f in found})
        if experiment is not None:
            found = [f for f in found if experiment_of(f) == experiment]
            if not found:
                raise FileNotFoundError(f"{src} has no result file of experiment {experiment!r} "
                                        f"(it has: {', '.join(names) or 'none'})")
        elif len(names) > 1:
            raise ValueError(f"{src} holds the rows of several experiments ({', '.join(names)}); "
                             f"choose one with --experiment, or give the files to merge")
        files += found
    return files


def _is_results_file(file: Path) -> bool:
    """A results CSV (by its first line), sound or not; tables written by bench.report are not."""
    with file.open("rb") as f:
        first = f.readline(200)
    return not first or first.startswith(b"run_id")


def _read_file(file: Path) -> pd.DataFrame | None:
    """The whole rows of one file; None (with a warning when it is a damaged results file) for
    a file without rows to read."""
    found = scan(file)
    if found.header is None:
        if found.damaged:
            log.warning("%s: %s; skipped", file, found.reason)
        return None
    if found.torn:
        log.warning("%s: skipped %d torn line(s) (%s); the next run that writes this file "
                    "repairs it", file, len(found.torn), describe_torn(found.torn))
    text = "\n".join([found.header_line, *found.lines, ""])
    return pd.read_csv(io.StringIO(text), keep_default_na=True, dtype=ID_DTYPES)


def read_results(sources: Iterable[str | os.PathLike] | str | os.PathLike,
                 with_source: bool = False) -> pd.DataFrame:
    """All whole rows of the given CSV files and folders (searched recursively for ``*.csv``);
    ``with_source`` adds the column SOURCE, the file each row came from.

    Files whose header lacks the ``status`` column (tables written by ``bench.report``) are
    skipped; so are empty and damaged results files and torn lines, each named in a warning.
    Rows of a custom kernel under the bare label ``custom`` are read under
    :func:`custom_label` of their target. Returns an empty frame with the schema columns when
    nothing is found.
    """
    frames = []
    for file in _csv_files(sources):
        frame = _read_file(file)
        if frame is not None:
            frames.append(frame.assign(**{SOURCE: str(file)}) if with_source else frame)
    if not frames:
        return pd.DataFrame(columns=list(COLUMNS) + ([SOURCE] if with_source else []))
    frame = pd.concat(frames, ignore_index=True)
    frame["message"] = frame["message"].astype(object).where(frame["message"].notna(), "").astype(str)
    return _with_local_kernel(_with_custom_labels(frame))


def custom_label(target: str) -> str:
    """The default label (results column) of the custom kernel of ``target``."""
    return f"{CUSTOM_PREFIX}{target}"


def _custom_target(spec: Any, kernel_version: Any) -> str | None:
    """The import target of a custom row: from its spec (``custom[target=pkg.mod:fn@sha1:..]``),
    else from kernel_version (rows older than the spec column: ``pkg.mod:fn [version]``)."""
    spec = "" if pd.isna(spec) else str(spec)
    if spec.startswith("custom[") and "target=" in spec:
        return spec.split("target=", 1)[1].split("@", 1)[0].split(",", 1)[0].rstrip("]")
    version = "" if pd.isna(kernel_version) else str(kernel_version).split(" ", 1)[0]
    return version if ":" in version else None


def _with_custom_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows labelled plain ``custom`` (the label before it named the target) relabelled."""
    bare = frame["kernel"] == "custom"
    if not bare.any():
        return frame
    targets = [_custom_target(s, v) for s, v in
               zip(frame.loc[bare, "spec"] if "spec" in frame else [None] * bare.sum(),
                   frame.loc[bare, "kernel_version"])]
    frame.loc[bare, "kernel"] = [custom_label(t) if t else "custom" for t in targets]
    return frame


def _with_local_kernel(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the LOCAL_KERNEL column when some row names one (CP rows), else as is."""
    versions = frame["kernel_version"].astype(str) if "kernel_version" in frame else None
    if versions is None or not versions.str.contains("local=", regex=False).any():
        return frame
    frame[LOCAL_KERNEL] = versions.str.extract(r"\blocal=(\w+)", expand=False).fillna("")
    return frame


def seqlen_per_gpu(frame: pd.DataFrame) -> pd.Series:
    """Tokens a GPU of CP rows (their ``seqlen`` is the whole sequence); <NA> where a row has
    no cp_size (e.g. a not-measured cell)."""
    return (pd.to_numeric(frame["seqlen"]) // pd.to_numeric(frame["cp_size"])).astype("Int64")


def latest_rows(frame: pd.DataFrame, key: Iterable[str] = TABLE_KEY) -> pd.DataFrame:
    """The newest row of each cell (by ``time``, file order breaking ties), in the order of
    ``frame``; the default key is the cell and, for CP rows, the local kernel (TABLE_KEY)."""
    if frame.empty:
        return frame
    key = [k for k in key if k in frame.columns]
    ordered = frame.reset_index(drop=True).reset_index().sort_values(["time", "index"], kind="stable")
    newest = ordered.drop_duplicates(key, keep="last").sort_values("index")
    return newest.drop(columns="index").reset_index(drop=True)


def cell_key(values: Mapping[str, Any], key: Iterable[str] = CELL_KEY) -> tuple:
    """The ``key`` tuple of a row-like mapping, normalised to str so CSV and Python agree (an
    absent or empty value, e.g. ``spec`` of a row written before that column, is "")."""
    return tuple("" if pd.isna(v := values.get(k)) else str(v) for k in key)


def resume_key(values: Mapping[str, Any]) -> tuple:
    """The RESUME_KEY tuple of a row-like mapping: what a rerun compares with done cells."""
    return cell_key(values, RESUME_KEY)


def rows_of_cells(sources: Iterable[str | os.PathLike] | str | os.PathLike,
                  cells: Mapping[tuple, Mapping[str, Any]]) -> pd.DataFrame:
    """The rows a job's tables and figures draw: for each resume key of ``cells`` the newest row
    with that key in the files of ``sources`` (whichever job measured it), with its file in the
    column SOURCE; a cell no file has becomes a row of status ``not measured`` built from its
    columns (``cells`` maps each :func:`resume_key` to the typed key columns of the cell)."""
    try:
        frame = read_results(sources, with_source=True)
    except FileNotFoundError:
        frame = pd.DataFrame(columns=list(COLUMNS) + [SOURCE])
    order = {key: i for i, key in enumerate(cells)}
    if not frame.empty:
        keys = [resume_key(r) for r in frame.to_dict("records")]
        frame = frame.assign(_cell=[order.get(k, -1) for k in keys])
        frame = latest_rows(frame[frame["_cell"] >= 0], RESUME_KEY)
    found = set(frame["_cell"]) if not frame.empty else set()
    # time "" sorts before any real row's, so a re-read keeps a measured row over this one
    absent = [{**columns, "time": "", "status": NOT_MEASURED, "message": "", SOURCE: "",
               "_cell": order[key]} for key, columns in cells.items() if order[key] not in found]
    parts = [p for p in (frame, pd.DataFrame(absent)) if not p.empty]
    if not parts:
        return frame
    # in the order the job asked for its cells, so its kernels keep their order in the tables
    joined = pd.concat(parts, ignore_index=True).sort_values("_cell", kind="stable")
    return joined.drop(columns="_cell").reset_index(drop=True)


def done_cells(sources: Iterable[str | os.PathLike] | str | os.PathLike,
               final: Iterable[str] = FINAL_STATUSES) -> set[tuple]:
    """Resume keys (see :func:`resume_key`) that already have a row with a final status."""
    try:
        frame = read_results(sources)
    except FileNotFoundError:
        return set()
    frame = frame[frame["status"].isin(tuple(final))]
    return {resume_key(r) for r in frame.to_dict("records")}
