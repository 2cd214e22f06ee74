"""Readers and helpers shared by the sections of several machines."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from bench.cp.hybrid_cp import unequal_token_share
from bench.results import latest_rows, read_results
from bench.status import with_missing

from ._paths import RESULTS


KERNEL_MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window_causal",
                "block_causal_document")
K16, K64 = 16384, 65536
FFA_FA4_GOAL = 0.95  # ffa_fa4 over FA4, issue 4


# -- reading ------------------------------------------------------------------------------------
@functools.cache
def _rows(relpath: str) -> pd.DataFrame:
    """Newest row per cell of a bench result file or folder under results/."""
    return with_missing(latest_rows(read_results(RESULTS / relpath)))


@functools.cache
def _helper(relpath: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS / relpath, comment="#")


def _kernel_tflops(kernel: str, mask: str, seqlen: int, direction: str) -> float | None:
    return _tf(_rows("h200/kernels"), kernel, mask, seqlen, direction)


def _span(values: list[float]) -> str:
    if not values:
        raise ValueError("no cell where both ran")
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low}-{high}"


def _verdict(values: list[float], goal: float) -> str:
    return "met" if min(values) >= goal else "**not met**"


def _fit_ms(rows: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Least squares of the rows' ``ms`` on ``columns``: (coefficients in ms, fitted ms)."""
    x = rows[columns].to_numpy(float)
    coef = np.linalg.lstsq(x, rows.ms.to_numpy(), rcond=None)[0]
    return coef, x @ coef


def _k(seqlen: int) -> str:
    return f"{seqlen // 1024}k"


# -- test logs ----------------------------------------------------------------------------------
# (``-v`` runs frame the line in "=" signs)
_PYTEST_SUMMARY = re.compile(r"^(?:=+ )?(?P<counts>(?:\d+ failed, )?\d+ passed.*?) in [\d.]+s",
                             re.MULTILINE)


def _pytest_counts(relpath: str) -> str:
    """'286 passed, 39 skipped' from a pytest log's summary line (deselected left out)."""
    (match,) = _PYTEST_SUMMARY.finditer((RESULTS / relpath).read_text())
    return ", ".join(p for p in match["counts"].split(", ") if "deselected" not in p)


@functools.cache
def _files(relpaths: tuple[str, ...]) -> pd.DataFrame:
    rows = pd.concat([read_results(RESULTS / r) for r in relpaths], ignore_index=True)
    return latest_rows(rows)


def _cell_rows(frame: pd.DataFrame, kernel: str, mask: str, seqlen: int,
               direction: str) -> pd.DataFrame:
    return frame[(frame.kernel == kernel) & (frame["mask"] == mask) & (frame.seqlen == seqlen)
                 & (frame.direction == direction)]


def _tf(frame: pd.DataFrame, kernel: str, mask: str, seqlen: int, direction: str):
    """TFLOPs/s of one ok cell of ``frame`` (newest rows), or None."""
    hit = _cell_rows(frame, kernel, mask, seqlen, direction)
    hit = hit[hit.status == "ok"]
    return float(hit.tflops_per_s.iloc[0]) if len(hit) else None


def _no_rate(frame: pd.DataFrame, kernel: str, mask: str, seqlen: int, direction: str) -> str:
    """A cell without an ok row: "X" where the run wrote one that failed, "not run" where the
    run wrote none (it stopped first)."""
    return "X" if len(_cell_rows(frame, kernel, mask, seqlen, direction)) else "not run"


def _pairs(frame, num: str, den: str, masks: Iterable[str] = KERNEL_MASKS):
    """((mask, seqlen, direction), num / den) over every cell of ``masks`` where both ran."""
    out = []
    for mask in masks:
        for seqlen in sorted(frame.seqlen.unique()):
            for d in ("fwd", "bwd"):
                a, b = _tf(frame, num, mask, seqlen, d), _tf(frame, den, mask, seqlen, d)
                if a is not None and b is not None:
                    out.append(((mask, int(seqlen), d), a / b))
    return out


def _low_cells(pairs, goal: float) -> str:
    """The span of the ratios and the cells below ``goal``."""
    low = [f"{m} {_k(s)} {d} {r:.2f}" for (m, s, d), r in pairs if r < goal]
    return (f"{_span([r for _, r in pairs])} over {len(pairs)} cells"
            + (f"; below {goal}: " + ", ".join(low) if low else f"; none below {goal}"))


