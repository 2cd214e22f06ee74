"""What a cell that did not run is called, in rows, tables and figures.

``unsupported`` is a real limit of a kernel or strategy (a mask it cannot express, a dtype, no
GPU); ``missing`` is a peer whose package (or a custom kernel's module) cannot be imported here,
a limit of the machine, not of the kernel. A cell with no row at all (a sweep that stopped
early, or a cell a job asked for that no results file holds) is ``not measured``; that is never
a status a runner writes, only what tables and figures show in its place.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["MISSING", "NOT_MEASURED", "UNSUPPORTED", "experiment_cells", "missing_package",
           "unsupported_status", "with_missing"]

UNSUPPORTED = "unsupported"
MISSING = "missing"
NOT_MEASURED = "not measured"

# The texts an absent package leaves: Python's ModuleNotFoundError, the adapters' import probe
# (bench.kernels._flash.import_error, flex, custom), magi_attention's BackendUnavailable for an
# import failure, and an adapter's own "... is not installed". A reason without one of them is a
# real limit.
_MISSING_MARKERS = ("No module named", "not importable", "cannot be imported", "not installed")


def missing_package(reason: str) -> bool:
    """Whether ``reason`` (a ``supports`` reason or an exception message) says that a package
    could not be imported."""
    return any(marker in str(reason) for marker in _MISSING_MARKERS)


def unsupported_status(reason: str) -> str:
    """The status of a cell that cannot run for ``reason``: ``missing`` for an absent package,
    else ``unsupported``."""
    return MISSING if missing_package(reason) else UNSUPPORTED


def with_missing(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the ``unsupported`` rows whose message names an absent package relabelled
    ``missing``: rows written before the status existed read as the runners write them now."""
    if rows.empty or "status" not in rows.columns:
        return rows
    relabel = (rows["status"] == UNSUPPORTED) & rows["message"].map(missing_package)
    if not relabel.any():
        return rows
    rows = rows.copy()
    rows.loc[relabel, "status"] = MISSING
    return rows


def experiment_cells(frame: pd.DataFrame, keys: list[str], x: str,
                     series: str) -> dict[tuple, tuple[set, list]]:
    """Per group of ``keys`` (e.g. hardware and mask, both directions together): the x values
    and the series (first-seen order) of its rows. A table or figure of the group draws a cell
    among them that has no row ``not measured``; the files hold no other record of what a sweep
    that stopped early meant to measure."""
    if frame.empty:
        return {}
    if not keys:
        return {(): (set(frame[x]), list(dict.fromkeys(frame[series])))}
    return {(key if isinstance(key, tuple) else (key,)):
            (set(rows[x]), list(dict.fromkeys(rows[series])))
            for key, rows in frame.groupby(keys, sort=True)}
