"""What a published results file says about its own measurement: which run made its rows, and
whether the code those rows measured has changed since.

The reference results live in ``results/<hardware>/<kind>/<experiment>.csv`` (kind ``kernels``
or ``cp``), one file per experiment and hardware. A figure or table is drawn from one such file
whose rows share one commit, one run (:func:`require_one_run`); a rerun replaces the file.

An experiment is *stale* when a source file that its rows depend on (the measured kernels' and
the harness's code, :data:`DEPENDENCIES`; for the CP predictor's rows also its own code and the
measured rows it was fitted to) differs between the rows' commit and this checkout's
working tree. Stale rows are still shown, marked, with the changed files named, so no page shows
old numbers as current.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.provenance import git_output

__all__ = ["DEPENDENCIES", "KINDS", "MixedRuns", "RunInfo", "dependencies", "published_files",
           "require_one_run", "run_info", "stale_files"]

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("kernels", "cp")
# What the rows of each kind measured: a change under these paths after the rows' commit makes
# them stale. Reporting, plotting and the CP predictor are not among them: they change no number.
_KERNEL_DEPENDENCIES = ("magi_attention/common", "magi_attention/kernels",
                        "magi_attention/functional/flex_flash_attn.py",
                        "magi_attention/functional/_backends.py",
                        "magi_attention/functional/_plans.py",
                        "magi_attention/functional/_validate.py",
                        "bench/kernels", "bench/masks", "bench/data", "bench/metrics.py",
                        "bench/gate.py", "bench/mask_timing.py", "bench/sweep.py")
DEPENDENCIES = {
    "kernels": _KERNEL_DEPENDENCIES,
    "cp": _KERNEL_DEPENDENCIES + ("magi_attention/api", "magi_attention/comm",
                                  "magi_attention/meta", "magi_attention/functional",
                                  "bench/cp/runner.py", "bench/cp/base.py", "bench/cp/verify.py",
                                  "bench/cp/local_kernel.py", "bench/cp/magi.py",
                                  "bench/cp/_ring.py", "bench/cp/_ring_engine.py",
                                  "bench/cp/_sharding.py", "bench/cp/_ulysses.py",
                                  "bench/cp/_head_context.py", "bench/cp/_all_gather.py",
                                  "bench/cp/_reduce_scatter.py", "bench/cp/ulysses.py",
                                  "bench/cp/ring_p2p.py", "bench/cp/ring_allgather.py",
                                  "bench/cp/usp.py", "bench/cp/loongtrain.py",
                                  "bench/cp/hybrid_cp.py", "bench/cp/single_gpu.py"),
}
# The CP predictor's rows (results/<hw>/cp_predicted/): what the strategies run (as above), the
# predictor itself but its page and figures, and the measured rows it is fitted to and
# validated against (git pathspecs): the CP files' and those of its GPU's kernel benchmark
# (``{gpu}``: the folder's hardware without its xN, see ``dependencies``)
DEPENDENCIES["cp_predicted"] = DEPENDENCIES["cp"] + (
    "bench/cp/predict", ":(exclude)bench/cp/predict/report.py",
    ":(exclude)bench/cp/predict/figures.py", "bench/config.py", "results/{gpu}/kernels/*.csv",
    "results/*/cp/*.csv")
_COMMIT = re.compile(r"^(?P<sha>[0-9a-f]{7,40})(?P<suffix>-dirty|-inferred)?$")


class MixedRuns(ValueError):
    """Rows of several commits where one run is required (a figure, a published table)."""


@dataclass(frozen=True)
class RunInfo:
    """The run behind one published file. ``commits``: its rows' distinct ``git_sha`` labels,
    newest first, with row counts; ``first_time`` / ``last_time``: its rows' time span;
    ``stale``: the dependency files changed since the (single) commit, [] when current, None
    when it cannot be told (mixed commits, or a commit unknown to this checkout's git)."""

    path: Path
    kind: str
    hardware: str
    experiment: str
    commits: tuple[tuple[str, int], ...]
    first_time: str
    last_time: str
    stale: tuple[str, ...] | None

    @property
    def one_run(self) -> bool:
        return len(self.commits) == 1

    @property
    def commit(self) -> str | None:
        """The one commit label (``<sha>``, ``<sha>-dirty``, ``<sha>-inferred``), else None."""
        return self.commits[0][0] if self.one_run else None

    @property
    def date(self) -> str:
        return self.last_time[:10]

    @property
    def state(self) -> str:
        """``current``, ``stale``, ``dirty`` (measured on uncommitted code), ``inferred`` (the
        commit was reconstructed after the fact), ``mixed`` or ``unknown``."""
        if not self.one_run:
            return "mixed"
        suffix = _COMMIT.match(self.commit or "")
        if suffix is None:
            return "unknown"
        if suffix["suffix"]:
            return suffix["suffix"][1:]
        if self.stale is None:
            return "unknown"
        return "stale" if self.stale else "current"

    def label(self, root: Path = ROOT) -> str:
        """One line naming the file, its run and its state (the figures' footer)."""
        rel = _relative(self.path, root)
        if not self.one_run:
            shas = ", ".join(sha for sha, _ in self.commits[:4])
            return f"{rel} | MIXED: rows of {len(self.commits)} commits ({shas})"
        text = f"{rel} | commit {self.commit} | {self.date}"
        if self.state == "stale":
            text += f" | STALE: {_changed(self.stale)} changed since"
        elif self.state != "current":
            text += f" | {self.state.upper()}"
        return text


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _changed(files: tuple[str, ...]) -> str:
    shown = ", ".join(files[:2])
    return shown + (f" (+{len(files) - 2} more)" if len(files) > 2 else "")


def published_files(results_dir: Path = ROOT / "results") -> list[tuple[str, str, Path]]:
    """``(hardware, kind, path)`` of every published results file, sorted."""
    found = []
    for kind in KINDS:
        for path in sorted(Path(results_dir).glob(f"*/{kind}/*.csv")):
            found.append((path.parent.parent.name, kind, path))
    return sorted(found)


def _commits(rows: pd.DataFrame) -> tuple[tuple[str, int], ...]:
    if rows.empty:
        return ()
    # newest first; commits of one time in the order of their shas
    newest = rows.groupby("git_sha")["time"].max().sort_values(ascending=False, kind="stable")
    counts = rows["git_sha"].value_counts()
    return tuple((str(sha), int(counts[sha])) for sha in newest.index)


def require_one_run(rows: pd.DataFrame, source: str | Path = "these rows") -> str:
    """The one commit of ``rows``; raises :class:`MixedRuns` naming the commits otherwise."""
    commits = _commits(rows)
    if len(commits) != 1:
        listed = ", ".join(f"{sha} ({n} rows)" for sha, n in commits[:6])
        raise MixedRuns(f"{source}: rows of {len(commits)} commits ({listed}); a figure or "
                        f"table is drawn from one run: measure the experiment again into an "
                        f"empty file")
    return commits[0][0]


@functools.lru_cache(maxsize=None)
def _git(root: Path, *args: str) -> str | None:
    return git_output(root, *args)  # kept per process: one page asks the same many times


def dependencies(kind: str, hardware: str = "*") -> tuple[str, ...]:
    """``DEPENDENCIES[kind]`` for the files of one hardware folder (``h100x2`` reads the
    ``h100`` kernel rows; ``*``: any)."""
    gpu = re.sub(r"x\d+$", "", hardware)
    return tuple(path.replace("{gpu}", gpu) for path in DEPENDENCIES[kind])


def stale_files(commit: str, kind: str, root: Path = ROOT, hardware: str = "*"
                ) -> tuple[str, ...] | None:
    """The files under ``dependencies(kind, hardware)`` that differ between ``commit`` (a row's
    git_sha label; a -dirty or -inferred suffix is dropped) and the working tree of ``root``;
    None when git is absent or does not know the commit."""
    match = _COMMIT.match(str(commit))
    if match is None or _git(root, "cat-file", "-e", f"{match['sha']}^{{commit}}") is None:
        return None
    out = _git(root, "diff", "--name-only", match["sha"], "--", *dependencies(kind, hardware))
    if out is None:
        return None
    return tuple(sorted(line for line in out.splitlines() if line.strip()))


def run_info(path: Path, kind: str, rows: pd.DataFrame | None = None,
             root: Path = ROOT) -> RunInfo:
    """The :class:`RunInfo` of one published file (``rows``: its rows, if already read)."""
    if rows is None:
        from bench.results import read_results
        rows = read_results([path])
    commits = _commits(rows)
    hardware = Path(path).parent.parent.name
    stale = stale_files(commits[0][0], kind, root, hardware) if len(commits) == 1 else None
    times = rows["time"].astype(str).sort_values() if not rows.empty else pd.Series(["", ""])
    return RunInfo(Path(path), kind, hardware, Path(path).stem, commits,
                   times.iloc[0], times.iloc[-1], stale)