# magi and its measured variants (magi_min_heap, magi_staged, magi_balanced_runs), the kernel
NOT_BASELINES = ("single_gpu",)
CP_MASKS = ("full", "causal", "full_document", "causal_document", "block_causal_document")


def _cp_cells(relpath: str | tuple[str, ...], equal_tokens: bool = False):
    """{(mask, cp_size, direction): {kernel: TFLOPs/s}} of the ok rows of one CP file (or of
    several, e.g. a run's cp 2 and cp 1 files). ``equal_tokens``: without the rows of
    strategies whose ranks held unequal token counts (HybridCP's placement: the row's message
    carries ``tokens_per_rank=``)."""
    frame = _files((relpath,) if isinstance(relpath, str) else relpath)
    ok = frame[frame.status == "ok"]
    if equal_tokens:
        ok = ok[ok.message.map(unequal_token_share) == ""]
    return {(m, int(cp), d): dict(zip(cell.kernel, cell.tflops_per_s))
            for (m, cp, d), cell in ok.groupby(["mask", "cp_size", "direction"])}


def _baselines(values: dict) -> dict:
    """The CP baselines' TFLOPs/s of one cell (magi, its variants and single_gpu left out)."""
    return {k: v for k, v in values.items() if k not in NOT_BASELINES and not k.startswith("magi")}


def _magi_over_best(values: dict, kernel: str = "magi") -> float:
    """magi (or one of its variants, ``kernel``) / the best baseline of one cell."""
    return values[kernel] / max(_baselines(values).values())


def _vs_best(values: dict) -> str:
    base = _baselines(values)
    if "magi" not in values or not base:
        return "not measured"
    name = max(base, key=base.get)
    return f"{values['magi']:.0f} / {base[name]:.0f} ({name}) = {values['magi'] / base[name]:.2f}"


# -- session 16: 2 H200s, with the single-GPU reference in the same run ------------------------
# (the runs of session 16, moved to cp_history when session 17 measured again)
CP_S16 = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__78e3bba90fea.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__78e3bba90fea.csv",
          "fa4, 64k/GPU": "h200x2/cp_history/cp_h200x2__fa4_64k__342cdf62bec1.csv",
          "triton, 64k/GPU": "h200x2/cp_history/cp_h200x2__triton_64k__78e3bba90fea.csv"}


def cp2_s16_table(files: dict[str, str] = CP_S16, cp: int = 2) -> str:
    """magi at cp 1 against the single-GPU kernel, at ``cp`` against the best baseline."""
    lines = [f"| run | mask | cp 1 magi / single_gpu, fwd / bwd | cp {cp} fwd magi / best (name) "
             f"| cp {cp} bwd magi / best (name) |", "|---|---|---|---|---|"]
    for label, relpath in files.items():
        cells = _cp_cells(relpath)
        for mask in CP_MASKS:
            one = []
            for d in ("fwd", "bwd"):
                v = cells.get((mask, 1, d), {})
                one.append(f"{v['magi'] / v['single_gpu']:.2f}" if {"magi", "single_gpu"} <= set(v)
                           else "-")
            two = [_vs_best(cells.get((mask, cp, d), {})) for d in ("fwd", "bwd")]
            lines.append(f"| {label} | {mask} | {' / '.join(one)} | {two[0]} | {two[1]} |")
    return "\n".join(lines)


def cp2_s16_summary(files: dict[str, str] = CP_S16, cp_n: int = 2) -> str:
    """Counts of cp ``cp_n`` cells at >= 1.0x the best baseline, and the range of magi /
    single_gpu (cp 1)."""
    wins, total = (sum(n) for n in zip(*(_cp_wins(relpath, cp_n=cp_n)
                                         for relpath in files.values())))
    ones = [v["magi"] / v["single_gpu"] for relpath in files.values()
            for (_, cp, _), v in _cp_cells(relpath).items()
            if cp == 1 and {"magi", "single_gpu"} <= set(v)]
    return (f"cp 1: magi / single_gpu {min(ones):.2f}-{max(ones):.2f} over {len(ones)} cells; "
            f"cp {cp_n}: magi >= the best baseline on {wins} of {total} cells")


def _profiler_rows(text: str):
    """(name, CUDA total ms, calls) of each row of a torch.profiler key_averages table."""
    for line in text.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) != 11 or not cols[-1].isdigit():
            continue
        total = cols[8]
        ms = float(total[:-2]) / 1000 if total.endswith("us") else float(total[:-2])
        yield cols[0], ms, int(cols[-1])


def _below_best(cells, digits: int = 2) -> str:
    """"run mask dir magi/best (best's name[; tag])" of the cells (run, mask, direction,
    values, tag) where magi is below the best baseline, joined by "; "."""
    out = []
    for run, mask, d, v, tag in cells:
        base = _baselines(v)
        if v["magi"] < max(base.values()):
            out.append(f"{run.replace('/GPU', '')} {mask} {d} {_magi_over_best(v):.{digits}f} "
                       f"({max(base, key=base.get)}{tag})")
    return "; ".join(out)


def _cp2_below(files: dict, cp_n: int = 2) -> str:
    """The cp ``cp_n`` cells of a run's files where magi is below the best baseline."""
    return _below_best(((run, mask, d, v, "") for run, relpath in files.items()
                        for (mask, cp, d), v in sorted(_cp_cells(relpath).items())
                        if cp == cp_n and "magi" in v), digits=3)


def _cp_wins(relpath: str | tuple[str, ...], kernel: str = "magi",
             cp_n: int = 2) -> tuple[int, int]:
    """(cells where ``kernel`` >= the best baseline, cells) at cp ``cp_n`` of one run."""
    ratios = [_magi_over_best(v, kernel) for (_, cp, _), v in _cp_cells(relpath).items()
              if cp == cp_n and kernel in v and _baselines(v)]
    return sum(r >= 1.0 for r in ratios), len(ratios)


def cp_only_table(files: dict[str, str], cp_n: int) -> str:
    """Per run and mask at cp ``cp_n`` (runs without cp 1 rows): magi / the best baseline (its
    name), each direction."""
    lines = [f"| run | mask | cp {cp_n} fwd magi / best (name) | cp {cp_n} bwd magi / best (name) |",
             "|---|---|---|---|"]
    for run, relpath in files.items():
        cells = _cp_cells(relpath)
        for mask in dict.fromkeys(m for m, cp, _ in cells if cp == cp_n):
            two = [_vs_best(cells.get((mask, cp_n, d), {})) for d in ("fwd", "bwd")]
            lines.append(f"| {run} | {mask} | {two[0]} | {two[1]} |")
    return "\n".join(lines)


def cp_only_wins(files: dict[str, str], cp_n: int) -> str:
    """Per run: cells at cp ``cp_n`` where magi >= the best baseline."""
    return "; ".join(f"{run.replace('/GPU', '')}: {won} of {n}" for run, (won, n)
                     in ((run, _cp_wins(relpath, cp_n=cp_n)) for run, relpath in files.items()))


def cp_only_spans(files: dict[str, str], cp_n: int) -> dict[str, Callable[[], str]]:
    """The spans of a cp ``cp_n`` table run alone (no cp 1 rows): its table, the cells at or
    above the best baseline (magi_unequal, opt-in, counted as magi's too) and those below."""
    return {"table": lambda: cp_only_table(files, cp_n),
            "wins": lambda: (cp_only_wins(files, cp_n) + "; counting magi_unequal: "
                             + _with_unequal(files, "16k", cp_n=cp_n)),
            "below": lambda: _cp2_below(files, cp_n=cp_n)}


def cp_moves(now: dict[str, str], before: dict[str, str], cp_n: int) -> str:
    """The cp ``cp_n`` cells whose magi / best baseline crossed 1.0 between two runs of the same
    cells (``before`` and ``now``: {run: file}): "run mask dir before -> now", or "none"."""
    out = []
    for run, relpath in now.items():
        cells, old_cells = _cp_cells(relpath), _cp_cells(before[run])
        for (mask, cp, d), v in sorted(cells.items()):
            old = old_cells.get((mask, cp, d), {})
            if cp != cp_n or "magi" not in v or "magi" not in old:
                continue
            a, b = _magi_over_best(old), _magi_over_best(v)
            if (a >= 1.0) != (b >= 1.0):
                out.append(f"{run.replace('/GPU', '')} {mask} {d} {a:.3f} -> {b:.3f}")
    return "; ".join(out) or "none"


def _row_note(relpath: str, kernel: str, mask: str, cp: int, key: str,
              direction: str = "fwd") -> str:
    """One ``key=value`` of a CP row's message (e.g. magi's dispatch, comm_bytes_per_rank)."""
    frame = _files((relpath,))
    row = frame[(frame.kernel == kernel) & (frame["mask"] == mask) & (frame.cp_size == cp)
                & (frame.direction == direction)]
    return _note(row.message.iloc[0], key)


def _note(message: str, key: str) -> str:
    """One ``key=value`` of a ``;``-separated note (a row's message, a log's key line)."""
    return re.search(rf"{key}=([^;]*)", message)[1]


def _magi_note(log: str, mask: str, key: str) -> str | None:
    """One ``key=value`` of magi's key summary line (``<mask> magi: ...``) in a cp_ab.py log;
    None where the launch built no magi key for ``mask``."""
    line = next((ln for ln in (RESULTS / log).read_text().splitlines()
                 if ln.startswith(f"{mask} magi: ")), None)
    return None if line is None else _note(line, key)


def _timed_cells(files: dict[str, tuple[str, ...]], cp: int):
    """(run, files, mask, direction, the cell's TFLOPs/s by strategy) of every ``cp`` cell of
    runs that measured magi_timed (``files``: run label -> its result files)."""
    for run, relpaths in files.items():
        for (mask, cp_size, direction), values in _cp_cells(relpaths).items():
            if cp_size == cp:
                yield run, relpaths, mask, direction, values


def timed_table(files: dict[str, tuple[str, ...]], cp: int, build: bool = False) -> str:
    """Per cell: magi and magi_timed (and magi_unequal where measured) over the best baseline,
    and the dispatch magi_timed's key kept with both candidates' key-time step (ms);
    ``build``: also each key's build (s, rank 0; magi built first, so magi_timed's "auto"
    candidate found magi's timed cut and balance kept)."""
    head = ("| run | mask | dir | best baseline (TFLOPs/s/GPU) | magi / best | magi_timed / best "
            "| magi_unequal / best | kept (key time: auto / unequal_runs ms) |")
    lines = [head + (" build s: magi / magi_timed |" if build else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if build else "")]
    for run, relpaths, mask, direction, values in _timed_cells(files, cp):
        base = _baselines(values)
        best = max(base, key=base.get)
        over = lambda k: f"{values[k] / base[best]:.3f}" if k in values else "-"  # noqa: E731
        relpath = next(f for f in relpaths if mask in _files((f,))["mask"].values)
        kept = _row_note(relpath, "magi_timed", mask, cp, "dispatch", direction)
        ms = dict(p.split(":") for p in _row_note(relpath, "magi_timed", mask, cp,
                                                   "dispatch_ms", direction).split(","))
        line = (f"| {run} | {mask} | {direction} | {best} {base[best]:.0f} | "
                f"{over('magi')} | {over('magi_timed')} | {over('magi_unequal')} | {kept} "
                f"({float(ms['auto']):.2f} / {float(ms['unequal_runs']):.2f}) |")
        if build:
            frame = _files((relpath,))
            secs = [frame[(frame.kernel == k) & (frame["mask"] == mask) & (frame.cp_size == cp)
                          & (frame.direction == direction)].build_ms.iloc[0] / 1e3
                    for k in ("magi", "magi_timed")]
            line += f" {secs[0]:.1f} / {secs[1]:.1f} |"
        lines.append(line)
    return "\n".join(lines)


def timed_summary(files: dict[str, tuple[str, ...]], cp: int) -> str:
    """Cells where magi_timed, and magi, reach the best baseline; the ones below."""
    (timed, n), (magi, _) = ([sum(c) for c in zip(*(_cp_wins(relpaths, kernel, cp)
                                                     for relpaths in files.values()))]
                             for kernel in ("magi_timed", "magi"))
    below = [f"{run} {mask} {direction} {_magi_over_best(values, 'magi_timed'):.3f}"
             for run, _, mask, direction, values in _timed_cells(files, cp)
             if _magi_over_best(values, "magi_timed") < 1.0]
    return (f"magi_timed >= the best baseline on {timed} of {n} cells, magi on {magi} of {n}; "
            f"magi_timed below: {', '.join(below) or 'none'}")


def _cut_ms(relpath: str, mask: str, cp: int, direction: str,
            kernel: str = "magi") -> tuple[float, float]:
    """magi's (or a magi arm's, ``kernel``) own key-time timing of ``direction`` (ms, the
    slowest rank's), whole and cut by keys, from its row's ``cut_ms=fwd:w/c,bwd:w/c`` note."""
    return _cut_pair(_row_note(relpath, kernel, mask, cp, "cut_ms"), direction)


def _cut_pair(cut_ms: str, direction: str) -> tuple[float, float]:
    """(whole, cut) ms of ``direction`` from a ``cut_ms`` note's value (``fwd:w/c,bwd:w/c``)."""
    whole, cut = re.search(rf"{direction}:([\d.]+)/([\d.]+)", cut_ms).groups()
    return float(whole), float(cut)


def _probe_ms(relpath: str) -> pd.DataFrame:
    """ms by (mask, strategy, rank) x variant ("order") of a rank_mask_probe.py run."""
    return pd.read_csv(RESULTS / relpath).pivot_table(index=["mask", "strategy", "rank"],
                                                      columns="order", values="ms")


def _bwd_orders(runs: dict[str, str]) -> str:
    """The backward's key tile orders over the plan's heaviest first, per rank_mask_probe.py run
    (label -> file): mean, range and causal_document at 64k."""
    parts = []
    for label, relpath in runs.items():
        t = _probe_ms(relpath)
        for order in ("bwd_natural", "bwd_docs_heavy_first"):
            r = t[order] / t.bwd_heavy_first
            parts.append(f"{label} {order.removeprefix('bwd_')}: mean {r.mean():.2f} "
                         f"({r.min():.2f}-{r.max():.2f}, {len(r)} masks; causal_document 64k "
                         f"{r.loc[('causal_document_64k', 'single', 0)]:.2f})")
    return "; ".join(parts)


def _ncu_metric(text: str, name: str) -> float:
    """One metric's value in an ncu --print-details report (the first section naming it)."""
    return float(re.search(rf"^\s*{re.escape(name)}\s+\S+\s+([\d,.]+)\s*$", text,
                           re.MULTILINE).group(1).replace(",", ""))


def _ab_table(runs: dict[str, str], first: str) -> str:
    """cp_ab.py runs (label -> file; strategies interleaved over rounds): each strategy's median
    over the rounds of the slowest rank's ms, and magi's (``first`` names it) over it."""
    lines = [f"| run | dir | strategy | median ms | {first} ms / this |",
             "|---|---|---|---|---|"]
    for name, relpath in runs.items():
        rows = pd.read_csv(RESULTS / relpath)
        med = rows.groupby(["direction", "strategy"], sort=False).ms.median()
        for d in ("fwd", "bwd"):
            for strategy, ms in med[d].items():
                lines.append(f"| {name} | {d} | {strategy} | {ms:.2f} | "
                             f"{med[d]['magi'] / ms:.3f} |")
    return "\n".join(lines)


def _variant_ratios(relpaths: tuple[str, ...], variant: str, base: str,
                    whole_masks: tuple[str, ...]) -> str:
    """``variant`` / ``base`` kernel time per mask of rank_mask_probe.py runs, per run: the
    masks of one sequence with one document (full, causal; ``whole_masks``) apart from the
    rest."""
    out = []
    for run, relpath in enumerate(relpaths, 1):
        t = _probe_ms(relpath)
        ratio = t[variant] / t[base]
        whole = ratio[[m in whole_masks for m, _, _ in ratio.index]]
        rest = ratio[[m not in whole_masks for m, _, _ in ratio.index]]
        out.append(f"run {run}: {rest.min():.2f}-{rest.max():.2f} on the {len(rest)} document, "
                   f"window and cp-rank masks (mean {rest.mean():.2f}), {whole.min():.2f}-"
                   f"{whole.max():.2f} on full and causal")
    return "; ".join(out)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")


def _summed_counts(relpath: str | tuple[str, ...]) -> str:
    """The summary lines of a log of several pytest processes (or of several logs), added up:
    '10 passed, 2 skipped'."""
    totals: dict[str, int] = {}
    for path in (relpath,) if isinstance(relpath, str) else relpath:
        for line in (RESULTS / path).read_text().splitlines():
            if re.match(r"^\d+ (passed|failed|skipped)", line) and " in " in line:
                for n, what in _COUNT.findall(line):
                    totals[what] = totals.get(what, 0) + int(n)
    return ", ".join(f"{n} {w}" for w, n in totals.items())


def _by_size_table(runs: dict[int, str], kernels: Iterable[str]) -> str:
    """Each kernel / FA4 per seqlen (fwd / bwd), min-max over the masks both ran; ``runs`` maps
    each seqlen to the file it is read from, so each ratio stays within one run."""
    lines = ["| kernel / fa4 | " + " | ".join(_k(s) for s in runs) + " |",
             "|" + "---|" * (len(runs) + 1)]
    for kernel in kernels:
        by_run = {relpath: _pairs(_files((relpath,)), kernel, "fa4")
                  for relpath in set(runs.values())}
        cells = []
        for seqlen, relpath in runs.items():
            spans = []
            for direction in ("fwd", "bwd"):
                ratios = [r for (_, s, d), r in by_run[relpath] if s == seqlen and d == direction]
                spans.append(_span(ratios) if ratios else "X")
            cells.append(" / ".join(spans))
        lines.append(f"| {kernel} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
S21_KERNELS = "h200/kernels/kernel_masks__ffa_fa4_flex_16k_64k_s21.csv"


def triton_s21_table(relpath: str | tuple[str, ...] = S21_KERNELS,
                     seqlens: tuple[int, ...] = (K16, K64)) -> str:
    """FFA's Triton backend (bench adapter "ffa") against FA4 and compiled Flex, one bench run
    (or several, each cell from the latest that measured it)."""
    frame = _files(relpath if isinstance(relpath, tuple) else (relpath,))
    lines = ["| mask | S | dir | ffa | fa4 | flex | ffa/fa4 | ffa/flex |", "|" + "---|" * 8]
    for mask in KERNEL_MASKS:
        for seqlen in seqlens:
            for d in ("fwd", "bwd"):
                kernels = ("ffa", "fa4", "flex")
                ffa, fa4, flex = (_tf(frame, k, mask, seqlen, d) for k in kernels)
                ratio = lambda b: "-" if ffa is None or b is None else f"{ffa / b:.2f}"  # noqa: E731
                cells = [f"{v:.0f}" if v is not None else _no_rate(frame, k, mask, seqlen, d)
                         for k, v in zip(kernels, (ffa, fa4, flex))]
                lines.append(f"| {mask} | {_k(seqlen)} | {d} | " + " | ".join(cells)
                             + f" | {ratio(fa4)} | {ratio(flex)} |")
    return "\n".join(lines)


def triton_s21_goals(relpath: str | tuple[str, ...] = S21_KERNELS) -> str:
    """Issue 14's must-show cells in one s21 bench run (or several)."""
    frame = _files(relpath if isinstance(relpath, tuple) else (relpath,))
    out = []
    for d, goal in (("fwd", 0.85), ("bwd", 0.75)):
        r = [p for (m, _, dd), p in _pairs(frame, "ffa", "fa4", ("full", "causal")) if dd == d]
        out.append(f"{d} / fa4 on full and causal {_span(r)} (goal {goal}: {_verdict(r, goal)})")
    return "; ".join([*out, flex_goals(frame)])


def flex_goals(frame: pd.DataFrame) -> str:
    """Issue 14's FlexAttention cells in one run: FFA / Flex per direction, and how many cells
    reach 1.2."""
    out = []
    for d in ("fwd", "bwd"):
        r = [p for (_, _, dd), p in _pairs(frame, "ffa", "flex") if dd == d]
        low = sum(x < 1.2 for x in r)
        out.append(f"{d} / flex {_span(r)}, {len(r) - low} of {len(r)} cells at >= 1.2")
    return "; ".join(out)
DOC_MASKS = ("causal_document", "full_document", "block_causal_document")


def _tf_cells(relpath: str) -> dict:
    frame = _files((relpath,))
    return {(r.kernel, r["mask"], r.direction): r for _, r in frame[frame.status == "ok"].iterrows()}
UNEQUAL_S28 = {(b, s): f"h100x2/cp_unequal_s28/cp_h100x2__{b}_{s}_unequal.csv"
               for s in ("16k", "64k") for b in ("fa4", "triton")}


def unequal_s28_table(files: dict = UNEQUAL_S28) -> str:
    """magi (equal shards), magi_unequal and HybridCP per document cell, with the tokens each
    rank held under unequal_runs."""
    lines = ["| local | S/GPU | mask | dir | magi | magi_unequal | hybrid_cp | unequal / magi | "
             "unequal / hybrid_cp | magi / hybrid_cp | tokens a rank (unequal) |",
             "|" + "---|" * 11]
    for (backend, size), relpath in files.items():
        rows = _tf_cells(relpath)
        for mask in DOC_MASKS:
            for d in ("fwd", "bwd"):
                magi, uneq, hyb = (rows[k, mask, d].tflops_per_s
                                   for k in ("magi", "magi_unequal", "hybrid_cp"))
                share = unequal_token_share(rows["magi_unequal", mask, d].message)
                lines.append(f"| {backend} | {size} | {mask} | {d} | {magi:.0f} | {uneq:.0f} | "
                             f"{hyb:.0f} | {uneq / magi:.2f} | {uneq / hyb:.2f} | "
                             f"{magi / hyb:.2f} | {share} |")
    return "\n".join(lines)


def _unequal_ratios(size: str, over: str, files: dict = UNEQUAL_S28) -> list[float]:
    return [_tf_cells(relpath)["magi_unequal", m, d].tflops_per_s
            / _tf_cells(relpath)[over, m, d].tflops_per_s
            for (_, s), relpath in files.items() if s == size
            for m in DOC_MASKS for d in ("fwd", "bwd")]


def unequal_s28_summary(files: dict = UNEQUAL_S28) -> str:
    """unequal_runs over magi and over HybridCP per size, and its cells >= HybridCP."""
    out = []
    for size in sorted({s for _, s in files}):
        vs_magi = _unequal_ratios(size, "magi", files)
        vs_hyb = _unequal_ratios(size, "hybrid_cp", files)
        out.append(f"{size}: {min(vs_magi):.2f}-{max(vs_magi):.2f}x magi, "
                   f"{min(vs_hyb):.2f}-{max(vs_hyb):.2f}x HybridCP "
                   f"({sum(r >= 1.0 for r in vs_hyb)} of {len(vs_hyb)} cells >= 1.0)")
    return "; ".join(out)


def _with_unequal(files: dict, size: str, cp_n: int = 2) -> str:
    """The cp ``cp_n`` cells of one size where magi or magi_unequal (the opt-in config) reaches
    the best baseline, of all that size's cp ``cp_n`` cells."""
    wins = total = 0
    for run, relpath in files.items():
        if size not in run:
            continue
        for (_, cp, _), v in _cp_cells(relpath).items():
            if cp == cp_n and "magi" in v:
                total += 1
                wins += max(v["magi"], v.get("magi_unequal", 0.0)) >= max(_baselines(v).values())
    return f"{wins} of {total}"


# -- session 31: 2 H200s, issue 15's whole table with every backward on the whole dout ---------
# (16k: cp 1 and 2, every strategy and magi_unequal, repeat 6; 64k: magi and single_gpu at cp 1,
# every strategy at cp 2; Triton 64k's block_causal_document and one HybridCP causal_document
# backward in two short calls after the first hit its limit, same machine), then one H200:
# issue 14's kernel masks at 16k / 64k, ffa / fa4 / flex, cut by the call's limit
# (moved to cp_history when session 42 made results/h200x2/cp/ the table at its HEAD)
CP_S31 = {f"{b}, {s}/GPU": f"h200x2/cp_history/cp_h200x2__{b}_{s}__a8e21a1e9374.csv"
          for s in ("16k", "64k") for b in ("fa4", "triton")}


def cp1_spread_s31(files: dict = CP_S31) -> str:
    """At cp 1 every strategy runs the same local kernel on the same inputs: the fastest over
    the slowest of them, per 16k cell, is the run's timing noise between cells."""
    out = []
    for run in ("fa4, 16k/GPU", "triton, 16k/GPU"):
        spreads = {}
        for (mask, cp, d), v in _cp_cells(files[run]).items():
            if cp == 1:
                spreads[f"{mask} {d}"] = max(v.values()) / min(v.values())
        worst = max(spreads, key=spreads.get)
        out.append(f"{run.split(',')[0]}: {min(spreads.values()):.3f}-{spreads[worst]:.3f} "
                   f"over {len(spreads)} cells (widest: {worst})")
    return "; ".join(out)


def _ab_medians(relpath: str) -> dict[tuple[str, str, str], float]:
    """{(mask, direction, strategy): median ms over the rounds} of one cp_ab.py file."""
    groups = _helper(relpath).groupby(["mask", "direction", "strategy"], sort=False)  # file order
    return {k: float(v) for k, v in groups.ms.median().items()}


def _key_clock_cells(relpath: str):
    """(strategies, cells) of a cp_ab.py ``--clock both`` file: per (mask, direction), how much
    faster each strategy ran timed the key's way (``<strategy>@key``) than the runner's, and
    the best other strategy's time over magi's under each clock (> 1: magi faster)."""
    med = _ab_medians(relpath)
    names = list(dict.fromkeys(s for *_, s in med if not s.endswith("@key")))
    cells = []
    for mask, d in dict.fromkeys((m, d) for m, d, _ in med):
        gains = [1 - med[mask, d, f"{s}@key"] / med[mask, d, s] for s in names]
        runner, key = (min(med[mask, d, f"{s}{c}"] for s in names if s != "magi")
                       / med[mask, d, f"magi{c}"] for c in ("", "@key"))
        cells.append((mask, d, gains, runner, key))
    return names, cells


def key_clock_table(runs: dict[str, str]) -> str:
    """cp_ab.py ``--clock both`` files ({run: file}): per cell, how much faster each strategy
    ran timed the key's way than the runner's, and magi against the best other strategy under
    each clock (> 1: magi faster)."""
    lines = []
    for run, relpath in runs.items():
        names, cells = _key_clock_cells(relpath)
        if not lines:
            lines = ["| run | mask | dir | "
                     + " | ".join(f"{s}: key clock faster by" for s in names)
                     + " | best other / magi: runner | best other / magi: key |",
                     "|---|---|---|" + "---|" * (len(names) + 2)]
        for mask, d, gains, runner, key in cells:
            lines.append(f"| {run} | {mask} | {d} | " + " | ".join(f"{g:.1%}" for g in gains)
                         + f" | {runner:.3f} | {key:.3f} |")
    return "\n".join(lines)


def key_clock_moves(runs: dict[str, str]) -> str:
    """The largest move, over the cells of ``runs``, of magi / the best other strategy between
    the runner's clock and the key's."""
    moves = [key / runner - 1 for relpath in runs.values()
             for *_, runner, key in _key_clock_cells(relpath)[1]]
    return f"{min(moves):+.1%} to {max(moves):+.1%}"


def ab_masks_table(relpath: str, first: str = "magi") -> str:
    """A cp_ab.py file of several masks: each strategy's median ms (the slowest rank's) and
    ``first``'s time over it (> 1: this strategy is faster than ``first``)."""
    med = _ab_medians(relpath)
    strategies = list(dict.fromkeys(s for *_, s in med))
    lines = ["| mask | dir | " + " | ".join(f"{s} ms" for s in strategies) + " | "
             + " | ".join(f"{first} ms / {s} ms" for s in strategies if s != first) + " |",
             "|---|---|" + "---|" * (2 * len(strategies) - 1)]
    for mask, d in dict.fromkeys((m, d) for m, d, _ in med):
        ms = [med[mask, d, s] for s in strategies]
        ratios = [med[mask, d, first] / med[mask, d, s] for s in strategies if s != first]
        lines.append(f"| {mask} | {d} | " + " | ".join(f"{x:.2f}" for x in ms) + " | "
                     + " | ".join(f"{r:.3f}" for r in ratios) + " |")
    return "\n".join(lines)
