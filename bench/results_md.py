"""The numbers RESULTS.md quotes, computed from the committed result files (``bench.mdgen``
spans; the prose around them is written by hand).

    python -m bench.results_md            # rewrite every span of RESULTS.md
    python -m bench.results_md --check    # exit 1, naming the spans, if one is stale

A new section: write a function returning its text (a value for an inline span, lines for a
block), add it to ``SECTIONS`` under a name, and put ``<!-- gen:name --><!-- /gen -->`` where it
goes in RESULTS.md; then run the command. tests/bench/test_results_md.py fails while the file
differs from what its spans compute.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from bench.cp.hybrid_cp import unequal_token_share
from bench.cp.plot import ratio_table
from bench.mdgen import SPAN, render
from bench.results import latest_rows, read_results
from bench.status import with_missing

__all__ = ["SECTIONS", "RESULTS_MD", "main"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS_MD = ROOT / "RESULTS.md"
RESULTS = ROOT / "results"
KERNEL_MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window_causal",
                "block_causal_document")
DOC_WINDOW_MASKS = ("full_document", "causal_document", "sliding_window_causal")
K16, K64 = 16384, 65536
# the FA4 helper script's files (scripts/device/fa4_check.py)
HELPER_5 = "h200/ffa_fa4/fa4_bench.csv"
HELPER_30 = "h200/ffa_fa4/fa4_bench_16k_repeat30.csv"
FFA_GOALS = {"fwd": 0.8, "bwd": 0.7}  # FFA (Triton) over FA4, issue 3
FFA_FA4_GOAL = 0.95  # ffa_fa4 over FA4, issue 4
FFA_FA4_FLEX_GOAL = 2.0  # ffa_fa4 over FlexAttention where FA4 cannot run, issue 4


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


def _helper_tflops(relpath: str, impl: str, mask: str, seqlen: int, direction: str) -> float | None:
    rows = _helper(relpath)
    hit = rows[(rows.impl == impl) & (rows["mask"] == mask) & (rows.seqlen == seqlen)
               & (rows.direction == direction) & (rows.status == "ok")]
    return float(hit.tflops.iloc[0]) if len(hit) else None


def _ratios(tflops: Callable[..., float | None], num: str, den: str, masks: Iterable[str],
            seqlens: Iterable[int], directions: Iterable[str]) -> list[float]:
    """num / den over every cell where both ran."""
    out = []
    for mask in masks:
        for seqlen in seqlens:
            for d in directions:
                a, b = tflops(num, mask, seqlen, d), tflops(den, mask, seqlen, d)
                if a is not None and b is not None:
                    out.append(a / b)
    return out


def _span(values: list[float]) -> str:
    if not values:
        raise ValueError("no cell where both ran")
    low, high = f"{min(values):.2f}", f"{max(values):.2f}"
    return low if low == high else f"{low}-{high}"


def _verdict(values: list[float], goal: float) -> str:
    return "met" if min(values) >= goal else "**not met**"


def _k(seqlen: int) -> str:
    return f"{seqlen // 1024}k"


# -- test logs ----------------------------------------------------------------------------------
_PYTEST_SUMMARY = re.compile(r"^(?P<counts>\d+ passed.*?) in [\d.]+s", re.MULTILINE)


def _pytest_counts(relpath: str) -> str:
    """'286 passed, 39 skipped' from a pytest log's summary line (deselected left out)."""
    (match,) = _PYTEST_SUMMARY.finditer((RESULTS / relpath).read_text())
    return ", ".join(p for p in match["counts"].split(", ") if "deselected" not in p)


def pytest_gpu_h200() -> str:
    return _pytest_counts("h200/tests/pytest_gpu_h200.log")


def pytest_fa4() -> str:
    return _pytest_counts("h200/ffa_fa4/pytest_fa4.log")


# -- kernel sweep on one H200 -------------------------------------------------------------------
KERNEL_TABLE_KERNELS = ("ffa", "ffa_fa4", "fa4", "cudnn", "flex")
KERNEL_TABLE_RATIOS = (("ffa", "fa4"), ("ffa", "flex"), ("ffa_fa4", "fa4"), ("ffa_fa4", "flex"))


def kernel_table() -> str:
    head = ["mask", "S", "dir", *KERNEL_TABLE_KERNELS,
            *(f"{a}/{b}" for a, b in KERNEL_TABLE_RATIOS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for mask in KERNEL_MASKS:
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                values = {k: _kernel_tflops(k, mask, seqlen, d) for k in KERNEL_TABLE_KERNELS}
                cells = ["X" if v is None else f"{v:.0f}" for v in values.values()]
                cells += ["-" if values[a] is None or values[b] is None
                          else f"{values[a] / values[b]:.2f}" for a, b in KERNEL_TABLE_RATIOS]
                lines.append(f"| {mask} | {_k(seqlen)} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kernel_sweep_rows() -> str:
    rows = _rows("h200/kernels")
    rows = rows[rows["mask"].isin(KERNEL_MASKS)]  # the kernel_masks experiment's cells
    counts = rows.status.value_counts()
    return f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in counts.items())


def harness_ffa_fa4_small() -> str:
    return _span(_ratios(_kernel_tflops, "ffa_fa4", "fa4", DOC_WINDOW_MASKS, [K16], ["fwd"]))


def helper_ffa_fa4_small() -> str:
    tflops = functools.partial(_helper_tflops, HELPER_5)
    return _span(_ratios(tflops, "ffa_fa4", "fa4", DOC_WINDOW_MASKS, [K16], ["fwd"]))


# -- FFA (Triton) against its peers -------------------------------------------------------------
def _ffa_vs(den: str, direction: str) -> list[float]:
    return _ratios(_kernel_tflops, "ffa", den, ("full", "causal"), (K16, K64), [direction])


def ffa_vs_fa4_fwd() -> str:
    return _span(_ffa_vs("fa4", "fwd"))


def ffa_vs_fa4_bwd() -> str:
    return _span(_ffa_vs("fa4", "bwd"))


def ffa_goal() -> str:
    met = all(min(_ffa_vs("fa4", d)) >= goal for d, goal in FFA_GOALS.items())
    return "met" if met else "**not met**"


def ffa_vs_cudnn_fwd() -> str:
    return _span(_ffa_vs("cudnn", "fwd"))


def _against_flex(direction: str) -> str:
    values = _ratios(_kernel_tflops, "ffa", "flex", KERNEL_MASKS, (K16, K64), [direction])
    ahead = [v for v in values if v >= 1]
    behind = [v for v in values if v < 1]
    parts = [f"ahead on {len(ahead)} of {len(values)} cells"
             + (f" ({_span(ahead)}x)" if ahead else "")]
    if behind:
        parts.append(f"behind on {len(behind)} ({_span(behind)}x)")
    return ", ".join(parts)


def ffa_vs_flex_fwd() -> str:
    return _against_flex("fwd")


def ffa_vs_flex_bwd() -> str:
    return _against_flex("bwd")


def ffa_vs_flex_verdict() -> str:
    values = _ratios(_kernel_tflops, "ffa", "flex", KERNEL_MASKS, (K16, K64), ("fwd", "bwd"))
    return "ahead on every cell" if min(values) >= 1 else "**not ahead on every mask**"


# -- FFA_FA4 ------------------------------------------------------------------------------------
def _helper_vs_fa4(relpath: str, seqlens, masks=("full", "causal", "causal_document",
                                                 "sliding_window_causal")) -> list[float]:
    tflops = functools.partial(_helper_tflops, relpath)
    return _ratios(tflops, "ffa_fa4", "fa4", masks, seqlens, ("fwd", "bwd"))


def helper_ffa_fa4_64k() -> str:
    tflops = functools.partial(_helper_tflops, HELPER_5)
    parts = []
    for mask in ("full", "causal", "causal_document", "sliding_window_causal"):
        pair = [_ratios(tflops, "ffa_fa4", "fa4", [mask], [K64], [d]) for d in ("fwd", "bwd")]
        parts.append(f"{mask} " + "/".join(f"{r[0]:.2f}" for r in pair))
    return ", ".join(parts)


def helper_ffa_fa4_16k_30() -> str:
    return _span(_helper_vs_fa4(HELPER_30, [K16]))


def helper_ffa_fa4_goal_64k() -> str:
    return _verdict(_helper_vs_fa4(HELPER_5, [K64]), FFA_FA4_GOAL)


def helper_ffa_fa4_goal_16k() -> str:
    return _verdict(_helper_vs_fa4(HELPER_30, [K16]), FFA_FA4_GOAL)


def sweep_ffa_fa4_64k() -> str:
    return _span(_ratios(_kernel_tflops, "ffa_fa4", "fa4", KERNEL_MASKS, [K64], ("fwd", "bwd")))


def sweep_ffa_fa4_goal_64k() -> str:
    values = _ratios(_kernel_tflops, "ffa_fa4", "fa4", KERNEL_MASKS, [K64], ("fwd", "bwd"))
    return _verdict(values, FFA_FA4_GOAL)


def fa4_window_64k_fwd() -> str:
    helper = _helper_tflops(HELPER_5, "fa4", "sliding_window_causal", K64, "fwd")
    sweep = _kernel_tflops("fa4", "sliding_window_causal", K64, "fwd")
    return f"{helper:.0f} TFLOPs/s in the helper run, {sweep:.0f} in the kernel sweep"


def helper_ffa_fa4_vs_flex() -> str:
    tflops = functools.partial(_helper_tflops, HELPER_5)
    parts = []
    for seqlen in (K64, K16):
        pair = [_ratios(tflops, "ffa_fa4", "flex", ["block_causal_document"], [seqlen], [d])
                for d in ("fwd", "bwd")]
        parts.append("/".join(f"{r[0]:.2f}" for r in pair) + f" at {_k(seqlen)}")
    return ", ".join(parts)


def helper_ffa_fa4_vs_flex_goal() -> str:
    tflops = functools.partial(_helper_tflops, HELPER_5)
    values = _ratios(tflops, "ffa_fa4", "flex", ["block_causal_document"], (K16, K64),
                     ("fwd", "bwd"))
    return _verdict(values, FFA_FA4_FLEX_GOAL)


# -- MagiAttention on 4 H200s -------------------------------------------------------------------
@functools.cache
def _magi_check() -> dict:
    return json.loads((RESULTS / "h200x4" / "magi_gpu_check.json").read_text())


def magi_check() -> str:
    checks = [r for r in _magi_check()["rows"] if r["part"] == "check"]
    masks = dict.fromkeys(r["mask"] for r in checks)
    algorithms = dict.fromkeys(r["algorithm"] for r in checks)
    return (f"{len(masks)} masks x {len(algorithms)} dispatch algorithms "
            f"({sum(r['ok'] for r in checks)} of {len(checks)} ok): "
            f"**{_magi_check()['header']['check']}**")


def _magi_bench(mask: str) -> dict:
    (row,) = [r for r in _magi_check()["rows"] if r["part"] == "bench" and r["mask"] == mask]
    return row


def magi_bench() -> str:
    full, docs = _magi_bench("full"), _magi_bench("causal_document")
    return (f"full {full['fwd_tflops_per_gpu']:.0f} TFLOPs/s/GPU forward, "
            f"{full['bwd_tflops_per_gpu']:.0f} backward; causal_document "
            f"{docs['fwd_tflops_per_gpu']:.0f} / {docs['bwd_tflops_per_gpu']:.0f}")


def magi_keeps() -> str:
    full = _magi_bench("full")
    single = {d: _kernel_tflops("ffa", "full", K64, d) for d in ("fwd", "bwd")}
    keep = {d: full[f"{d}_tflops_per_gpu"] / single[d] for d in single}
    return (f"{single['fwd']:.0f} / {single['bwd']:.0f} in the kernel sweep: cp 4 keeps "
            f"{keep['fwd']:.0%} / {keep['bwd']:.0%}")


# -- CP baselines and the CP sweep on 4 H200s ---------------------------------------------------
def cp_check() -> str:
    rows = _helper("h200x4/cp_gpu_check.csv")
    masks = list(dict.fromkeys(rows["mask"]))
    failed = rows[rows.status != "ok"]
    counts = ", ".join(f"{n} {s}" for s, n in rows.status.value_counts().items())
    why = (f" ({', '.join(dict.fromkeys(failed['mask']))})" if len(failed) else "")
    return (f"{rows.strategy.nunique()} strategies x {len(masks)} masks ({', '.join(masks)}) at "
            f"cp {'/'.join(map(str, sorted(rows.cp_size.unique())))}, S = "
            f"{'/'.join(_k(s) for s in sorted(rows.seqlen.unique()))}: {counts}{why}")


CP_SWEEP = "h200x4/cp_history/cp_h200x4__1a6361c0d6dc.csv"
CP_SCALING = "h200x4/cp_history/cp_scaling_cp1-4__1a6361c0d6dc.csv"


def cp_sweep_rows() -> str:
    rows = _rows(CP_SWEEP)
    counts = rows.status.value_counts().items()
    return f"{len(rows)} rows: " + ", ".join(f"{n} {s}" for s, n in counts)


def cp_ratio_table() -> str:
    table = ratio_table(RESULTS / CP_SWEEP)
    table = table[(table.cp_size == 4) & (table.seqlen_per_gpu == K16)]
    order = ("ulysses", "ring_p2p", "ring_allgather", "usp", "loongtrain", "hybrid_cp")
    baselines = [b for b in order if b in set(table.baseline)]
    lines = ["| mask | " + " | ".join(f"vs {b}" for b in baselines) + " |",
             "|---|" + "---|" * len(baselines)]
    for mask in [m for m in KERNEL_MASKS if m in set(table["mask"])]:
        cells = []
        for b in baselines:
            pick = table[(table["mask"] == mask) & (table.baseline == b)].set_index("direction")
            cells.append(" / ".join(f"{pick.ratio[d]:.2f}" if d in pick.index else "-"
                                    for d in ("fwd", "bwd")))
        lines.append(f"| {mask} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cp1_allgather_over_others(direction: str) -> list[float]:
    rows = _rows(CP_SWEEP)
    rows = rows[(rows.cp_size == 1) & (rows.status == "ok") & (rows.direction == direction)]
    out = []
    for _, cell in rows.groupby(["mask", "seqlen"]):
        mine = cell[cell.kernel == "ring_allgather"].tflops_per_s
        out += list(float(mine.iloc[0]) / cell[cell.kernel != "ring_allgather"].tflops_per_s)
    return out


def cp1_allgather_fwd() -> str:
    return _span(_cp1_allgather_over_others("fwd"))


def cp1_allgather_bwd() -> str:
    return _span(_cp1_allgather_over_others("bwd"))


def cp1_allgather_example() -> str:
    rows = _rows(CP_SWEEP)
    cell = rows[(rows.cp_size == 1) & (rows.seqlen == K16) & (rows["mask"] == "causal_document")
                & (rows.direction == "fwd")].set_index("kernel").tflops_per_s
    return (f"causal_document {_k(K16)}: ring_allgather {cell['ring_allgather']:.0f} vs magi "
            f"{cell['magi']:.0f}")


def cp_scaling() -> str:
    rows = _rows(CP_SCALING)
    rows = rows[(rows.kernel == "magi") & (rows.status == "ok")
                & (rows.seqlen == rows.cp_size * K64)]
    tf = rows.set_index(["mask", "direction", "cp_size"]).tflops_per_s
    parts = []
    for mask in dict.fromkeys(sorted(rows["mask"])):
        pair = [f"{tf[mask, d, 4]:.0f}/{tf[mask, d, 1]:.0f} = {tf[mask, d, 4] / tf[mask, d, 1]:.2f}"
                for d in ("fwd", "bwd")]
        parts.append(f"{mask} " + ", ".join(pair))
    return "; ".join(parts)


# -- the dispatch solver (computed on CPU, bench.cp.dispatch_plot) -------------------------------
def dispatch_volume_table() -> str:
    table = pd.read_csv(ROOT / "plots" / "dispatch" / "comm_volume.csv")
    wide = table.pivot_table(index="mask", columns="cp_size", values="volume_ratio", sort=False)
    spread = table.pivot_table(index="mask", columns="cp_size", values="imbalance", sort=False)
    cps = list(wide.columns)
    lines = ["| mask | " + " | ".join(f"cp {c}: group_cast / ring" for c in cps)
             + f" | load max / mean (cp {cps[-1]}) |", "|---|" + "---|" * (len(cps) + 1)]
    for mask, row in wide.iterrows():
        lines.append(f"| {mask} | " + " | ".join(f"{v:.2f}" for v in row)
                     + f" | {spread.loc[mask, cps[-1]]:.3f} |")
    return "\n".join(lines)


def dispatch_volume_extremes() -> str:
    table = pd.read_csv(ROOT / "plots" / "dispatch" / "comm_volume.csv")
    largest = table.volume_ratio.max()
    whole = table.groupby("mask", sort=False).volume_ratio.min()
    verb = "never moves more than" if largest <= 1 else "moves more than"
    return (f"{verb} the ring (largest ratio {largest:.2f}); as much at every cp size on "
            + ", ".join(whole[whole >= 1].index))


# -- this session's runs: plan-once FFA, peers, Triton v3, 2xH200 CP -----------------------------
PLAN_ONCE = ("h200/kernels/kernel_masks__plan_once_4k-16k.csv",
             "h200/kernels/kernel_masks__plan_once_32k-64k.csv")
PEERS = "h200/kernels/kernel_masks__peers_16k_64k.csv"
SWEEP_V3 = "h200/ffa_triton/sweep.csv"
DEFAULT_V3 = {"fwd": "fwd_tma_128x64_w4_s3_p2", "bwd": "bwd_det_64x64_w4_s3_p2"}
FFA_FA4_PLAN_GOAL = 0.97  # issue 13
# this session's runs: the fa4 backend's inference call without lse (one file per device run)
NO_LSE = ("h200/kernels/kernel_masks__peers_nolse_2k-16k-64k.csv",
          "h200/kernels/kernel_masks__nolse_4k-8k-32k.csv")
LSE_PROBE = "h200/ffa_fa4/fa4_lse_probe.csv"


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


def _vs_flex(pairs) -> str:
    """The span of ffa_fa4 / flex and the block_causal_document cells (FA4 cannot run them)."""
    bcd = {(s, d): r for (m, s, d), r in pairs if m == "block_causal_document"}
    return (f"{_span([r for _, r in pairs])} over {len(pairs)} cells (block_causal_document 16k "
            f"{bcd[(K16, 'fwd')]:.2f}/{bcd[(K16, 'bwd')]:.2f}, 64k {bcd[(K64, 'fwd')]:.2f}/"
            f"{bcd[(K64, 'bwd')]:.2f} fwd/bwd)")


def plan_once_vs_fa4() -> str:
    return _low_cells(_pairs(_files(PLAN_ONCE), "ffa_fa4", "fa4"), FFA_FA4_PLAN_GOAL)


def plan_once_vs_flex() -> str:
    return _vs_flex(_pairs(_files(PLAN_ONCE), "ffa_fa4", "flex"))


def _per_run_pairs(num: str, den: str, min_seqlen: int):
    """Pairs of each run file on its own (ratios never mix runs), from ``min_seqlen`` up."""
    return [(cell, r) for f in NO_LSE for cell, r in _pairs(_files((f,)), num, den)
            if cell[1] >= min_seqlen]


def plan_once_full_document_fwd() -> str:
    """ffa_fa4 / fa4 on the full_document forward in the plan-once rows (before the no-lse call)."""
    pairs = _pairs(_files(PLAN_ONCE), "ffa_fa4", "fa4")
    return _span([r for (m, _, d), r in pairs if m == "full_document" and d == "fwd"])


def no_lse_vs_fa4() -> str:
    return _low_cells(_per_run_pairs("ffa_fa4", "fa4", 4096), FFA_FA4_PLAN_GOAL)


def no_lse_vs_flex() -> str:
    return _vs_flex(_per_run_pairs("ffa_fa4", "flex", 4096))


def no_lse_2k() -> str:
    return ", ".join(f"{m} {d} {r:.2f}" for (m, s, d), r in _per_run_pairs("ffa_fa4", "fa4", 2048)
                     if s == 2048 and r < FFA_FA4_PLAN_GOAL)


def _probe_cells():
    """(mask, seqlen, {variant: device ms}) of each cell of the lse probe, in file order."""
    for (mask, seqlen), cell in _helper(LSE_PROBE).groupby(["mask", "seqlen"], sort=False):
        yield mask, int(seqlen), dict(zip(cell.variant, cell.device_ms))


def lse_probe_table() -> str:
    variants = ("peer", "ffa", "ffa_lse", "raw_nolse", "raw_lse")
    lines = ["| mask | S | " + " | ".join(variants) + " | raw_lse / raw_nolse |",
             "|" + "---|" * (len(variants) + 3)]
    for mask, seqlen, ms in _probe_cells():
        lines.append(f"| {mask} | {_k(seqlen)} | "
                     + " | ".join(f"{ms[v]:.3f}" for v in variants)
                     + f" | {ms['raw_lse'] / ms['raw_nolse']:.3f} |")
    return "\n".join(lines)


def lse_cost() -> str:
    """Extra forward time with lse on the full-document varlen kernel, e.g. '4-6%'."""
    cost = [round((ms["raw_lse"] / ms["raw_nolse"] - 1) * 100)
            for mask, _, ms in _probe_cells() if mask == "full_document"]
    return f"{min(cost)}-{max(cost)}%" if min(cost) != max(cost) else f"{cost[0]}%"


def peers_table() -> str:
    frame = _files((PEERS,))
    kernels = ("cudnn", "fa2_torch", "fa3", "fa4", "ffa_fa4", "flex")
    lines = ["| mask | S | dir | " + " | ".join(kernels) + " |", "|" + "---|" * (len(kernels) + 3)]
    for mask in KERNEL_MASKS:
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                cells = [_tf(frame, k, mask, seqlen, d) for k in kernels]
                lines.append(f"| {mask} | {_k(seqlen)} | {d} | "
                             + " | ".join("X" if v is None else f"{v:.0f}" for v in cells) + " |")
    return "\n".join(lines)


def peers_vs_fa4() -> str:
    frame = _files((PEERS,))
    return ", ".join(f"{k} {_span([r for _, r in _pairs(frame, k, 'fa4')])}"
                     for k in ("cudnn", "fa2_torch", "fa3"))


@functools.cache
def _sweep_v3() -> pd.DataFrame:
    frame = pd.read_csv(RESULTS / SWEEP_V3)
    return frame[frame.status == "ok"]


def _v3(kernel: str, variant: str | None, mask: str, seqlen: int, d: str):
    f = _sweep_v3()
    hit = f[(f.kernel == kernel) & (f["mask"] == mask) & (f.seqlen == seqlen) & (f.direction == d)]
    if variant is not None:
        hit = hit[hit.variant == variant]
    return float(hit.tflops_per_s.iloc[0]) if len(hit) else None


def triton_v3_table() -> str:
    lines = ["| mask | S | dir | ffa (default) | fa4 | flex | ffa/fa4 | ffa/flex |",
             "|" + "---|" * 8]
    for mask in ("full", "causal", "causal_document", "sliding_window_causal",
                 "block_causal_document"):
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                ffa = _v3("ffa", DEFAULT_V3[d], mask, seqlen, d)
                fa4, flex = _v3("fa4", None, mask, seqlen, d), _v3("flex", None, mask, seqlen, d)
                ratio = lambda b: "-" if ffa is None or b is None else f"{ffa / b:.2f}"  # noqa: E731
                cells = ["X" if v is None else f"{v:.0f}" for v in (ffa, fa4, flex)]
                lines.append(f"| {mask} | {_k(seqlen)} | {d} | " + " | ".join(cells)
                             + f" | {ratio(fa4)} | {ratio(flex)} |")
    return "\n".join(lines)


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


def _magi_over_best(values: dict) -> float:
    """magi / the best baseline of one cell."""
    return values["magi"] / max(_baselines(values).values())


def _vs_best(values: dict) -> str:
    base = _baselines(values)
    if "magi" not in values or not base:
        return "not measured"
    name = max(base, key=base.get)
    return f"{values['magi']:.0f} / {base[name]:.0f} ({name}) = {values['magi'] / base[name]:.2f}"


def cp2_table() -> str:
    files = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__7fb1b4627a14.csv",
             "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__7fb1b4627a14.csv",
             "fa4, 64k/GPU": "h200x2/cp_history/cp_h200x2__fa4_64k__7fb1b4627a14.csv"}
    lines = ["| run | mask | cp | fwd magi / best (name) | bwd magi / best (name) |",
             "|---|---|---|---|---|"]
    for label, relpath in files.items():
        cells = _cp_cells(relpath)
        for mask in CP_MASKS:
            for cp in (1, 2):
                values = [_vs_best(cells[(mask, cp, d)]) for d in ("fwd", "bwd")]
                lines.append(f"| {label} | {mask} | {cp} | " + " | ".join(values) + " |")
    return "\n".join(lines)


# -- session 16: 2 H200s, with the single-GPU reference in the same run ------------------------
# (the runs of session 16, moved to cp_history when session 17 measured again)
CP_S16 = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__78e3bba90fea.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__78e3bba90fea.csv",
          "fa4, 64k/GPU": "h200x2/cp_history/cp_h200x2__fa4_64k__342cdf62bec1.csv",
          "triton, 64k/GPU": "h200x2/cp_history/cp_h200x2__triton_64k__78e3bba90fea.csv"}
# session 17: FA4 with native groups (causal on balanced_runs), Triton with the TMA backward
# (its 16k runs moved to cp_history when session 18 measured 16k again, its 64k in session 19)
CP_S17 = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__ad557dfca2fe.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__f581334a1415.csv",
          "fa4, 64k/GPU": "h200x2/cp_history/cp_h200x2__fa4_64k__ad557dfca2fe.csv",
          "triton, 64k/GPU": "h200x2/cp_history/cp_h200x2__triton_64k__f581334a1415.csv"}
# session 18: the tile-model cut of balanced_runs (16k, repeat 10); 64k not rerun at this code
CP_S18 = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__946e08914a0a.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__946e08914a0a.csv",
          "fa4, 64k/GPU": CP_S17["fa4, 64k/GPU"],
          "triton, 64k/GPU": CP_S17["triton, 64k/GPU"]}
# session 19: the fused path without its whole-buffer passes (16k at repeat 10, 64k at 3)
CP_S19 = {run: f"h200x2/cp_history/cp_h200x2__{run.split(',')[0]}_{run.split(' ')[1][:3]}"
                 "__b469163b3783.csv" for run in CP_S18}
# session 18, the fused stage cut by rows on (the runs before it was turned off)
CP_S18_SPLIT = {run: f"h200x2/cp_split/cp_h200x2__{run.split(',')[0]}_{run.split(' ')[1][:3]}"
                     "__split.csv" for run in CP_S18}


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
    wins = total = 0
    ones = []
    for relpath in files.values():
        for (mask, cp, d), v in _cp_cells(relpath).items():
            base = _baselines(v)
            if cp == cp_n and "magi" in v and base:
                total += 1
                wins += v["magi"] >= max(base.values())
            if cp == 1 and {"magi", "single_gpu"} <= set(v):
                ones.append(v["magi"] / v["single_gpu"])
    return (f"cp 1: magi / single_gpu {min(ones):.2f}-{max(ones):.2f} over {len(ones)} cells; "
            f"cp {cp_n}: magi >= the best baseline on {wins} of {total} cells")


def cp2_dispatch_gain() -> str:
    """What "auto"'s dispatch changed at cp 2 on the document masks: FA4 with min_heap forced
    beside auto (same run), and Triton before (min_heap: auto was not evaluated) and after."""
    fa4 = _cp_cells("h200x2/cp_history/cp_h200x2__fa4_16k_min_heap__342cdf62bec1.csv")
    fa4_auto = _cp_cells("h200x2/cp_history/cp_h200x2__fa4_16k__342cdf62bec1.csv")
    tri_before = _cp_cells("h200x2/cp_history/cp_h200x2__triton_16k__342cdf62bec1.csv")
    tri_after = _cp_cells(CP_S16["triton, 16k/GPU"])
    lines = ["| mask | dir | FA4: min_heap / auto (balanced_runs), magi / best before -> after "
             "| Triton: min_heap (before) / auto, magi / best before -> after |",
             "|---|---|---|---|"]
    # (magi's rows before, the run whose baselines it is held to, magi's rows after, magi's label)
    sides = ((fa4, fa4_auto, fa4_auto, "magi_min_heap"), (tri_before, tri_before, tri_after, "magi"))
    best = lambda cells: max(_baselines(cells).values())  # noqa: E731
    for mask in ("full_document", "causal_document", "block_causal_document"):
        for d in ("fwd", "bwd"):
            key = (mask, 2, d)
            parts = []
            for before, before_peers, after, label in sides:
                b, a = before[key][label], after[key]["magi"]
                parts.append(f"{b:.0f} / {a:.0f}, {b / best(before_peers[key]):.2f} -> "
                             f"{a / best(after[key]):.2f}")
            lines.append(f"| {mask} | {d} | {parts[0]} | {parts[1]} |")
    return "\n".join(lines)


def _profile_pieces() -> pd.DataFrame:
    rows = pd.concat([pd.read_csv(RESULTS / f"h200x2/magi_profile/magi_profile_cp2_fa4_rank{r}.csv")
                      for r in (0, 1)])
    return rows.pivot_table(index=["mask", "rank"], columns="piece", values="ms", sort=False)


def cp2_profile_table() -> str:
    """calc_attn at cp 2 against its fused path's pieces, per rank (ms)."""
    lines = ["| mask | rank | calc_attn fwd | kernel fwd (fused mask) | fwd: kernel / calc_attn "
             "| calc_attn bwd (fwd+bwd - fwd) | kernel bwd | bwd: kernel / calc_attn | cast + "
             "copies alone | group-reduce alone |", "|---|---|---|---|---|---|---|---|---|---|"]
    t = _profile_pieces()
    for mask, rank in sorted(t.index, key=lambda i: i[1]):  # rank 0's masks, then rank 1's
        ms = t.loc[(mask, rank)]
        bwd = ms.calc_attn_fwd_bwd - ms.calc_attn_fwd
        lines.append(f"| {mask} | {rank} | {ms.calc_attn_fwd:.2f} | {ms.kernel_fwd:.2f} | "
                     f"{ms.kernel_fwd / ms.calc_attn_fwd:.2f} | {bwd:.2f} | "
                     f"{ms.kernel_bwd:.2f} | {ms.kernel_bwd / bwd:.2f} | "
                     f"{ms.fused_kv:.2f} | {ms.group_reduce:.2f} |")
    return "\n".join(lines)


def cp2_profile_summary() -> str:
    """calc_attn / its kernel over all ranks and directions, and over the slower rank; then the
    causal_document cell against HybridCP (the FA4 16k run)."""
    t = _profile_pieces()
    bwd = t.calc_attn_fwd_bwd - t.calc_attn_fwd
    ratios = pd.concat([t.kernel_fwd / t.calc_attn_fwd, t.kernel_bwd / bwd])
    slow = t.groupby(level="mask").apply(
        lambda g: pd.Series([g.kernel_fwd.max() / g.calc_attn_fwd.max(),
                             g.kernel_bwd.max() / (g.calc_attn_fwd_bwd - g.calc_attn_fwd).max()]))
    cd = t.loc["causal_document"]
    hybrid = _files((CP_S16["fa4, 16k/GPU"],))
    hyb = hybrid[(hybrid.kernel == "hybrid_cp") & (hybrid["mask"] == "causal_document")
                 & (hybrid.cp_size == 2) & (hybrid.direction == "fwd")].runtime_ms.iloc[0]
    cell = _cp_cells(CP_S16["fa4, 16k/GPU"])[("causal_document", 2, "fwd")]
    return (f"calc_attn runs at {ratios.min():.2f}-{ratios.max():.2f} of its own kernel (on the "
            f"slower rank, which sets the step: {slow.values.min():.2f}-{slow.values.max():.2f}); "
            f"the rest is the exposed cast and reduce. Where magi still loses (causal_document "
            f"at 16k, {cell['magi'] / cell['hybrid_cp']:.2f} fwd), the kernel over the slower "
            f"rank's fused mask alone ({cd.kernel_fwd.max():.2f} ms fwd) already takes longer "
            f"than HybridCP's whole step ({hyb:.2f} ms)")


def cp2_s17_table() -> str:
    return cp2_s16_table(CP_S17)


def cp2_s17_summary() -> str:
    return cp2_s16_summary(CP_S17)


def cp2_s17_changes() -> str:
    """magi / best baseline at cp 2, session 16's run -> session 17's, on the cells either
    change touched: FA4 causal (balanced_runs in native groups) and every Triton backward."""
    lines = ["| run | mask | dir | magi TFLOPs/s/GPU s16 -> s17 | magi / best s16 -> s17 |",
             "|---|---|---|---|---|"]
    picks = [(run, mask, d) for run in ("fa4, 16k/GPU", "fa4, 64k/GPU") for mask in ("causal",)
             for d in ("fwd", "bwd")]
    picks += [(run, mask, "bwd") for run in ("triton, 16k/GPU", "triton, 64k/GPU")
              for mask in CP_MASKS]
    for run, mask, d in picks:
        before = _cp_cells(CP_S16[run])[(mask, 2, d)]
        after = _cp_cells(CP_S17[run])[(mask, 2, d)]
        lines.append(f"| {run} | {mask} | {d} | {before['magi']:.0f} -> {after['magi']:.0f} | "
                     f"{_magi_over_best(before):.2f} -> {_magi_over_best(after):.2f} |")
    return "\n".join(lines)


def cp2_s18_table() -> str:
    return cp2_s16_table(CP_S18)


def cp2_s18_summary() -> str:
    return cp2_s16_summary(CP_S18)


def cp2_s18_changes() -> str:
    """magi at cp 2 on the masks either change of session 18 touches, TFLOPs/s/GPU and magi /
    best baseline of its own run: session 17, the fused stage cut by rows (with the moved cut),
    the moved cut alone (the default); at 64k only the first two were run."""
    lines = ["| run | mask | dir | magi s17 / split / default now | magi / best s17 / split / "
             "default now |", "|---|---|---|---|---|"]
    for run in CP_S18:
        now = CP_S18[run] if CP_S18[run] != CP_S17[run] else None
        for mask in ("causal", "full_document", "causal_document", "block_causal_document"):
            for d in ("fwd", "bwd"):
                cells = [_cp_cells(f)[(mask, 2, d)] for f in (CP_S17[run], CP_S18_SPLIT[run])]
                cells.append(_cp_cells(now)[(mask, 2, d)] if now else None)
                tf = " / ".join(f"{c['magi']:.0f}" if c else "-" for c in cells)
                rr = " / ".join(f"{_magi_over_best(c):.2f}" if c else "-" for c in cells)
                lines.append(f"| {run} | {mask} | {d} | {tf} | {rr} |")
    return "\n".join(lines)


def pytest_nccl_split() -> str:
    return _pytest_counts("h200x2/tests/pytest_nccl_split_0d26ef42cf48.log")


def cp2_s19_table() -> str:
    return cp2_s16_table(CP_S19)


def cp2_s19_summary() -> str:
    return cp2_s16_summary(CP_S19)


def cp2_s19_changes() -> str:
    """magi at cp 2 on every mask, the previous default's run (session 18 at 16k, 17 at 64k)
    against session 19's: TFLOPs/s/GPU and magi / best baseline of its own run."""
    lines = ["| run | mask | fwd magi before -> after (/ best) | bwd magi before -> after (/ best) |",
             "|---|---|---|---|"]
    for run in CP_S19:
        before, after = _cp_cells(CP_S18[run]), _cp_cells(CP_S19[run])
        for mask in CP_MASKS:
            parts = []
            for d in ("fwd", "bwd"):
                b, a = before[(mask, 2, d)], after[(mask, 2, d)]
                parts.append(f"{b['magi']:.0f} -> {a['magi']:.0f} ({_magi_over_best(b):.2f} -> "
                             f"{_magi_over_best(a):.2f})")
            lines.append(f"| {run} | {mask} | {parts[0]} | {parts[1]} |")
    return "\n".join(lines)


PROFILE_S19 = "h200x2/magi_profile_s19"


def _profiler_rows(text: str):
    """(name, CUDA total ms, calls) of each row of a torch.profiler key_averages table."""
    for line in text.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) != 11 or not cols[-1].isdigit():
            continue
        total = cols[8]
        ms = float(total[:-2]) / 1000 if total.endswith("us") else float(total[:-2])
        yield cols[0], ms, int(cols[-1])


def _profile_kernels(side: str, mask: str, rank: int) -> dict[str, float]:
    """CUDA ms per fwd + bwd step (the table holds 3) of one rank's torch.profiler table, by
    kind of device kernel: FA4's, NCCL's (its time includes waiting for the other rank) and
    the memory passes around them (torch's copies, casts, cats, fills and the range kernels)."""
    suffix = "" if rank == 0 else f"_rank{rank}"
    text = (RESULTS / PROFILE_S19 / side / f"magi_profile_cp2_fa4_{mask}{suffix}.txt").read_text()
    sums = {"fa4": 0.0, "nccl": 0.0, "passes": 0.0}
    for name, ms, _ in _profiler_rows(text):
        if name.startswith("kernel_cutlass"):
            sums["fa4"] += ms
        elif name.startswith("ncclDevKernel"):
            sums["nccl"] += ms
        elif name.startswith(("void at::native", "Memcpy DtoD")) or name.endswith("_rows_kernel"):
            sums["passes"] += ms
    return {kind: ms / 3 for kind, ms in sums.items()}


def cp2_s19_profile() -> str:
    """Per fwd + bwd step and rank, CUDA ms of FA4's kernels, of the memory passes around
    them and of NCCL, before -> after the change."""
    lines = ["| mask | rank | FA4 kernels | memory passes | NCCL (incl. waiting) |",
             "|---|---|---|---|---|"]
    for mask in ("causal_document", "full_document", "block_causal_document"):
        for rank in (0, 1):
            b, a = (_profile_kernels(side, mask, rank) for side in ("before", "after"))
            lines.append(f"| {mask} | {rank} | " + " | ".join(
                f"{b[k]:.2f} -> {a[k]:.2f}" for k in ("fa4", "passes", "nccl")) + " |")
    return "\n".join(lines)


def cp2_s19_below() -> str:
    """The cp 2 cells of session 19 where magi is below the best baseline: run, mask,
    direction, magi / best (the best's name)."""
    return _below_best((run, mask, d, v, "") for run, relpath in CP_S19.items()
                       for (mask, cp, d), v in sorted(_cp_cells(relpath).items())
                       if cp == 2 and "magi" in v and _baselines(v))


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


def pytest_nccl_s19() -> str:
    return _pytest_counts("h200x2/tests/pytest_nccl_b469163b3783.log")


def pytest_nccl_s19_kernels() -> str:
    """The Triton cases again after the range kernels' shared prologue (eeb474c)."""
    return _pytest_counts("h200x2/tests/pytest_nccl_triton_eeb474c08cc9.log")


# session 20: the fused stage cut by keys per direction, timed at key time (cp 2 only; 64k on
# full and causal only: the document masks' 64k cells stay session 19's)
CP_S20 = {run: f"h200x2/cp_s20/cp_h200x2__{run.split(',')[0]}_{run.split(' ')[1][:3]}.csv"
          for run in CP_S18}
CP_AB_S20 = {run: f"h200x2/cp_ab_s20/cp_ab__{run.split(',')[0]}_{run.split(' ')[1][:3]}.csv"
             for run in CP_S18}


def _magi_notes(relpath: str) -> dict[tuple[str, str], dict[str, str]]:
    """{(mask, direction): {"cut": ..., "hidden_comm_ms": ... (where the row has it)}} of
    magi's cp 2 rows, in the order of the row's message."""
    frame = _files((relpath,))
    rows = frame[(frame.kernel == "magi") & (frame.cp_size == 2) & (frame.status == "ok")]
    return {(r["mask"], r.direction): dict(re.findall(r"(cut|hidden_comm_ms)=([^;]*)", r.message))
            for _, r in rows.iterrows()}


def _joined(note: dict[str, str] | None) -> str:
    return "; ".join(f"{k}={v}" for k, v in note.items()) if note else "-"


def cp_ab_s20_table() -> str:
    """The A/B before the change: magi (fused), magi_staged, magi_balanced_runs and the best
    baseline at cp 2, TFLOPs/s/GPU, on full and causal."""
    lines = ["| run | mask | dir | magi | magi_staged | magi_balanced_runs | best baseline (name) |",
             "|---|---|---|---|---|---|---|"]
    for run, relpath in CP_AB_S20.items():
        for (mask, cp, d), v in sorted(_cp_cells(relpath).items()):
            base = _baselines(v)
            best = max(base, key=base.get)
            cols = [f"{v[k]:.0f}" if k in v else "-"
                    for k in ("magi", "magi_staged", "magi_balanced_runs")]
            lines.append(f"| {run} | {mask} | {d} | {' | '.join(cols)} | {base[best]:.0f} "
                         f"({best}) |")
    return "\n".join(lines)


def _s20_cells() -> dict:
    """{(run, mask, direction): (cell values, session)} of the 40 cp 2 cells: session 20's
    rows where it measured them, else session 19's (the 64k document masks)."""
    out = {}
    for run in CP_S20:
        new, old = _cp_cells(CP_S20[run]), _cp_cells(CP_S19[run])
        for mask in CP_MASKS:
            for d in ("fwd", "bwd"):
                cell = new.get((mask, 2, d))
                out[run, mask, d] = (cell, 20) if cell else (old[(mask, 2, d)], 19)
    return out


def cp2_s20_table() -> str:
    """magi at cp 2 on every cell: session 19's magi / best -> session 20's (where measured),
    TFLOPs/s/GPU now, and the cut the key chose with the communication it hid."""
    lines = ["| run | mask | dir | magi TFLOPs/s/GPU s19 -> s20 | magi / best s19 -> s20 (name) "
             "| cut chosen; hidden_comm_ms |", "|---|---|---|---|---|---|"]
    for run in CP_S20:
        before, notes = _cp_cells(CP_S19[run]), _magi_notes(CP_S20[run])
        after = _cp_cells(CP_S20[run])
        for mask in CP_MASKS:
            for d in ("fwd", "bwd"):
                b, a = before[(mask, 2, d)], after.get((mask, 2, d))
                if a is None:
                    continue
                base = _baselines(a)
                lines.append(f"| {run} | {mask} | {d} | {b['magi']:.0f} -> {a['magi']:.0f} | "
                             f"{_magi_over_best(b):.2f} -> {_magi_over_best(a):.2f} "
                             f"({max(base, key=base.get)}) | {_joined(notes.get((mask, d)))} |")
    return "\n".join(lines)


def cp2_s20_cut_cells() -> str:
    """The cells whose direction the key cut: run, mask, direction, magi / best session 19 ->
    session 20, and the communication hidden."""
    out = []
    for run in CP_S20:
        before, after, notes = (_cp_cells(CP_S19[run]), _cp_cells(CP_S20[run]),
                                _magi_notes(CP_S20[run]))
        for (mask, d), note in sorted(notes.items()):
            if d not in note["cut"].split(","):
                continue
            hidden = note.get("hidden_comm_ms") if d == "fwd" else None
            out.append(f"{run.replace('/GPU', '')} {mask} {d} "
                       f"{_magi_over_best(before[(mask, 2, d)]):.2f} -> "
                       f"{_magi_over_best(after[(mask, 2, d)]):.2f}"
                       + (f" (hidden {hidden} ms)" if hidden else ""))
    return "; ".join(out)


def cp2_s20_summary() -> str:
    cells = _s20_cells()
    won = sum(_magi_over_best(v) >= 1.0 for v, _ in cells.values())
    measured = sum(session == 20 for _, session in cells.values())
    return (f"{won} of {len(cells)} cells at >= 1.0x the best baseline ({measured} measured "
            f"this session, {len(cells) - measured} from session 19's runs)")


def cp2_s20_below() -> str:
    """The cp 2 cells below the best baseline after session 20 (session 19's rows where
    session 20 did not measure the cell)."""
    return _below_best(((run, mask, d, v, f"; s{session}")
                        for (run, mask, d), (v, session) in _s20_cells().items()), digits=3)


def pytest_nccl_s20() -> str:
    return _pytest_counts("h200x2/tests/pytest_nccl_cut_5dcc1b589a2b.log")


# -- session 25: 2 H100s (the first 2-GPU machine since session 20; no 2 x H200 was lent) -----
# 16k: cp 1 and 2 in one run (repeat 10); 64k: cp 2 (repeat 5 FA4, 3 Triton), then magi and
# single_gpu at cp 1 on the same warm machine
CP_S25 = {"fa4, 16k/GPU": "h100x2/cp/cp_h100x2__fa4_16k.csv",
          "triton, 16k/GPU": "h100x2/cp/cp_h100x2__triton_16k.csv",
          "fa4, 64k/GPU": ("h100x2/cp/cp_h100x2__fa4_64k.csv",
                           "h100x2/cp/cp_h100x2__fa4_64k_cp1.csv"),
          "triton, 64k/GPU": ("h100x2/cp/cp_h100x2__triton_64k.csv",
                              "h100x2/cp/cp_h100x2__triton_64k_cp1.csv")}
PROFILE_S25 = "h100x2/magi_profile_s25/log.txt"


def cp_s25_table() -> str:
    return cp2_s16_table(CP_S25)


def cp_s25_summary() -> str:
    return cp2_s16_summary(CP_S25)


def _cp2_below(files: dict, cp_n: int = 2) -> str:
    """The cp ``cp_n`` cells of a run's files where magi is below the best baseline."""
    return _below_best(((run, mask, d, v, "") for run, relpath in files.items()
                        for (mask, cp, d), v in sorted(_cp_cells(relpath).items())
                        if cp == cp_n and "magi" in v), digits=3)


def cp_s25_below() -> str:
    return _cp2_below(CP_S25)


def cp_s25_cp1_low() -> str:
    """The lowest magi / single_gpu at cp 1, with its cell."""
    ones = [(v["magi"] / v["single_gpu"], f"{run.replace('/GPU', '')} {mask} {d}")
            for run, relpath in CP_S25.items()
            for (mask, cp, d), v in _cp_cells(relpath).items()
            if cp == 1 and {"magi", "single_gpu"} <= set(v)]
    low = min(ones)
    return f"{low[0]:.3f} ({low[1]})"


def profile_s25() -> str:
    """magi_profile_cp.py's per-rank times (ms) at cp 2, Triton, 16k/GPU: calc_attn against
    the fused kernel alone, per mask."""
    lines = ["| mask | rank | calc_attn fwd | kernel fwd | calc_attn bwd (fwd+bwd - fwd) "
             "| kernel bwd | fused KV alone | group-reduce alone |", "|---|---|---|---|---|---|---|---|"]
    for (mask, rank), (fwd, step, kv, kfwd, kbwd, reduce) in sorted(_profile_s25_times().items()):
        lines.append(f"| {mask} | {rank} | {fwd:.2f} | {kfwd:.2f} | {step - fwd:.2f} | "
                     f"{kbwd:.2f} | {kv:.2f} | {reduce:.2f} |")
    return "\n".join(lines)


def hybrid_steps_s25() -> str:
    """HybridCP's forward / backward step (ms) at cp 2 on the 16k document masks, Triton run."""
    frame = _files((CP_S25["triton, 16k/GPU"],))
    rows = frame[(frame.kernel == "hybrid_cp") & (frame.cp_size == 2) & (frame.status == "ok")]
    ms = {(r["mask"], r.direction): r.runtime_ms for _, r in rows.iterrows()}
    return ", ".join(f"{mask} {ms[mask, 'fwd']:.2f} / {ms[mask, 'bwd']:.2f} ms"
                     for mask in ("causal_document", "full_document", "block_causal_document"))


def _profile_s25_times() -> dict[tuple[str, int], list[float]]:
    """{(mask, rank): [calc_attn fwd, fwd+bwd, fused_kv, kernel fwd, kernel bwd, reduce]}."""
    pat = re.compile(r"rank (\d) (\w+): calc_attn_fwd ([\d.]+), calc_attn_fwd_bwd ([\d.]+), "
                     r"fused_kv ([\d.]+), kernel_fwd ([\d.]+), kernel_bwd ([\d.]+), "
                     r"group_reduce ([\d.]+)")
    return {(m.group(2), int(m.group(1))): [float(x) for x in m.groups()[2:]]
            for m in pat.finditer((RESULTS / PROFILE_S25).read_text())}


def outside_kernel_s25() -> str:
    """Per direction, the span over masks of calc_attn minus the slower rank's kernel alone."""
    times = _profile_s25_times()
    masks = sorted({mask for mask, _ in times})
    fwd, bwd = [], []
    for mask in masks:
        ranks = [times[mask, r] for r in (0, 1)]
        fwd.append(max(t[0] for t in ranks) - max(t[3] for t in ranks))
        bwd.append(max(t[1] - t[0] for t in ranks) - max(t[4] for t in ranks))
    return f"forward {min(fwd):.2f}-{max(fwd):.2f} ms, backward {min(bwd):.2f}-{max(bwd):.2f} ms"


def doc64k_s25() -> str:
    """magi / best baseline over the 64k document cells at cp 2, both backends."""
    ratios = [_magi_over_best(v) for run, relpath in CP_S25.items() if "64k" in run
              for (mask, cp, d), v in _cp_cells(relpath).items()
              if cp == 2 and mask.endswith("document")]
    return f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} cells"


def _bwd_kernel_ms_s25(mask: str, rank: int) -> float:
    """The Gluon backward kernel's CUDA ms per call in one rank's profiler table (3 steps)."""
    import tarfile
    name = f"magi_profile_cp2_triton_{mask}{'' if rank == 0 else f'_rank{rank}'}.txt"
    with tarfile.open(RESULTS / "h100x2/magi_profile_s25/tables.tgz") as tar:
        text = tar.extractfile(name).read().decode()
    for kernel, ms, calls in _profiler_rows(text):
        if kernel == "_bwd_kernel":
            return ms / calls
    raise ValueError(f"no _bwd_kernel in {name}")


def _rank_tiles_s25() -> dict[tuple[str, str, int], dict[str, int]]:
    text = (RESULTS / "h100x2/magi_profile_s25/rank_tiles.md").read_text().splitlines()
    head = [c.strip() for c in text[0].strip("|").split("|")]
    out = {}
    for line in text[2:]:
        cols = dict(zip(head, (c.strip() for c in line.strip("|").split("|"))))
        out[cols["mask"], cols["strategy"], int(cols["rank"])] = cols
    return out


def bwd_per_pair_s25() -> str:
    """causal_document, magi's two ranks: the backward kernel's ms, its tile pairs (64 x 128)
    and us per pair."""
    tiles = _rank_tiles_s25()
    parts = []
    for rank in (0, 1):
        ms = _bwd_kernel_ms_s25("causal_document", rank)
        pairs = int(tiles["causal_document", "magi", rank]["bwd pairs"])
        parts.append(f"rank {rank} {ms:.2f} ms for {pairs} pairs ({1000 * ms / pairs:.2f} us "
                     f"each)")
    return ", ".join(parts)


# -- session 26: 2 H100s; probes of the kernels on each rank's mask, the cast, the open A/B -----
PROBES_S26 = "h100x2/probes_s26"


def _cp2_pairs_s25():
    """[(run, mask, direction, every strategy's values, the equal-token strategies' values)]
    of session 25's cp 2 cells."""
    out = []
    for run, relpath in CP_S25.items():
        everyone, equal = _cp_cells(relpath), _cp_cells(relpath, equal_tokens=True)
        for (mask, cp, d), v in sorted(everyone.items()):
            if cp == 2 and "magi" in v:
                out.append((run, mask, d, v, equal[(mask, cp, d)]))
    return out


def equal_token_s25_summary() -> str:
    pairs = _cp2_pairs_s25()
    won = sum(_magi_over_best(eq) >= 1.0 for *_, eq in pairs)
    doc16 = [_magi_over_best(eq) for run, mask, _, _, eq in pairs
             if "16k" in run and mask.endswith("document")]
    return (f"magi >= the best baseline holding S / cp tokens per rank on {won} of {len(pairs)} "
            f"cells; on the 16k document masks {min(doc16):.2f}-{max(doc16):.2f}x")


def equal_token_s25_table() -> str:
    """The cp 2 cells whose best baseline holds unequal token counts: magi against it and
    against the best baseline that holds S / cp tokens per rank."""
    lines = ["| run | mask | dir | magi / best (name) | magi / best equal-token (name) |",
             "|---|---|---|---|---|"]
    for run, mask, d, v, eq in _cp2_pairs_s25():
        if _vs_best(v) != _vs_best(eq):
            lines.append(f"| {run.replace('/GPU', '')} | {mask} | {d} | {_vs_best(v)} | "
                         f"{_vs_best(eq)} |")
    return "\n".join(lines)


def ab64k_s26() -> str:
    """FA4 causal 64k at cp 2: magi (timed cut), magi_whole (never cut) and Ulysses."""
    frame = _files(("h100x2/cp_ab_s26/cp_h100x2__fa4_64k_causal_ab.csv",))
    tf = {(r.kernel, r.direction): r.tflops_per_s for _, r in frame.iterrows()}
    cut = re.search(r"cut=([^;]+)", frame[frame.kernel == "magi"].message.iloc[0]).group(1)
    return "; ".join(f"{d} magi {tf['magi', d]:.0f} (cut {cut}), magi_whole "
                     f"{tf['magi_whole', d]:.0f}, ulysses {tf['ulysses', d]:.0f} "
                     f"(magi / ulysses {tf['magi', d] / tf['ulysses', d]:.2f})"
                     for d in ("fwd", "bwd"))


# session 26's cp 2 runs of causal at 64k, every baseline in the same run (both backends)
CAUSAL64K_S26 = {"fa4, 64k/GPU": "h100x2/cp/cp_h100x2__fa4_64k_causal_s26.csv",
                 "triton, 64k/GPU": "h100x2/cp/cp_h100x2__triton_64k_causal_s26.csv"}


def causal64k_s26() -> str:
    out = []
    for run, relpath in CAUSAL64K_S26.items():
        for d in ("fwd", "bwd"):
            out.append(f"{run.replace('/GPU', '')} {d} {_vs_best(_cp_cells(relpath)[('causal', 2, d)])}")
    return "; ".join(out)


def cp2_s26_summary() -> str:
    """Session 25's cp 2 cells with the causal 64k cells replaced by session 26's runs."""
    cells = {(run, mask, d): v for run, mask, d, v, _ in _cp2_pairs_s25()}
    for run, relpath in CAUSAL64K_S26.items():
        for d in ("fwd", "bwd"):
            cells[run, "causal", d] = _cp_cells(relpath)[("causal", 2, d)]
    won = sum(_magi_over_best(v) >= 1.0 for v in cells.values())
    return f"{won} of {len(cells)} cells"


# the persistent Gluon forward (session 26): two probe runs of both grids on one H100, the
# kernel_masks bench run at 16k after it, and the Triton cp 2 run of the 16k document masks
PERSISTENT_S26 = ("h100x2/probes_s26/rank_mask_probe_persistent_1.csv",
                  "h100x2/probes_s26/rank_mask_probe_persistent_2.csv")
KERNELS_S26 = "h100/kernels/kernel_masks__16k_s26.csv"
TRITON_DOCS_S26 = "h100x2/cp/cp_h100x2__triton_16k_docs_s26.csv"
FULL_OR_CAUSAL = ("full_16k", "causal_16k", "full_docs_16384", "causal_docs_16384")


def _variant_ratios(relpaths: tuple[str, ...], variant: str, base: str,
                    whole_masks: tuple[str, ...]) -> str:
    """``variant`` / ``base`` kernel time per mask of rank_mask_probe.py runs, per run: the
    masks of one sequence with one document (full, causal; ``whole_masks``) apart from the
    rest."""
    out = []
    for run, relpath in enumerate(relpaths, 1):
        f = pd.read_csv(RESULTS / relpath)
        t = f.pivot_table(index=["mask", "strategy", "rank"], columns="order", values="ms")
        ratio = t[variant] / t[base]
        whole = ratio[[m in whole_masks for m, _, _ in ratio.index]]
        rest = ratio[[m not in whole_masks for m, _, _ in ratio.index]]
        out.append(f"run {run}: {rest.min():.2f}-{rest.max():.2f} on the {len(rest)} document, "
                   f"window and cp-rank masks (mean {rest.mean():.2f}), {whole.min():.2f}-"
                   f"{whole.max():.2f} on full and causal")
    return "; ".join(out)


def persistent_s26() -> str:
    """Persistent / one-program-per-item forward time per mask, per run."""
    return _variant_ratios(PERSISTENT_S26, "fwd_persistent", "fwd_per_item", FULL_OR_CAUSAL)


def kernels_s26_table() -> str:
    return triton_s21_table(KERNELS_S26, (K16,))


def kernels_s26_goals() -> str:
    return triton_s21_goals(KERNELS_S26)


def triton_docs_s26() -> str:
    """magi against the best baseline and the best equal-token one, Triton, 16k documents."""
    everyone, equal = _cp_cells(TRITON_DOCS_S26), _cp_cells(TRITON_DOCS_S26, equal_tokens=True)
    before = _cp_cells(CP_S25["triton, 16k/GPU"])
    out = []
    for mask in ("full_document", "causal_document", "block_causal_document"):
        for d in ("fwd", "bwd"):
            key = (mask, 2, d)
            out.append(f"{mask} {d} {_magi_over_best(everyone[key]):.2f} (session 25: "
                       f"{_magi_over_best(before[key]):.2f}), equal-token "
                       f"{_magi_over_best(equal[key]):.2f}")
    return "; ".join(out)


def pytest_nccl_s26() -> str:
    return _pytest_counts("h100x2/tests/pytest_nccl_fa4_cut_auto_3360fdec20ab.log")


def cast_bandwidth_s26() -> str:
    frame = pd.read_csv(RESULTS / PROBES_S26 / "cast_bandwidth.csv")
    us = {(r.method, r.mb): r.us for _, r in frame.iterrows()}
    sizes = sorted({mb for _, mb in us})
    lines = ["| MB a rank | NCCL all_to_all us (GB/s) | symmetric memory pull | push |",
             "|---|---|---|---|"]
    for mb in sizes:
        cells = [f"{us[m, mb]:.0f} ({mb * 1e3 / us[m, mb]:.0f})"
                 for m in ("nccl_a2a", "symm_pull", "symm_push")]
        lines.append(f"| {mb:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _probe_s26(run: str) -> pd.DataFrame:
    return pd.read_csv(RESULTS / PROBES_S26 / f"rank_mask_probe_{run}.csv")


def probe_ranks_s26() -> str:
    """Each cp 2 rank's mask alone on one GPU (run a): FA4 and the Gluon kernels, ms."""
    frame = _probe_s26("a")
    frame = frame[frame.strategy.isin(["magi", "hybrid_cp"]) & frame.order.isin(["default",
                                                                                 "heavy_first"])]
    ms = {(r["mask"], r.strategy, r["rank"], r.backend, r.direction): r.ms
          for _, r in frame.iterrows()}
    lines = ["| mask | strategy | rank | FA4 fwd | FA4 bwd | Triton fwd | Triton bwd |",
             "|---|---|---|---|---|---|---|"]
    for mask, strategy, rank in sorted({k[:3] for k in ms}):
        vals = [ms[mask, strategy, rank, b, d] for b in ("fa4", "triton") for d in ("fwd", "bwd")]
        lines.append(f"| {mask} | {strategy} | {rank} | " + " | ".join(f"{v:.2f}" for v in vals)
                     + " |")
    return "\n".join(lines)


def _order_ratio(run: str, direction: str) -> pd.Series:
    """natural / heaviest-first time per mask of one probe run."""
    frame = _probe_s26(run)
    frame = frame[(frame.backend == "triton") & (frame.direction == direction)]
    prefix = "bwd_" if run == "b" and direction == "bwd" else ""
    t = frame.pivot_table(index=["mask", "strategy", "rank"], columns="order", values="ms")
    return t[prefix + "natural"] / t[prefix + "heavy_first"]


def order_s26() -> str:
    parts = []
    for run in ("a", "b"):
        for d in ("fwd", "bwd"):
            r = _order_ratio(run, d)
            parts.append(f"run {run} {d}: mean {r.mean():.3f} ({r.min():.2f}-{r.max():.2f}, "
                         f"{len(r)} masks)")
    return "; ".join(parts)


def dq_add_share_s26() -> str:
    """The Gluon backward without its dQ add (DQ_NO_ADD) and without dQ (DQ_NONE), as shares
    of the whole kernel's time (run b), over every probed mask; and on magi's two ranks of
    causal_document."""
    frame = _probe_s26("b")
    t = frame[frame.direction == "bwd"].pivot_table(index=["mask", "strategy", "rank"],
                                                    columns="order", values="ms")
    add = 1 - t.bwd_dq_no_add / t.bwd_heavy_first
    none = t.bwd_dq_none / t.bwd_heavy_first
    magi = [t.loc[("causal_document", "magi", r)] for r in (0, 1)]
    return (f"the add {add.min():.0%}-{add.max():.0%} of the kernel's time, the kernel without "
            f"dQ at all {none.min():.2f}-{none.max():.2f}x; magi causal_document rank 0 / 1: "
            + ", ".join(f"{m.bwd_heavy_first:.2f} ms whole, {m.bwd_dq_no_add:.2f} no add, "
                        f"{m.bwd_dq_none:.2f} no dQ" for m in magi))


def _bwd_fit_s26(backend: str):
    """Least squares of the backward's ms on (tile pairs, partial pairs, key tiles) over run
    a's masks (the plan's order): (coefficients in us, {(mask, strategy, rank): measured /
    fitted})."""
    frame = _probe_s26("a")
    rows = frame[(frame.backend == backend) & (frame.direction == "bwd")
                 & frame.order.isin(["default", "heavy_first"])]
    x = rows[["pairs", "partial", "tiles"]].to_numpy(float)
    coef = np.linalg.lstsq(x, rows.ms.to_numpy(), rcond=None)[0]
    ratio = rows.ms.to_numpy() / (x @ coef)
    return coef * 1000, dict(zip(zip(rows["mask"], rows.strategy, rows["rank"]), ratio))


def bwd_fit_s26() -> str:
    out = []
    for backend in ("fa4", "triton"):
        coef, ratio = _bwd_fit_s26(backend)
        rest = [r for k, r in ratio.items() if k != ("causal_document", "magi", 0)]
        out.append(f"{backend}: {coef[0]:.2f} us a pair, {coef[1]:+.2f} a partial pair, "
                   f"{coef[2]:.1f} a key tile; measured / fitted {min(rest):.2f}-{max(rest):.2f} "
                   f"over {len(rest)} masks, magi causal_document rank 0 "
                   f"{ratio['causal_document', 'magi', 0]:.2f}")
    return "; ".join(out)


def timing_s26() -> str:
    """ffa_triton_sweep's Gluon backward at 16k (H100), synced against queued timing."""
    tf = {}
    for timing in ("synced", "queued"):
        frame = pd.read_csv(RESULTS / f"h100x2/ffa_triton/s26_timing_{timing}_sweep.csv")
        rows = frame[(frame.variant == "bwd_gluon_tma_b2") & (frame.status == "ok")]
        tf[timing] = dict(zip(rows["mask"], rows.tflops_per_s))
    return ", ".join(f"{m} {tf['synced'][m]:.0f} / {tf['queued'][m]:.0f}"
                     for m in sorted(tf["synced"]))


def pytest_nccl_s25() -> str:
    """The log has no summary line: the call's 200 s limit stopped pytest in its last case
    (fa4, cut_auto), so the cases that finished are counted from its progress dots, and the
    compared tensors from the test's own lines."""
    text = (RESULTS / "h100x2/tests/pytest_nccl_4a96d1cd46c3.log").read_text()
    passed = len(re.findall(r"^\.", text, re.M))
    failed = len(re.findall(r"^F", text, re.M))
    checks = re.findall(r" err=\S+ tol=\S+ (\w+)$", text, re.M)
    return (f"{passed} of 12 cases passed, {failed} failed, the 12th (fa4, cut_auto) stopped by "
            f"the call's limit; {checks.count('ok')} of {len(checks)} compared tensors within "
            f"tolerance")


FA4_GROUPS = "h200x2/fa4_groups/fa4_bench.csv"


def fa4_groups_table() -> str:
    """ffa_fa4 (native groups) against its block-sparse path, same run (H200, one GPU)."""
    f = _helper(FA4_GROUPS)  # fa4_check.py's file, as the helper runs above
    f = f[f.status == "ok"]
    t = f.pivot_table(index=["mask", "seqlen", "direction"], columns="impl", values="tflops",
                      sort=False)
    lines = ["| mask | S | dir | native groups | block-sparse | groups / block-sparse |",
             "|---|---|---|---|---|---|"]
    for (mask, seqlen, d), v in t.iterrows():
        lines.append(f"| {mask} | {seqlen // 1024}k | {d} | {v.ffa_fa4:.0f} | {v.ffa_fa4_bs:.0f} "
                     f"| {v.ffa_fa4 / v.ffa_fa4_bs:.2f} |")
    return "\n".join(lines)


def pytest_fa4_groups() -> str:
    return _pytest_counts("h200x2/fa4_groups/pytest_groups.log")


def pytest_triton_s17() -> str:
    return _summed_counts("h200x2/tests/pytest_gpu_triton_f581334a1415.log")


def cp_gpu_check_2() -> str:
    f = pd.read_csv(RESULTS / "h200x2/cp_gpu_check.csv")
    counts = f.status.value_counts()
    return ", ".join(f"{n} {s}" for s, n in counts.items()) + f" ({len(f)} cells, cp 2)"


def pytest_gpu_magi_s16() -> str:
    return _pytest_counts("h200x2/tests/pytest_gpu_magi_342cdf62bec1.log")


def magi_profile_table() -> str:
    steps = {"before": "h200/magi_profile/magi_profile_step0_before.csv",
             "plan once": "h200/magi_profile/magi_profile_step1_plan_once.csv",
             "no empty stage, fused merge": "h200/magi_profile/magi_profile_step2_no_empty_stage.csv"}
    lines = ["| step | backend | mask | fwd magi cp1 / kernel (ms) | bwd magi cp1 / kernel (ms) | syncs per step |",
             "|---|---|---|---|---|---|"]
    for label, relpath in steps.items():
        f = pd.read_csv(RESULTS / relpath, keep_default_na=False)
        for (backend, mask), cell in f.groupby(["backend", "mask"], sort=False):
            def ms(impl, d):
                return float(cell[(cell.impl == impl) & (cell.direction == d)].runtime_ms.iloc[0])
            ratio = [f"{ms('magi_cp1', d):.2f} / {ms('kernel', d):.2f} = "
                     f"{ms('kernel', d) / ms('magi_cp1', d):.2f}x" for d in ("fwd", "bwd")]
            syncs = cell[cell.impl == "magi_cp1"].syncs_per_step.iloc[0]
            lines.append(f"| {label} | {backend} | {mask} | {ratio[0]} | {ratio[1]} | {syncs} |")
    return "\n".join(lines)


# -- session 14: the GPU suite, peers 1k-64k, the dense masks, block-sparse, magi at cp 1 --------
GPU_SUITE_LOG = "h200/tests/pytest_gpu_905043273ce1_6workers.log"
FLASHINFER_LOG = "h200/tests/pytest_gpu_905043273ce1_flashinfer.log"
PEERS_SMALL = "h200/kernels/kernel_masks__peers_1k-4k-8k-32k.csv"
DENSE_MORE = "h200/kernels/dense_sweep__8_more_masks_4k-16k-64k.csv"
BLOCK_SPARSE = "h200/kernels/block_sparse_sweep__cut_at_270s.csv"
CP1_H200 = "h200/cp/cp1_fa4_16k.csv"
PEER_KERNELS = ("cudnn", "fa2_torch", "fa3", "flashinfer", "ffa", "ffa_fa4", "flex")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")


def _summed_counts(relpath: str) -> str:
    """The summary lines of a log of several pytest processes, added up: '10 passed, 2 skipped'."""
    totals: dict[str, int] = {}
    for line in (RESULTS / relpath).read_text().splitlines():
        if re.match(r"^\d+ (passed|failed|skipped)", line) and " in " in line:
            for n, what in _COUNT.findall(line):
                totals[what] = totals.get(what, 0) + int(n)
    return ", ".join(f"{n} {w}" for w, n in totals.items())


def pytest_gpu_all() -> str:
    return _summed_counts(GPU_SUITE_LOG)


def pytest_gpu_failed_tests() -> str:
    """The distinct failing test names of the suite's log, e.g. 'test_x[...-v] (16)'."""
    names = re.findall(r"^_{3,} (test_\S+) _{3,}$", (RESULTS / GPU_SUITE_LOG).read_text(), re.M)
    variants = sorted({n.split("[")[1].rstrip("]").split("-")[-1] for n in names})
    tests = sorted({n.split("[")[0] for n in names})
    return f"{len(names)}, all {', '.join(tests)} with variant {', '.join(variants)}"


def pytest_flashinfer() -> str:
    return _summed_counts(FLASHINFER_LOG)


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


def peers_by_size_table() -> str:
    return _by_size_table({1024: PEERS_SMALL, 2048: NO_LSE[0], 4096: PEERS_SMALL,
                           8192: PEERS_SMALL, K16: NO_LSE[0], 32768: PEERS_SMALL, K64: NO_LSE[0]},
                          PEER_KERNELS)


def peer_x_reasons() -> str:
    """Each peer's reasons for X cells in the peer runs, with the masks they cover."""
    frame = pd.concat([_files((PEERS_SMALL,)), _files((NO_LSE[0],))], ignore_index=True)
    lines = []
    for kernel in ("cudnn", "fa2_torch", "fa3", "fa4", "flashinfer"):
        x = frame[(frame.kernel == kernel) & (frame.status != "ok")]
        # the reason without its parenthesised details (which name the mask and its sizes)
        reasons = x.message.str.replace(r" \((?:[^()]|\([^()]*\))*\)", "", regex=True)
        for message, cell in x.groupby(reasons, sort=True):
            masks = ", ".join(sorted(cell["mask"].unique()))
            dirs = "/".join(sorted(cell.direction.unique()))
            lines.append(f"- {kernel} ({dirs}; {masks}): {message}")
    return "\n".join(lines)


def h200_masks_with_rows() -> str:
    """The distinct mask patterns with ok rows anywhere under results/h200/kernels."""
    ok = _rows("h200/kernels")
    names = sorted(ok[ok.status == "ok"]["mask"].map(_pattern_of).unique())
    return f"{len(names)} ({', '.join(names)})"


def _pattern_of(label: str) -> str:
    """A result row's mask label without the parameter suffix of block-sparse variants."""
    return "block_sparse" if label.startswith("block_sparse") else label


def dense_more_table(relpath: str = DENSE_MORE,
                     kernels: tuple[str, ...] = ("sdpa", "flashinfer", "flex", "ffa", "ffa_fa4")) -> str:
    frame = _files((relpath,))
    lines = ["| mask | S | dir | " + " | ".join(kernels) + " | ffa_fa4 / flex | ffa / flex |",
             "|" + "---|" * (len(kernels) + 5)]
    for mask in sorted(frame["mask"].unique()):
        for seqlen in sorted(frame.seqlen.unique()):
            for d in ("fwd", "bwd"):
                v = {k: _tf(frame, k, mask, int(seqlen), d) for k in kernels}
                if v["ffa_fa4"] is None and v["ffa"] is None:
                    continue  # the sweep stopped before this cell
                ratio = lambda a: "-" if v[a] is None or v["flex"] is None else f"{v[a] / v['flex']:.2f}"  # noqa: E731
                lines.append(f"| {mask} | {_k(int(seqlen))} | {d} | "
                             + " | ".join("X" if v[k] is None else f"{v[k]:.0f}" for k in kernels)
                             + f" | {ratio('ffa_fa4')} | {ratio('ffa')} |")
    return "\n".join(lines)


def _dense_more_vs_flex(kernel: str) -> dict:
    """{(mask, seqlen, direction): kernel / flex} over the dense_sweep masks' cells."""
    frame = _files((DENSE_MORE,))
    return dict(_pairs(frame, kernel, "flex", sorted(frame["mask"].unique())))


def dense_more_vs_flex() -> str:
    ratios = list(_dense_more_vs_flex("ffa_fa4").values())
    return f"{_span(ratios)} over {len(ratios)} cells"


def dense_more_below_flex() -> str:
    fa4, ffa = _dense_more_vs_flex("ffa_fa4"), _dense_more_vs_flex("ffa")
    cells = [cell for cell in {**fa4, **ffa} if min(fa4.get(cell, 1), ffa.get(cell, 1)) < 1]
    cells.sort(key=lambda c: (c[0], c[1], ("fwd", "bwd").index(c[2])))
    text = lambda r: "X" if r is None else f"{r:.2f}"  # noqa: E731
    return "; ".join(f"{m} {_k(s)} {d} {text(fa4.get((m, s, d)))} | {text(ffa.get((m, s, d)))}"
                     for m, s, d in cells) or "none"


def block_sparse_table() -> str:
    frame = _files((BLOCK_SPARSE,))
    lines = ["| mask | S | dir | flex | ffa | ffa_fa4 | ffa / flex | ffa_fa4 / flex |",
             "|" + "---|" * 8]
    for (mask, seqlen), _ in frame.groupby(["mask", "seqlen"], sort=False):
        for d in ("fwd", "bwd"):
            flex, ffa, fa4 = (_tf(frame, k, mask, int(seqlen), d) for k in ("flex", "ffa", "ffa_fa4"))
            if ffa is None or flex is None or fa4 is None:
                continue
            lines.append(f"| {mask} | {_k(int(seqlen))} | {d} | {flex:.0f} | {ffa:.0f} | {fa4:.0f} "
                         f"| {ffa / flex:.2f} | {fa4 / flex:.2f} |")
    return "\n".join(lines)


def cp1_h200_table() -> str:
    cells = _cp_cells(CP1_H200)
    lines = ["| mask | dir | magi | ulysses | ring_allgather | magi / best |", "|---|---|---|---|---|---|"]
    for mask in CP_MASKS:
        for d in ("fwd", "bwd"):
            v = cells[(mask, 1, d)]
            base = max(_baselines(v).values())
            lines.append(f"| {mask} | {d} | " + " | ".join(
                f"{v[k]:.0f}" for k in ("magi", "ulysses", "ring_allgather"))
                + f" | {v['magi'] / base:.2f} |")
    return "\n".join(lines)


# -- session 15: the GPU suite and kernel_masks on one H100, the window patterns, v4 backward ---
H100_SUITE_LOG = "h100/tests/pytest_gpu_6e50c055a20c_6workers.log"
H100_FLASHINFER_LOG = "h100/tests/pytest_gpu_6e50c055a20c_flashinfer.log"
H100_RUNS = {**{s: "h100/kernels/kernel_masks__1k-2k-4k-8k-16k.csv"
                for s in (1024, 2048, 4096, 8192, K16)},
             **{s: "h100/kernels/kernel_masks__32k-64k.csv" for s in (32768, K64)}}
H100_KERNELS = ("sdpa", "cudnn", "fa2_torch", "fa3", "flashinfer", "flex", "ffa", "ffa_fa4")
DENSE_WINDOWS = "h200/kernels/dense_sweep__sliding_window_global_sliding_window__cut_at_320s.csv"
TRITON_V4 = "h200/ffa_triton/v4_bwd_det_sweep.csv"
V3_DEFAULT_BWD = "bwd_det_64x64_w4_s3_p2"  # the ordered two-kernel path, pointer loads


def h100_pytest_gpu_all() -> str:
    return _summed_counts(H100_SUITE_LOG)


def h100_pytest_failed() -> str:
    """The failing tests of the H100 suite and how many of them ran out of GPU memory."""
    text = (RESULTS / H100_SUITE_LOG).read_text()
    names = re.findall(r"^_{3,} (test_\S+) _{3,}$", text, re.M)
    oom = re.findall(r"^E\s+torch\.OutOfMemoryError", text, re.M)
    return f"{len(names)} ({', '.join(names)}); {len(oom)} of them CUDA out of memory"


def h100_pytest_flashinfer() -> str:
    return _summed_counts(H100_FLASHINFER_LOG)


def h100_by_size_table() -> str:
    return _by_size_table(H100_RUNS, H100_KERNELS)


def _h100_pairs(num: str, den: str, min_seqlen: int, masks: Iterable[str] = KERNEL_MASKS):
    """num / den per cell of the H100 runs from ``min_seqlen`` up, each ratio within its file."""
    return [(cell, r) for f in sorted(set(H100_RUNS.values()))
            for cell, r in _pairs(_files((f,)), num, den, masks) if cell[1] >= min_seqlen]


def h100_ffa_fa4_vs_fa4() -> str:
    return _low_cells(_h100_pairs("ffa_fa4", "fa4", 4096), FFA_FA4_GOAL)


def h100_ffa_fa4_vs_flex() -> str:
    return _low_cells(_h100_pairs("ffa_fa4", "flex", K16), 1.2)


def h100_ffa_vs_flex() -> str:
    return _low_cells(_h100_pairs("ffa", "flex", K16), 1.2)


def h100_ffa_vs_fa4() -> str:
    """FFA's Triton kernel over FA4 on full and causal at 16k and 64k, fwd and bwd apart."""
    pairs = [(c, r) for c, r in _h100_pairs("ffa", "fa4", K16, ("full", "causal"))
             if c[1] in (K16, K64)]
    return "; ".join(f"{d} {_span([r for (_, _, dd), r in pairs if dd == d])}"
                     for d in ("fwd", "bwd"))


def dense_windows_table() -> str:
    return dense_more_table(DENSE_WINDOWS, ("sdpa", "cudnn", "fa4", "flex", "ffa", "ffa_fa4"))


# session 21 (issue 14): the forward options measured, the Gluon proof of concept, and one
# bench run of FFA's Triton kernel against FA4 and compiled FlexAttention
S21_SWEEP = "h200/ffa_triton/s21_sweep.csv"
S21_GLUON = ("h200/ffa_triton/s21_gluon_poc_a.csv", "h200/ffa_triton/s21_gluon_poc_b.csv")
S21_KERNELS = "h200/kernels/kernel_masks__ffa_fa4_flex_16k_64k_s21.csv"
S21_GLUON_KERNELS = "h200/kernels/kernel_masks__gluon_fwd_16k_64k_s21.csv"
S21_GLUON_WS = "h200/ffa_triton/s21_gluon_poc_e.csv"
S21_VARIANTS = {"fwd_tma_128x64_w4_s3_p2": "default (w4)",
                "fwd_tma_128x64_w8_s3_p2_r128": "short-row (w8 r128)",
                "fwd_tma_rs8_128x64_w4_s3_p2": "lazy rescale w4",
                "fwd_tma_rs8_128x64_w8_s3_p2_r128": "lazy rescale w8 r128",
                "fwd_tma_pf_rs8_128x128_w8_s2_p2": "early QK^T + lazy, 128x128 w8"}


def triton_s21_variants() -> str:
    """Forward TFLOPs/s per variant and FA4's in the same run (s21 sweep)."""
    f = pd.read_csv(RESULTS / S21_SWEEP)
    f = f[(f.status == "ok") & (f.direction == "fwd")]
    lines = ["| mask | S | " + " | ".join(S21_VARIANTS.values()) + " | fa4 |",
             "|" + "---|" * (len(S21_VARIANTS) + 3)]
    for (mask, seqlen), cell in f.groupby(["mask", "seqlen"], sort=False):
        tf = {r.variant: r.tflops_per_s for r in cell.itertuples()}
        vals = [tf.get(v) for v in (*S21_VARIANTS, "fa4")]
        lines.append(f"| {mask} | {_k(seqlen)} | "
                     + " | ".join("X" if v is None else f"{v:.0f}" for v in vals) + " |")
    return "\n".join(lines)


def gluon_poc_table(runs: tuple[str, ...] = S21_GLUON, labels: str = "ab") -> str:
    """The Gluon forward (full mask) against FFA's Triton kernel and FA4, per run."""
    lines = ["| run | S | kernel / variant | TFLOPs/s | / Triton default |", "|---|---|---|---|---|"]
    for run, relpath in zip(labels, runs):
        f = pd.read_csv(RESULTS / relpath)
        f = f[f.status == "ok"]
        for seqlen, cell in f.groupby("seqlen"):
            base = cell[cell.kernel == "ffa_triton"].tflops_per_s
            for r in cell.itertuples():
                ratio = f"{r.tflops_per_s / base.iloc[0]:.2f}" if len(base) else "-"
                lines.append(f"| {run} | {_k(seqlen)} | {r.kernel} / {r.variant} | "
                             f"{r.tflops_per_s:.0f} | {ratio} |")
    return "\n".join(lines)


def gluon_poc_checks() -> str:
    f = pd.concat([pd.read_csv(RESULTS / r) for r in S21_GLUON])
    checks = f[f.status.str.startswith("check")]
    return ", ".join(f"S={s}: {int((c.status == 'check_ok').sum())} of {len(c)} ok"
                     for s, c in checks.groupby("seqlen"))


def pytest_gpu_s21() -> str:
    return _summed_counts("h200/tests/pytest_gpu_d19533480c0e_6workers.log")


def pytest_triton_s21() -> str:
    return _summed_counts("h200/tests/pytest_triton_gpu_6d26a3647c93.log")



# ---- session 22: the Gluon one-pass backward (issue 14) ----
S22_FINAL = ("h200/ffa_triton/s22_gluon_bwd_final_16k_sweep.csv",
             "h200/ffa_triton/s22_gluon_bwd_final_64k_sweep.csv")
S22_GLUON, S22_TRITON = "bwd_gluon_tma_b2", "bwd_det_tma_64x64_w4_s3_p2"
# probe runs, each with the default variant (S22_GLUON) in the same run: run -> file
S22_PROBES = {"a": "h200/ffa_triton/s22_gluon_bwd_a_sweep.csv",
              "b": "h200/ffa_triton/s22_gluon_bwd_b_sweep.csv",
              "c": "h200/ffa_triton/s22_gluon_bwd_c_sweep.csv",
              "d": "h200/ffa_triton/s22_gluon_bwd_d_sweep.csv",
              "e": "h200/ffa_triton/s22_gluon_bwd_e_sweep.csv",
              "f": "h200/ffa_triton/s22_gluon_bwd_f_sweep.csv",
              "g": "h200/ffa_triton/s22_gluon_bwd_g_sweep.csv"}
S22_PROBE_CELLS = (("full", 16384), ("causal", 16384), ("full", 65536), ("causal", 65536))


def _bwd_cells(files: tuple[str, ...]):
    """{(mask, seqlen): {gluon, triton, fa4, flex: TFLOPs/s}} of a final backward sweep, in run
    order (gluon: the Gluon kernel with dQ by TMA; triton: the ordered Triton backward)."""
    f = pd.concat([pd.read_csv(RESULTS / r) for r in files])
    cells = {}
    for r in f[(f.status == "ok") & (f.direction == "bwd")].itertuples():
        key = {S22_GLUON: "gluon", S22_TRITON: "triton"}.get(r.variant, r.kernel)
        if key in ("gluon", "triton", "fa4", "flex"):  # not the timing probes
            cells.setdefault((r.mask, int(r.seqlen)), {})[key] = r.tflops_per_s
    return cells


def _bwd_table(files: tuple[str, ...], default: str) -> str:
    lines = [f"| mask | S | gluon{' (default)' if default == 'gluon' else ''} | triton"
             f"{' (default)' if default == 'triton' else ''} | fa4 | flex | gluon/fa4 | "
             "triton/fa4 | gluon/flex | triton/flex |", "|---|---|---|---|---|---|---|---|---|---|"]
    ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
    for (mask, seqlen), c in _bwd_cells(files).items():
        g, t, a, x = (c.get(k) for k in ("gluon", "triton", "fa4", "flex"))
        fmt = lambda v: "X" if v is None else f"{v:.0f}"
        lines.append(f"| {mask} | {_k(seqlen)} | {fmt(g)} | {fmt(t)} | {fmt(a)} | {fmt(x)} | "
                     f"{ratio(g, a)} | {ratio(t, a)} | {ratio(g, x)} | {ratio(t, x)} |")
    return "\n".join(lines)


def gluon_bwd_s22_table() -> str:
    """Backward TFLOPs/s: the Gluon one-pass kernel, the ordered Triton path (the default), FA4
    and compiled Flex, one run per seqlen."""
    return _bwd_table(S22_FINAL, "triton")


def gluon_bwd_s22_goals() -> str:
    """Issue 14's backward goals from the final runs, with FFA's better backward per cell."""
    return _bwd_goals(S22_FINAL)


def _bwd_goals(files: tuple[str, ...]) -> str:
    cells = _bwd_cells(files)
    best = {k: max(v for n, v in c.items() if n in ("gluon", "triton")) for k, c in cells.items()}
    vs_fa4 = [best[k] / c["fa4"] for k, c in cells.items()
              if k[0] in ("full", "causal") and "fa4" in c]
    vs_flex = [best[k] / c["flex"] for k, c in cells.items() if "flex" in c]
    return (f"bwd / fa4 on full and causal {_span(vs_fa4)} ({_verdict(vs_fa4, 0.75)}); "
            f"bwd / flex {_span(vs_flex)}, {sum(v >= 1.2 for v in vs_flex)} of {len(vs_flex)} "
            f"cells at >= 1.2")


def gluon_bwd_probes_table() -> str:
    """Each probe variant / the default Gluon backward (dQ by TMA) of the same run."""
    return _probes_table(S22_PROBES, S22_PROBE_CELLS)


def _probes_table(probes: dict[str, str], probe_cells) -> str:
    lines = ["| run | variant | " + " | ".join(f"{m} {_k(s)}" for m, s in probe_cells) + " |",
             "|" + "---|" * (len(probe_cells) + 2)]
    for run, relpath in probes.items():
        f = pd.read_csv(RESULTS / relpath)
        f = f[(f.status == "ok") & (f.direction == "bwd")]
        tf = {(r.variant, r.mask, int(r.seqlen)): r.tflops_per_s for r in f.itertuples()}
        for variant in dict.fromkeys(f.variant):
            if variant == S22_GLUON:
                continue
            vals = [tf.get((variant, m, s)) / tf[(S22_GLUON, m, s)]
                    if (variant, m, s) in tf and (S22_GLUON, m, s) in tf else None
                    for m, s in probe_cells]
            lines.append(f"| {run} | {variant.replace('bwd_', '')} | "
                         + " | ".join("-" if v is None else f"{v:.2f}" for v in vals) + " |")
    return "\n".join(lines)


def pytest_triton_s22() -> str:
    return _pytest_counts("h200/tests/pytest_triton_gpu_s22_609ee7ffb027.log")

# ---- session 23: the Gluon backward at FA4's pace (issue 14) ----
S23_FINAL = ("h200/ffa_triton/s23_gluon_bwd_final_sweep.csv",)
S23_PROBES = {"a": "h200/ffa_triton/s23_gluon_bwd_a_sweep.csv",
              "c": "h200/ffa_triton/s23_gluon_bwd_c_sweep.csv",
              "d": "h200/ffa_triton/s23_gluon_bwd_d_sweep.csv"}
S23_PROBE_CELLS = (("full", 16384), ("causal", 16384), ("causal_document", 16384))


def gluon_bwd_s23_table() -> str:
    """Backward TFLOPs/s after session 23: the Gluon kernel (now the default where its plan
    suits), the ordered Triton path, FA4 and compiled Flex, one run over 16k and 64k."""
    return _bwd_table(S23_FINAL, "gluon")


def gluon_bwd_s23_goals() -> str:
    return _bwd_goals(S23_FINAL)


def gluon_bwd_s23_probes_table() -> str:
    return _probes_table(S23_PROBES, S23_PROBE_CELLS)


def gluon_vs_triton_bwd_table() -> str:
    """Gluon backward / ordered Triton backward per (mask, seqlen), same masks, one run."""
    return gluon_vs_triton_table("h200/ffa_triton/s23_gluon_vs_triton_bwd.csv")


def pytest_triton_s23() -> str:
    return _pytest_counts("h200/tests/pytest_triton_gpu_s23_e696a3600db2.log")


def pytest_magi_s23() -> str:
    return _pytest_counts("h200/tests/pytest_gpu_magi_s23_356dce7.log")


def pytest_gluon_bwd_s23() -> str:
    return _pytest_counts("h200/tests/pytest_gluon_bwd_s23_356dce7.log")


# ---- session 24: step-order and row-interval probes of the Gluon backward (issue 14) ----
S24_ORDER = ("h200/ffa_triton/s24_gluon_bwd_order_16k_sweep.csv",
             "h200/ffa_triton/s24_gluon_bwd_order_64k_sweep.csv")
S24_ROW = ("h200/ffa_triton/s24_gluon_bwd_rowtma_16k_masks_sweep.csv",
           "h200/ffa_triton/s24_gluon_bwd_rowtma_64k_sweep.csv")
S24_KERNELS_BEFORE = "h200/kernels/kernel_masks__gluon_bwd_16k_64k_s24.csv"
S24_KERNELS = "h200/kernels/kernel_masks__gluon_bwd_rowtma_16k_64k_s24.csv"


def _bwd_rows(files: tuple[str, ...]) -> dict:
    """{(mask, seqlen): {variant: TFLOPs/s}} of the ok backward rows, in run order."""
    f = pd.concat([pd.read_csv(RESULTS / r) for r in files])
    cells = {}
    for r in f[(f.status == "ok") & (f.direction == "bwd")].itertuples():
        cells.setdefault((r.mask, int(r.seqlen)), {})[r.variant] = r.tflops_per_s
    return cells


def _ratio_table(cells: dict, columns: dict[str, tuple[str, str]]) -> str:
    """One row per cell; each column a / b of two variants of that cell ('-' where one is absent)."""
    lines = ["| mask | S | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for (mask, seqlen), c in cells.items():
        vals = [f"{c[a] / c[b]:.2f}" if a in c and b in c else "-" for a, b in columns.values()]
        lines.append(f"| {mask} | {_k(seqlen)} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def gluon_bwd_s24_order_table() -> str:
    """Each step-order probe / the Gluon backward of the same run and cell."""
    base = "bwd_gluon_tma_b2"
    return _ratio_table(_bwd_rows(S24_ORDER), {
        "al": ("bwd_gluon_tma_al_b2", base), "hf": ("bwd_gluon_tma_hf_b2", base),
        "al+hf": ("bwd_gluon_tma_alhf_b2", base)})


def gluon_bwd_s24_row_table() -> str:
    """Row intervals by TMA / from the global table (the session 23 kernel), the same kernel
    measured again after them, and that kernel against compiled Flex in the same run."""
    base, again = "bwd_gluon_rowglobal_b2", "bwd_gluon_rowglobal_again_b2"
    return _ratio_table(_bwd_rows(S24_ROW), {
        "by TMA / table": ("bwd_gluon_rowtma_b2", base), "again / first": (again, base),
        "first / flex": (base, "flex"), "again / flex": (again, "flex")})


def pytest_gluon_bwd_s24() -> str:
    return _pytest_counts("h200/tests/pytest_gluon_bwd_rowtma_s24_07772d2.log")


def pytest_gluon_bwd_s24_final() -> str:
    return _pytest_counts("h200/tests/pytest_gluon_bwd_s24_2e86b94.log")


def pytest_magi_s24() -> str:
    return _pytest_counts("h200/tests/pytest_gpu_magi_s24_2e86b94.log")


def kernels_s24_table() -> str:
    """The kernel_masks bench run (ffa, fa4, flex) after the row-interval rule."""
    return triton_s21_table(S24_KERNELS)


def kernels_s24_goals() -> str:
    return triton_s21_goals(S24_KERNELS)


def kernels_s24_before_goals() -> str:
    """The same bench run before the rule (Gluon backward of session 23)."""
    return triton_s21_goals(S24_KERNELS_BEFORE)


def kernels_s24_before_cell() -> str:
    """causal_document 16k backward, ffa / flex, in the run before the rule and after it."""
    ratio = lambda f: _tf(f, "ffa", "causal_document", K16, "bwd") / _tf(
        f, "flex", "causal_document", K16, "bwd")
    return (f"{ratio(_files((S24_KERNELS_BEFORE,))):.2f} before, "
            f"{ratio(_files((S24_KERNELS,))):.2f} after")


def gluon_vs_triton_table(relpath: str = "h200/ffa_triton/s21_gluon_vs_triton_fwd.csv") -> str:
    """Gluon kernel / Triton kernel per (mask, seqlen), same plans, one run."""
    f = pd.read_csv(RESULTS / relpath)
    g = f[f.kernel == "gluon"].set_index(["mask", "seqlen"]).tflops_per_s
    tr = f[f.kernel == "triton"].set_index(["mask", "seqlen"]).tflops_per_s
    seqlens = sorted(f.seqlen.unique())
    lines = ["| mask | " + " | ".join(_k(s) for s in seqlens) + " |", "|" + "---|" * (len(seqlens) + 1)]
    for mask in dict.fromkeys(f["mask"]):  # the run's order
        cells = [f"{g[(mask, s)] / tr[(mask, s)]:.2f}" if (mask, s) in g.index else "-"
                 for s in seqlens]
        lines.append(f"| {mask} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


CP1_TRITON_S21 = "h200/cp/cp1_triton_16k_64k_s21.csv"


def cp1_triton_s24() -> str:
    """The same check after the Gluon backward became the default (session 24's run)."""
    return cp1_triton_s21("h200/cp/cp1_triton_16k_64k_s24.csv")


def cp1_triton_s24_table() -> str:
    """Each strategy at cp 1 / single_gpu, fwd and bwd, Triton local kernel, one run."""
    frame = _files(("h200/cp/cp1_triton_16k_64k_s24.csv",))
    names = [n for n in sorted(frame.kernel.unique()) if n != "single_gpu"]
    lines = ["| mask | S | dir | single_gpu TFLOPs/s | " + " | ".join(names) + " |",
             "|" + "---|" * (len(names) + 4)]
    for mask in CP_MASKS:
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                base = _tf(frame, "single_gpu", mask, seqlen, d)
                if base is None:
                    continue
                cells = [_tf(frame, n, mask, seqlen, d) for n in names]
                lines.append(f"| {mask} | {_k(seqlen)} | {d} | {base:.0f} | " + " | ".join(
                    "X" if c is None else f"{c / base:.2f}" for c in cells) + " |")
    return "\n".join(lines)


def cp1_triton_s21(relpath: str = CP1_TRITON_S21) -> str:
    """magi / single_gpu at cp 1 with the Triton local kernel (forward: Gluon on long rows)."""
    frame = _files((relpath,))
    pairs = []
    for mask in CP_MASKS:
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                a, b = _tf(frame, "magi", mask, seqlen, d), _tf(frame, "single_gpu", mask, seqlen, d)
                if a is not None and b is not None:
                    pairs.append(((mask, seqlen, d), a / b))
    return _low_cells(pairs, 0.95)


def gluon_ws_table() -> str:
    return gluon_poc_table(("h200/ffa_triton/s21_gluon_poc_d.csv", S21_GLUON_WS), "de")


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


def gluon_s21_table() -> str:
    return triton_s21_table(S21_GLUON_KERNELS)


def gluon_s21_goals() -> str:
    return triton_s21_goals(S21_GLUON_KERNELS)


def triton_s21_goals(relpath: str | tuple[str, ...] = S21_KERNELS) -> str:
    """Issue 14's must-show cells in one s21 bench run (or several)."""
    frame = _files(relpath if isinstance(relpath, tuple) else (relpath,))
    out = []
    for d, goal in (("fwd", 0.85), ("bwd", 0.75)):
        r = [p for (m, _, dd), p in _pairs(frame, "ffa", "fa4", ("full", "causal")) if dd == d]
        out.append(f"{d} / fa4 on full and causal {_span(r)} (goal {goal}: {_verdict(r, goal)})")
    for d in ("fwd", "bwd"):
        r = [p for (_, _, dd), p in _pairs(frame, "ffa", "flex") if dd == d]
        low = sum(x < 1.2 for x in r)
        out.append(f"{d} / flex {_span(r)}, {len(r) - low} of {len(r)} cells at >= 1.2")
    return "; ".join(out)


def triton_v4_table() -> str:
    """The v4 backward variants on full 16k, with FA4's backward of the same run."""
    f = pd.read_csv(RESULTS / TRITON_V4)
    f = f[(f.status == "ok") & (f.direction == "bwd")]
    fa4 = float(f[f.kernel == "fa4"].tflops_per_s.iloc[0])
    ffa = f[f.kernel == "ffa"].set_index("variant").tflops_per_s
    lines = ["| variant (full 16k bwd) | TFLOPs/s | / v3 default | / fa4 |", "|---|---|---|---|"]
    for variant, tf in ffa.items():
        lines.append(f"| {variant} | {tf:.0f} | {tf / ffa[V3_DEFAULT_BWD]:.2f} | {tf / fa4:.2f} |")
    lines.append(f"| fa4 | {fa4:.0f} | | |")
    return "\n".join(lines)


# -- session 27: O from registers, the forward's threshold and default path, the row split's
# forward on a second stream, HybridCP capped, kernel_masks at 64k on an H100 -----------------
O_REGS_S27 = ("h100/probes_s27/rank_mask_probe_o_regs_1.csv",
              "h100/probes_s27/rank_mask_probe_o_regs_2.csv")
FWD_PATHS_S27 = "h100/ffa_triton/s27_gluon_vs_triton_fwd.csv"
FWD_ROUTE_S27 = "h100/ffa_triton/s27_gluon_vs_triton_fwd_route_cache.csv"
SPLIT_S27 = {"fa4": "h100x2/cp_ab_s27/cp_h100x2__fa4_16k_docs_split_fwd.csv",
             "triton": "h100x2/cp_ab_s27/cp_h100x2__triton_16k_docs_split_fwd.csv"}
KERNELS_S27 = "h100/kernels/kernel_masks__64k_s27.csv"
DOC_MASKS = ("causal_document", "full_document", "block_causal_document")
FULL_OR_CAUSAL_S27 = ("full_16k", "causal_16k", "causal_64k")


def o_regs_s27() -> str:
    return _variant_ratios(O_REGS_S27, "fwd_o_regs", "fwd_o_tma", FULL_OR_CAUSAL_S27)


def _fwd_paths(relpath: str) -> pd.DataFrame:
    """ms by (seqlen, mask) x kernel of a gluon_vs_triton_fwd.py run."""
    return pd.read_csv(RESULTS / relpath).pivot_table(index=["seqlen", "mask"], columns="kernel",
                                                      values="runtime_ms")


def fwd_threshold_s27_table() -> str:
    """The Triton forward's time over the persistent Gluon kernel's (launched directly), 1k-8k."""
    t = _fwd_paths(FWD_PATHS_S27)
    seqlens = [s for s in sorted({s for s, _ in t.index}) if s <= 8192]
    lines = ["| mask | " + " | ".join(_k(s) for s in seqlens) + " |", "|---|" + "---|" * len(seqlens)]
    for mask in KERNEL_MASKS:
        cells = [f"{t.loc[(s, mask), 'triton'] / t.loc[(s, mask), 'gluon_o_tma']:.2f}"
                 for s in seqlens]
        lines.append(f"| {mask} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def route_cache_s27() -> str:
    """Host time of the default forward path over launching the Triton forward with its config
    (synced timing, us a call) at 1k, where the Triton forward runs both before and after."""
    before, after = _fwd_paths(FWD_PATHS_S27), _fwd_paths(FWD_ROUTE_S27)
    extra = lambda t, m: 1000 * (t.loc[(1024, m), "gluon"] - t.loc[(1024, m), "triton"])  # noqa: E731
    return "; ".join(f"{m} {extra(before, m):+.0f} -> {extra(after, m):+.0f} us"
                     for m in DOC_MASKS)


def _tf_cells(relpath: str) -> dict:
    frame = _files((relpath,))
    return {(r.kernel, r["mask"], r.direction): r for _, r in frame[frame.status == "ok"].iterrows()}


def split_fwd_s27_table() -> str:
    """magi, magi with the forward cut by rows (blocks on a second stream) and HybridCP."""
    lines = ["| local | mask | dir | magi | magi_split_fwd | hybrid_cp | split / magi | "
             "magi / hybrid_cp | hidden_comm_ms (split) |", "|" + "---|" * 9]
    for backend, relpath in SPLIT_S27.items():
        rows = _tf_cells(relpath)
        for mask in DOC_MASKS:
            for d in ("fwd", "bwd"):
                magi, split, hyb = (rows[k, mask, d].tflops_per_s
                                    for k in ("magi", "magi_split_fwd", "hybrid_cp"))
                hidden = re.search(r"hidden_comm_ms=([\d.]+)", rows["magi_split_fwd", mask, d].message)
                lines.append(f"| {backend} | {mask} | {d} | {magi:.0f} | {split:.0f} | {hyb:.0f} | "
                             f"{split / magi:.2f} | {magi / hyb:.2f} | "
                             f"{hidden.group(1) if hidden else '-'} |")
    return "\n".join(lines)


def split_fwd_s27_summary() -> str:
    """The range of hidden communication and of the split forward over the whole one."""
    hidden, ratio = [], []
    for relpath in SPLIT_S27.values():
        rows = _tf_cells(relpath)
        for mask in DOC_MASKS:
            split = rows["magi_split_fwd", mask, "fwd"]
            hidden.append(float(re.search(r"hidden_comm_ms=([\d.]+)", split.message).group(1)))
            ratio.append(split.tflops_per_s / rows["magi", mask, "fwd"].tflops_per_s)
    return (f"hidden {min(hidden):.2f}-{max(hidden):.2f} ms, split forward "
            f"{min(ratio):.2f}-{max(ratio):.2f}x the whole one")


def hybrid_capped_s27() -> str:
    """magi over HybridCP capped at S / cp tokens a rank, and the capped over the uncapped."""
    rows = _tf_cells(SPLIT_S27["triton"])
    out = []
    for mask in DOC_MASKS:
        for d in ("fwd", "bwd"):
            capped = rows["hybrid_cp_capped", mask, d].tflops_per_s
            out.append(f"{mask} {d} {rows['magi', mask, d].tflops_per_s / capped:.2f} "
                       f"({capped / rows['hybrid_cp', mask, d].tflops_per_s:.2f})")
    return "; ".join(out)


def kernels_s27_table() -> str:
    return triton_s21_table(KERNELS_S27, (K64,))


def kernels_s27_goals() -> str:
    return triton_s21_goals(KERNELS_S27)


HEADS_INNER_S27 = ("h100/probes_s27/rank_mask_probe_heads_inner.csv",)
NCU_S27 = (("causal documents of 1k", "ncu_causal_document_1024_dq2.txt"),
           ("the same, dQ never added", "ncu_causal_document_1024_dq3.txt"),
           ("full documents of 1k", "ncu_full_document_1024_dq2.txt"),
           ("the same, dQ never added", "ncu_full_document_1024_dq3.txt"),
           ("causal documents of 1k, heads inside", "ncu_causal_document_1024_heads_inner.txt"))


def heads_inner_s27() -> str:
    return _variant_ratios(HEADS_INNER_S27, "bwd_heads_inner", "bwd_heavy_first",
                           ("full_16k", "causal_16k", "full_docs_16384", "causal_docs_16384"))


def _ncu_metric(text: str, name: str) -> float:
    return float(re.search(rf"^\s*{re.escape(name)}\s+\S+\s+([\d,.]+)\s*$", text,
                           re.MULTILINE).group(1).replace(",", ""))


def ncu_bwd_s27_table() -> str:
    """ncu of one Gluon backward launch (16k, GQA 64:8, d128) on equal documents of 1k."""
    lines = ["| mask | ms | DRAM throughput % | L2 hit rate % |", "|---|---|---|---|"]
    for label, name in NCU_S27:
        text = (RESULTS / "h100/probes_s27" / name).read_text()
        lines.append(f"| {label} | {_ncu_metric(text, 'Duration'):.2f} | "
                     f"{_ncu_metric(text, 'DRAM Throughput'):.1f} | "
                     f"{_ncu_metric(text, 'L2 Hit Rate'):.1f} |")
    return "\n".join(lines)


BWD_ORDERS_S27 = ("h100/probes_s27/rank_mask_probe_bwd_orders_1.csv",
                  "h100/probes_s27/rank_mask_probe_bwd_orders_2.csv")


def bwd_orders_s27() -> str:
    """The backward's key tile orders over the plan's heaviest first, per run: mean, range and
    causal_document at 64k."""
    parts = []
    for run, relpath in enumerate(BWD_ORDERS_S27, 1):
        t = pd.read_csv(RESULTS / relpath).pivot_table(index=["mask", "strategy", "rank"],
                                                       columns="order", values="ms")
        for order in ("bwd_natural", "bwd_docs_heavy_first"):
            r = t[order] / t.bwd_heavy_first
            parts.append(f"run {run} {order.removeprefix('bwd_')}: mean {r.mean():.2f} "
                         f"({r.min():.2f}-{r.max():.2f}, {len(r)} masks; causal_document 64k "
                         f"{r.loc[('causal_document_64k', 'single', 0)]:.2f})")
    return "; ".join(parts)


def pytest_s27() -> str:
    logs = {"the Gluon forward kernel, three launches": "h100/probes_s27/"
            "pytest_gluon_kernel_o_regs_a76296b.log",
            "2-GPU exactness, split_fwd": "h100x2/tests/pytest_nccl_split_fwd_2e7db10.log",
            "every GPU test of tests/magi_attention": "h100x2/tests/"
            "pytest_gpu_magi_attention_2e7db10.log"}
    return "; ".join(f"{name}: {_pytest_counts(path)}" for name, path in logs.items())


# -- session 28: 2 H100s (nvidia-h200-x2 asked for, H100s came) ---------------------------------
# issue 15's whole table at 8da5025 (16k: cp 1 and 2, repeat 10; 64k: cp 2 repeat 6, then magi
# and single_gpu at cp 1), then the unequal_runs A/B at 9ba2da0 (magi, magi_unequal, hybrid_cp)
CP_S28 = {"fa4, 16k/GPU": "h100x2/cp/cp_h100x2__fa4_16k_s28.csv",
          "triton, 16k/GPU": "h100x2/cp/cp_h100x2__triton_16k_s28.csv",
          "fa4, 64k/GPU": ("h100x2/cp/cp_h100x2__fa4_64k_s28.csv",
                           "h100x2/cp/cp_h100x2__fa4_64k_cp1_s28.csv"),
          "triton, 64k/GPU": ("h100x2/cp/cp_h100x2__triton_64k_s28.csv",
                              "h100x2/cp/cp_h100x2__triton_64k_cp1_s28.csv")}
UNEQUAL_S28 = {(b, s): f"h100x2/cp_unequal_s28/cp_h100x2__{b}_{s}_unequal.csv"
               for s in ("16k", "64k") for b in ("fa4", "triton")}


def cp_s28_table() -> str:
    return cp2_s16_table(CP_S28)


def cp_s28_summary() -> str:
    return cp2_s16_summary(CP_S28)


def cp_s28_below() -> str:
    return _cp2_below(CP_S28)


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


def unequal_gain_s28() -> str:
    """unequal_runs over magi on the 16k causal and block-causal document cells."""
    ratios = [_tf_cells(relpath)["magi_unequal", m, d].tflops_per_s
              / _tf_cells(relpath)["magi", m, d].tflops_per_s
              for (_, size), relpath in UNEQUAL_S28.items() if size == "16k"
              for m in ("causal_document", "block_causal_document") for d in ("fwd", "bwd")]
    return f"{min(ratios):.2f}-{max(ratios):.2f}x"


def unequal_gap_s28() -> str:
    """FA4 causal_document forward at 16k: magi_unequal against HybridCP, ms a step."""
    rows = _tf_cells(UNEQUAL_S28["fa4", "16k"])
    uneq, hyb = (rows[k, "causal_document", "fwd"].runtime_ms for k in ("magi_unequal", "hybrid_cp"))
    return f"FA4: {uneq:.2f} against {hyb:.2f} ms, {uneq - hyb:.2f} ms"


def pytest_s28() -> str:
    return (f"every 2-GPU exactness mode at 8da5025: "
            f"{_pytest_counts('h100x2/tests/pytest_nccl_8da5025.log')}; mode unequal at "
            f"9ba2da0: {_pytest_counts('h100x2/tests/pytest_nccl_unequal_9ba2da0.log')}")


# -- session 29: 2 H200s (nvidia-h200-x2; the first 2-H200 node since session 20) -------------
# issue 15's whole table at ddb9bdd (16k: cp 1 and 2 with magi_unequal on 32-token chunks beside
# magi, repeat 10; 64k: magi and single_gpu at cp 1, then every strategy at cp 2, repeat 10),
# magi with the cut by keys off (cut=none) beside HybridCP, and the fused path's pieces under
# unequal_runs on 128-token chunks
CP_S29 = {f"{b}, {s}/GPU": f"h200x2/cp_history/cp_h200x2__{b}_{s}__ddb9bdd780a2.csv"
          for s in ("16k", "64k") for b in ("fa4", "triton")}
UNEQUAL_S29 = {(b, "16k"): CP_S29[f"{b}, 16k/GPU"] for b in ("fa4", "triton")}
CUT_NONE_S29 = {b: f"h200x2/cp_cut_s29/cp_h200x2__{b}_16k_magi_cut_none.csv"
                for b in ("fa4", "triton")}
PROFILE_S29 = "h200x2/magi_profile_s29/magi_profile_cp2_fa4_unequal_runs_c128_rank{}.csv"


def cp_s29_table() -> str:
    return cp2_s16_table(CP_S29)


def cp_s29_summary() -> str:
    return cp2_s16_summary(CP_S29)


def cp_s29_below() -> str:
    return _cp2_below(CP_S29)


def unequal_s29_table() -> str:
    return unequal_s28_table(UNEQUAL_S29)


def unequal_s29_summary() -> str:
    return unequal_s28_summary(UNEQUAL_S29)


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


def cp_s29_with_unequal() -> str:
    return _with_unequal(CP_S29, "16k")


def cut_none_s29_table() -> str:
    """magi with the timed cut (issue 15's run) and with cut=none (the run after it, same node),
    each over the HybridCP of its own run, on the 16k document masks."""
    lines = ["| local | mask | dir | cut chosen | magi / hybrid_cp (timed cut) | "
             "magi / hybrid_cp (cut=none) |", "|" + "---|" * 6]
    for backend, relpath in CUT_NONE_S29.items():
        timed, none = _tf_cells(CP_S29[f"{backend}, 16k/GPU"]), _tf_cells(relpath)
        for mask in DOC_MASKS:
            for d in ("fwd", "bwd"):
                cut = re.search(r"cut=([^;]*)", timed["magi", mask, d].message)[1]
                ratios = [rows["magi", mask, d].tflops_per_s / rows["hybrid_cp", mask, d].tflops_per_s
                          for rows in (timed, none)]
                lines.append(f"| {backend} | {mask} | {d} | {cut} | {ratios[0]:.2f} | "
                             f"{ratios[1]:.2f} |")
    return "\n".join(lines)


def profile_s29_table() -> str:
    """The fused path's pieces per rank (FA4, unequal_runs on 128-token chunks, cut=none), ms."""
    pieces = ("calc_attn_fwd", "fused_kv", "own_copies", "host_kernel_fwd", "kernel_fwd")
    lines = ["| mask | rank | tokens received | " + " | ".join(pieces) + " |",
             "|" + "---|" * (3 + len(pieces))]
    frames = [pd.read_csv(RESULTS / PROFILE_S29.format(r)) for r in (0, 1)]
    for mask in DOC_MASKS:
        for rank, frame in enumerate(frames):
            rows = frame[frame["mask"] == mask].set_index("piece")
            recv = re.search(r"recv_tokens=(\d+)", rows.notes.iloc[0])[1]
            lines.append(f"| {mask} | {rank} | {recv} | "
                         + " | ".join(f"{rows.ms[p]:.3f}" for p in pieces) + " |")
    return "\n".join(lines)


def triton_keys_s29() -> str:
    """Triton at 64k a GPU, cp 2, forward TFLOPs/s/GPU: the strategies whose kernel calls read
    all 128k keys at once against the rings that call it per block of keys (cp 2: 64k, or
    zigzag halves on causal), and the kernel at cp 1."""
    cells = _cp_cells(CP_S29["triton, 64k/GPU"])
    out = []
    for mask in ("full", "causal"):
        v, one = cells[mask, 2, "fwd"], cells[mask, 1, "fwd"]
        whole = ", ".join(f"{k} {v[k]:.0f}" for k in ("magi", "ring_allgather", "ulysses"))
        blocks = ", ".join(f"{k} {v[k]:.0f}" for k in ("ring_p2p", "usp", "loongtrain"))
        out.append(f"{mask}: {whole} against {blocks} (single_gpu at cp 1: "
                   f"{one['single_gpu']:.0f})")
    return "; ".join(out)


def _pytest_dots(relpath: str) -> str:
    """A pytest -q log cut before its summary line: the tests that passed (dots), and any
    that failed (F) or errored (E)."""
    marks = (RESULTS / relpath).read_text().strip().splitlines()[0]
    return (f"{marks.count('.')} passed, {marks.count('F')} failed, {marks.count('E')} errors "
            "before the call's timeout stopped the run (no summary line)")


def pytest_s29() -> str:
    return (f"modes cut_fwd, cut_bwd, cut_auto and unequal, both local kernels: "
            f"{_pytest_dots('h200x2/tests/pytest_nccl_cut_unequal_ddb9bdd.log')}; every other "
            f"mode: {_pytest_counts('h200x2/tests/pytest_nccl_rest_ddb9bdd.log')}")


# -- session 30: one H200 (probes, the dense-split A/B), then 2 H200s ---------------------------
# the key-length and FA4 dense/varlen probes and the FFA fa4 backend with and without the
# (since removed) dense split, all on one H200; on 2 H200s the unequal_runs A/B with FA4's dense
# rate (16k), Triton at 64k with the cut timed and forced, and the backward timing probe
PROBES_S30 = "h200/probes_s30"
CP_S30 = "h200x2/cp_s30"
BWD_TIMING_S30 = "h200x2/bwd_timing_s30/bwd_timing_probe_{}_rank0.csv"


def key_length_s30() -> str:
    """One kernel call of S rows over 2S keys against two S x S calls and the lse merge."""
    frame = pd.read_csv(RESULTS / PROBES_S30 / "key_length_probe.csv")
    lines = ["| backend | mask | S | one call (TFLOPs/s) | two calls + merge | one / two |",
             "|" + "---|" * 6]
    for (backend, mask, s), g in frame.groupby(["backend", "mask", "seqlen"], sort=False):
        t = dict(zip(g.calls, g.tflops_per_s))
        lines.append(f"| {backend} | {mask} | {s // 1024}k | {t['one_call']:.0f} | "
                     f"{t['two_calls']:.0f} | {t['one_call'] / t['two_calls']:.3f} |")
    return "\n".join(lines)


def dense_vs_varlen_s30() -> str:
    """FA4 on one document of S tokens: its dense kernel, one varlen entry, and the document
    between two short ones (three entries), ms; dense over varlen_1."""
    frame = pd.read_csv(RESULTS / PROBES_S30 / "fa4_dense_vs_varlen.csv")
    lines = ["| mask | S | dir | dense | varlen_1 | neighbours | dense / varlen_1 |",
             "|" + "---|" * 7]
    for (mask, s, d), g in frame.groupby(["mask", "seqlen", "direction"], sort=False):
        t = dict(zip(g.path, g.runtime_ms))
        lines.append(f"| {mask} | {s // 1024}k | {d} | {t['dense']:.3f} | {t['varlen_1']:.3f} | "
                     f"{t['neighbours']:.3f} | {t['dense'] / t['varlen_1']:.3f} |")
    return "\n".join(lines)


def dense_split_table_s30() -> str:
    """FFA's fa4 backend with the (since removed) dense split off and on, FA4 in the off run."""
    off, on = (_files((f"{PROBES_S30}/kernel_masks__fa4_dense_split_{x}_s30.csv",))
               for x in ("off", "on"))
    lines = ["| mask | S | dir | ffa_fa4 off | ffa_fa4 on | on / off | fa4 (off run) |",
             "|" + "---|" * 7]
    cells = off[(off.kernel == "ffa_fa4") & (off.status == "ok")]
    for mask, s, d in zip(cells["mask"], cells.seqlen, cells.direction):
        base, split = _tf(off, "ffa_fa4", mask, s, d), _tf(on, "ffa_fa4", mask, s, d)
        lines.append(f"| {mask} | {s // 1024}k | {d} | {base:.0f} | {split:.0f} | "
                     f"{split / base:.3f} | {_tf(off, 'fa4', mask, s, d):.0f} |")
    return "\n".join(lines)


def unequal_dense_s30_table() -> str:
    """magi, magi_unequal (FA4's dense rate in its tile model) and HybridCP, 16k a GPU, cp 2."""
    rows = _tf_cells(f"{CP_S30}/fa4_16k_dense.csv")
    lines = ["| mask | dir | magi | magi_unequal | hybrid_cp | unequal / hybrid_cp | "
             "magi / hybrid_cp | tokens a rank (unequal) |", "|" + "---|" * 8]
    for mask in ("full_document", "causal", "causal_document"):
        for d in ("fwd", "bwd"):
            m, u, h = (rows[k, mask, d] for k in ("magi", "magi_unequal", "hybrid_cp"))
            tokens = re.search(r"tokens_per_rank=([\d-]+)", u.message)[1]
            lines.append(f"| {mask} | {d} | {m.tflops_per_s:.0f} | {u.tflops_per_s:.0f} | "
                         f"{h.tflops_per_s:.0f} | {u.tflops_per_s / h.tflops_per_s:.2f} | "
                         f"{m.tflops_per_s / h.tflops_per_s:.2f} | {tokens} |")
    return "\n".join(lines)


def triton64k_s30_table() -> str:
    """Triton, 64k a GPU, cp 2: magi (cut timed in rounds) against the best of the six
    baselines in the same run, the cut it chose with its timing, and magi with cut=both (the
    earlier run of the same session, against its own best of ring_p2p, loongtrain and usp)."""
    cells = _cp_cells(f"{CP_S30}/triton_64k_all.csv")
    rows = _tf_cells(f"{CP_S30}/triton_64k_all.csv")
    both, early = (_cp_cells(f"{CP_S30}/triton_64k_cut_{x}.csv") for x in ("both", "auto"))
    lines = ["| mask | dir | magi | best baseline | magi / best | cut chosen (timed ms whole/cut) "
             "| cut=both, its run: magi / best |", "|" + "---|" * 7]
    for mask in ("full", "causal"):
        for d in ("fwd", "bwd"):
            v = cells[mask, 2, d]
            name, best = max(_baselines(v).items(), key=lambda kv: kv[1])
            msg = rows["magi", mask, d].message
            cut = re.search(r"cut=([^;]*)", msg)[1]
            timed = re.search(r"cut_ms=([^;]*)", msg)[1]
            other = max(_baselines(early[mask, 2, d]).values())
            lines.append(f"| {mask} | {d} | {v['magi']:.0f} | {best:.0f} ({name}) | "
                         f"{v['magi'] / best:.3f} | {cut} ({timed}) | "
                         f"{both[mask, 2, d]['magi'] / other:.3f} |")
    return "\n".join(lines)


def bwd_timing_s30() -> str:
    """One key's backward (MagiAttention, Triton, causal, 64k a GPU, rank 0), ms: the bench's
    way and the timed cut's clock, on the benchmark's dout restricted to the gate's rows and on
    the whole one, whole and cut by keys."""
    lines = ["| dout | cut | bench_events | runtime_events | tuner_clock | tuner_inputs "
             "(whole dout, same process) |", "|" + "---|" * 6]
    for kind in ("random", "restricted"):
        frame = pd.read_csv(RESULTS / BWD_TIMING_S30.format(kind))
        for cut, g in frame.groupby("cut", sort=False):
            t = dict(zip(g.way, g.ms))
            label = "whole" if kind == "random" else "zero off the gate's 256 rows"
            lines.append(f"| {label} | {cut} | {t['bench_events']:.1f} | "
                         f"{t['runtime_events']:.1f} | {t['tuner_clock']:.1f} | "
                         f"{t['tuner_inputs']:.1f} |")
    return "\n".join(lines)


def pytest_s30() -> str:
    return (f"mode unequal, both local kernels: "
            f"{_pytest_counts('h200x2/tests/pytest_nccl_unequal_6329018.log')}; mode cut_auto, "
            f"Triton (timed in rounds): "
            f"{_pytest_counts('h200x2/tests/pytest_nccl_cut_auto_triton_96c64d5.log')}; the FA4 "
            f"dense split's GPU test (before its removal): "
            f"{_pytest_counts('h200/tests/pytest_fa4_dense_split_s30_9b5e578.log')}")


# -- session 31: 2 H200s, issue 15's whole table with every backward on the whole dout ---------
# (16k: cp 1 and 2, every strategy and magi_unequal, repeat 6; 64k: magi and single_gpu at cp 1,
# every strategy at cp 2; Triton 64k's block_causal_document and one HybridCP causal_document
# backward in two short calls after the first hit its limit, same machine), then one H200:
# issue 14's kernel masks at 16k / 64k, ffa / fa4 / flex, cut by the call's limit
CP_S31 = {f"{b}, {s}/GPU": f"h200x2/cp/cp_h200x2__{b}_{s}.csv"
          for s in ("16k", "64k") for b in ("fa4", "triton")}
UNEQUAL_S31 = {(b, s): CP_S31[f"{b}, {s}/GPU"] for s in ("16k", "64k") for b in ("fa4", "triton")}
KERNELS_S31 = "h200/kernels/kernel_masks__whole_dout_16k_64k_s31.csv"


def cp_s31_table() -> str:
    return cp2_s16_table(CP_S31)


def cp_s31_summary() -> str:
    return cp2_s16_summary(CP_S31)


def cp_s31_below() -> str:
    return _cp2_below(CP_S31)


def cp_s31_with_unequal() -> str:
    return f"16k: {_with_unequal(CP_S31, '16k')}; 64k: {_with_unequal(CP_S31, '64k')}"


def unequal_s31_table() -> str:
    return unequal_s28_table(UNEQUAL_S31)


def unequal_s31_summary() -> str:
    return unequal_s28_summary(UNEQUAL_S31)


def bwd_dout_shift_s31() -> str:
    """magi / the best baseline of each cp 2 backward cell: session 29 (the gate's mostly-zero
    dout) against session 31 (the whole dout)."""
    lines = ["| run | mask | s29 (gate's dout) | s31 (whole dout) |", "|---|---|---|---|"]
    for run in CP_S31:
        before, after = _cp_cells(CP_S29[run]), _cp_cells(CP_S31[run])
        for mask in CP_MASKS:
            pair = [_magi_over_best(c[(mask, 2, "bwd")]) for c in (before, after)]
            lines.append(f"| {run} | {mask} | {pair[0]:.3f} | {pair[1]:.3f} |")
    return "\n".join(lines)


def kernels_s31_table() -> str:
    return triton_s21_table(KERNELS_S31)


def kernels_s31_goals() -> str:
    return triton_s21_goals(KERNELS_S31)


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


def key_parts_s31_table() -> str:
    """Triton 64k/GPU cp 2 forward, full and causal, per strategy: session 30's run (one call
    over a rank's 128k keys) against this one (the key parts: two 64k-key calls and a merge)."""
    before = _cp_cells(f"{CP_S30}/triton_64k_all.csv")
    after = _cp_cells(CP_S31["triton, 64k/GPU"])
    lines = ["| strategy | mask | s30 fwd | s31 fwd | s31 / s30 |", "|---|---|---|---|---|"]
    for mask in ("full", "causal"):
        for k in ("magi", "ulysses", "ring_allgather", "ring_p2p", "usp", "loongtrain",
                  "hybrid_cp"):
            a, b = (c[(mask, 2, "fwd")][k] for c in (before, after))
            lines.append(f"| {k} | {mask} | {a:.0f} | {b:.0f} | {b / a:.3f} |")
    return "\n".join(lines)


def key_parts_cut_ms_s31() -> str:
    """magi's own timing of its forward whole and cut by keys (ms, one process, key time),
    Triton 64k/GPU cp 2: session 30 (whole = one call over 128k keys) and session 31 (whole =
    the key parts)."""
    out = []
    for label, relpath in (("s30", f"{CP_S30}/triton_64k_all.csv"),
                           ("s31", CP_S31["triton, 64k/GPU"])):
        frame = _files((relpath,))
        for mask in ("full", "causal"):
            row = frame[(frame.kernel == "magi") & (frame.cp_size == 2) & (frame["mask"] == mask)
                        & (frame.direction == "fwd")].iloc[0]
            whole, cut = re.search(r"cut_ms=fwd:([\d.]+)/([\d.]+)", row.message).groups()
            out.append(f"{label} {mask}: whole {float(whole):.1f} / cut {float(cut):.1f} ms")
    return "; ".join(out)


def pytest_s31() -> str:
    return (f"the Triton forward's key parts (`-k long_key`): "
            f"{_pytest_counts('h200x2/tests/pytest_long_key_s31.log')}; every installed "
            f"adapter's set_dout (`-k set_dout`, FA4 staged, no other peer): "
            f"{_pytest_counts('h200x2/tests/pytest_set_dout_s31.log')}")


# -- session 32: 4 H200s (nvidia-h200-x4, the first 4-GPU node lent for issue 15) -------------
# issue 15's cp 4 check at 0348a47: 16k a GPU (cp 1 and 4, every strategy and magi_unequal,
# repeat 6) with FA4 and Triton; FA4 at 64k a GPU, cp 4 (repeat 3; the call's limit cut full
# before four of its baselines). Then the interleaved A/B of Triton's dispatch on causal.
CP_S32 = {"fa4, 16k/GPU": "h200x4/cp/cp_h200x4__fa4_16k.csv",
          "triton, 16k/GPU": "h200x4/cp/cp_h200x4__triton_16k.csv",
          "fa4, 64k/GPU": "h200x4/cp/cp_h200x4__fa4_64k.csv"}
UNEQUAL_S32 = {tuple(run.replace("/GPU", "").split(", ")): relpath
               for run, relpath in CP_S32.items()}
AB_S32 = {name: f"h200x4/cp_ab_s32/cp_ab__triton_16k_{name}.csv"
          for name in ("cp4_causal", "cp2_causal", "cp4_full")}
BASELINE_COUNT = 6


def cp_s32_table() -> str:
    return cp2_s16_table(CP_S32, cp=4)


def cp_s32_summary() -> str:
    return cp2_s16_summary(CP_S32, cp_n=4)


def cp_s32_below() -> str:
    return _cp2_below(CP_S32, cp_n=4)


def cp_s32_with_unequal() -> str:
    return (f"16k: {_with_unequal(CP_S32, '16k', cp_n=4)}; "
            f"64k: {_with_unequal(CP_S32, '64k', cp_n=4)}")


def cp_s32_partial() -> str:
    """The cp 4 cells measured with fewer than the six baselines."""
    out = [f"{run.replace('/GPU', '')} {mask} {d}: {len(_baselines(v))} of {BASELINE_COUNT} "
           f"({', '.join(sorted(_baselines(v)))})"
           for run, relpath in CP_S32.items()
           for (mask, cp, d), v in sorted(_cp_cells(relpath).items())
           if cp == 4 and len(_baselines(v)) < BASELINE_COUNT]
    return "; ".join(out) or "none"


def cp_s32_docs() -> str:
    """magi / the best baseline on the three document masks at cp 4, per run."""
    out = []
    for run, relpath in CP_S32.items():
        ratios = [_magi_over_best(v) for (mask, cp, d), v in _cp_cells(relpath).items()
                  if cp == 4 and mask in DOC_MASKS]
        out.append(f"{run.replace('/GPU', '')} {min(ratios):.2f}-{max(ratios):.2f}")
    return "; ".join(out)


def cp1_spread_s32() -> str:
    return cp1_spread_s31(CP_S32)


def unequal_s32_table() -> str:
    return unequal_s28_table(UNEQUAL_S32)


def ab_s32_table() -> str:
    """Triton's dispatch on one causal sequence (and full), interleaved: each strategy's median
    over the rounds of the slowest rank's ms, and magi's (auto, min_heap then) over it."""
    lines = ["| run | dir | strategy | median ms | magi (min_heap) ms / this |",
             "|---|---|---|---|---|"]
    for name, relpath in AB_S32.items():
        rows = pd.read_csv(RESULTS / relpath)
        med = rows.groupby(["direction", "strategy"], sort=False).ms.median()
        for d in ("fwd", "bwd"):
            for strategy, ms in med[d].items():
                lines.append(f"| {name} | {d} | {strategy} | {ms:.2f} | "
                             f"{med[d]['magi'] / ms:.3f} |")
    return "\n".join(lines)

KERNELS_S32 = "h200/kernels/kernel_masks__whole_dout_swc_bcd_s32.csv"
# issue 14's six kernel masks on the whole dout: session 31's four, this session's other two
KERNELS_WHOLE_DOUT = (KERNELS_S31, KERNELS_S32)
RANK_PROBE_S32 = "h200/rank_probe_s32/rank_mask_probe.csv"


def kernels_s32_table() -> str:
    return triton_s21_table(KERNELS_WHOLE_DOUT)


def kernels_s32_goals() -> str:
    return triton_s21_goals(KERNELS_WHOLE_DOUT)


def _rank_probe_fit() -> pd.DataFrame:
    """The rank probe's rows with each (backend, direction)'s least-squares fit of the kernel's
    ms to its 128 x 128 pairs and q tiles (column ``fit``)."""
    rows = pd.read_csv(RESULTS / RANK_PROBE_S32)
    rows["fit"] = 0.0
    for _, g in rows.groupby(["backend", "direction"]):
        x = g[["pairs", "tiles"]].to_numpy(float)
        coef = np.linalg.lstsq(x, g.ms.to_numpy(), rcond=None)[0]
        rows.loc[g.index, "fit"] = x @ coef
    return rows


def rank_probe_s32_fits() -> str:
    """Each fit's spread (measured / fitted, over every rank of every placement and mask)."""
    rows = _rank_probe_fit()
    out = []
    for (b, d), g in rows.groupby(["backend", "direction"]):
        r = g.ms / g.fit
        out.append(f"{b} {d} {r.min():.2f}-{r.max():.2f}")
    return "; ".join(out)


def rank_probe_s32_table() -> str:
    """The slower rank's kernel ms of each placement (cp 2, 16k a GPU), measured and fitted."""
    rows = _rank_probe_fit()
    slow = rows.groupby(["mask", "backend", "direction", "strategy"])[["ms", "fit"]].max()
    lines = ["| mask | kernel | dir | magi | magi_unequal | hybrid_cp | fastest measured | "
             "fastest fitted |", "|" + "---|" * 8]
    for (mask, b, d), g in slow.groupby(level=[0, 1, 2]):
        g = g.droplevel([0, 1, 2])
        cells = [f"{g.ms[k]:.2f} ({g.fit[k]:.2f})" for k in ("magi", "magi_unequal", "hybrid_cp")]
        lines.append(f"| {mask} | {b} | {d} | " + " | ".join(cells)
                     + f" | {g.ms.idxmin()} | {g.fit.idxmin()} |")
    return "\n".join(lines)

SECTIONS: dict[str, Callable[[], str]] = {
    "h200x2.cp_s31_table": cp_s31_table,
    "h200x2.cp_s31_summary": cp_s31_summary,
    "h200x2.cp_s31_below": cp_s31_below,
    "h200x2.cp_s31_with_unequal": cp_s31_with_unequal,
    "h200x2.unequal_s31_table": unequal_s31_table,
    "h200x2.unequal_s31_summary": unequal_s31_summary,
    "h200x2.bwd_dout_shift_s31": bwd_dout_shift_s31,
    "h200.kernels_s31_table": kernels_s31_table,
    "h200x2.key_parts_s31_table": key_parts_s31_table,
    "h200x2.cp1_spread_s31": cp1_spread_s31,
    "h200x2.key_parts_cut_ms_s31": key_parts_cut_ms_s31,
    "h200.kernels_s31_goals": kernels_s31_goals,
    "h200x2.pytest_s31": pytest_s31,
    "h200x4.cp_s32_table": cp_s32_table,
    "h200x4.cp_s32_summary": cp_s32_summary,
    "h200x4.cp_s32_below": cp_s32_below,
    "h200x4.cp_s32_with_unequal": cp_s32_with_unequal,
    "h200x4.cp_s32_partial": cp_s32_partial,
    "h200x4.cp_s32_docs": cp_s32_docs,
    "h200x4.cp1_spread_s32": cp1_spread_s32,
    "h200x4.unequal_s32_table": unequal_s32_table,
    "h200x4.ab_s32_table": ab_s32_table,
    "h200.kernels_s32_table": kernels_s32_table,
    "h200.kernels_s32_goals": kernels_s32_goals,
    "h200.rank_probe_s32_fits": rank_probe_s32_fits,
    "h200.rank_probe_s32_table": rank_probe_s32_table,
    "h200.key_length_s30": key_length_s30,
    "h200.dense_vs_varlen_s30": dense_vs_varlen_s30,
    "h200.dense_split_table_s30": dense_split_table_s30,
    "h200x2.unequal_dense_s30_table": unequal_dense_s30_table,
    "h200x2.triton64k_s30_table": triton64k_s30_table,
    "h200x2.bwd_timing_s30": bwd_timing_s30,
    "h200x2.pytest_s30": pytest_s30,
    "h200x2.cp_s29_table": cp_s29_table,
    "h200x2.cp_s29_summary": cp_s29_summary,
    "h200x2.cp_s29_below": cp_s29_below,
    "h200x2.cp_s29_with_unequal": cp_s29_with_unequal,
    "h200x2.unequal_s29_table": unequal_s29_table,
    "h200x2.unequal_s29_summary": unequal_s29_summary,
    "h200x2.cut_none_s29_table": cut_none_s29_table,
    "h200x2.profile_s29_table": profile_s29_table,
    "h200x2.triton_keys_s29": triton_keys_s29,
    "h200x2.pytest_s29": pytest_s29,
    "h100x2.cp_s28_table": cp_s28_table,
    "h100x2.cp_s28_summary": cp_s28_summary,
    "h100x2.cp_s28_below": cp_s28_below,
    "h100x2.unequal_s28_table": unequal_s28_table,
    "h100x2.unequal_s28_summary": unequal_s28_summary,
    "h100x2.pytest_s28": pytest_s28,
    "h100x2.unequal_gap_s28": unequal_gap_s28,
    "h100x2.unequal_gain_s28": unequal_gain_s28,
    "h100.o_regs_s27": o_regs_s27,
    "h100.fwd_threshold_s27_table": fwd_threshold_s27_table,
    "h100.route_cache_s27": route_cache_s27,
    "h100x2.split_fwd_s27_table": split_fwd_s27_table,
    "h100x2.split_fwd_s27_summary": split_fwd_s27_summary,
    "h100x2.hybrid_capped_s27": hybrid_capped_s27,
    "h100.kernels_s27_table": kernels_s27_table,
    "h100.kernels_s27_goals": kernels_s27_goals,
    "h100x2.pytest_s27": pytest_s27,
    "h100.heads_inner_s27": heads_inner_s27,
    "h100.bwd_orders_s27": bwd_orders_s27,
    "h100.ncu_bwd_s27_table": ncu_bwd_s27_table,
    "h100.pytest_gpu_all": h100_pytest_gpu_all,
    "h100.pytest_failed": h100_pytest_failed,
    "h100.pytest_flashinfer": h100_pytest_flashinfer,
    "h100.by_size_table": h100_by_size_table,
    "h100.ffa_fa4_vs_fa4": h100_ffa_fa4_vs_fa4,
    "h100.ffa_fa4_vs_flex": h100_ffa_fa4_vs_flex,
    "h100.ffa_vs_flex": h100_ffa_vs_flex,
    "h100.ffa_vs_fa4": h100_ffa_vs_fa4,
    "h200.dense_windows_table": dense_windows_table,
    "h200.triton_v4_table": triton_v4_table,
    "h200.triton_s21_variants": triton_s21_variants,
    "h200.gluon_poc_table": gluon_poc_table,
    "h200.gluon_poc_checks": gluon_poc_checks,
    "h200.triton_s21_table": triton_s21_table,
    "h200.triton_s21_goals": triton_s21_goals,
    "h200.gluon_ws_table": gluon_ws_table,
    "h200.cp1_triton_s21": cp1_triton_s21,
    "h200.gluon_bwd_s22_table": gluon_bwd_s22_table,
    "h200.gluon_bwd_s22_goals": gluon_bwd_s22_goals,
    "h200.gluon_bwd_probes_table": gluon_bwd_probes_table,
    "h200.pytest_triton_s22": pytest_triton_s22,
    "h200.gluon_bwd_s23_table": gluon_bwd_s23_table,
    "h200.gluon_bwd_s23_goals": gluon_bwd_s23_goals,
    "h200.gluon_bwd_s23_probes_table": gluon_bwd_s23_probes_table,
    "h200.gluon_vs_triton_bwd_table": gluon_vs_triton_bwd_table,
    "h200.pytest_triton_s23": pytest_triton_s23,
    "h200.pytest_magi_s23": pytest_magi_s23,
    "h200.pytest_gluon_bwd_s23": pytest_gluon_bwd_s23,
    "h200.gluon_bwd_s24_order_table": gluon_bwd_s24_order_table,
    "h200.gluon_bwd_s24_row_table": gluon_bwd_s24_row_table,
    "h200.pytest_gluon_bwd_s24": pytest_gluon_bwd_s24,
    "h200.pytest_gluon_bwd_s24_final": pytest_gluon_bwd_s24_final,
    "h200.pytest_magi_s24": pytest_magi_s24,
    "h200.kernels_s24_table": kernels_s24_table,
    "h200.kernels_s24_goals": kernels_s24_goals,
    "h200.kernels_s24_before_goals": kernels_s24_before_goals,
    "h200.kernels_s24_before_cell": kernels_s24_before_cell,
    "h200.cp1_triton_s24": cp1_triton_s24,
    "h200.cp1_triton_s24_table": cp1_triton_s24_table,
    "h200.gluon_vs_triton_table": gluon_vs_triton_table,
    "h200.gluon_s21_table": gluon_s21_table,
    "h200.gluon_s21_goals": gluon_s21_goals,
    "h200.pytest_gpu_s21": pytest_gpu_s21,
    "h200.pytest_triton_s21": pytest_triton_s21,
    "h200.pytest_gpu_all": pytest_gpu_all,
    "h200.pytest_gpu_failed_tests": pytest_gpu_failed_tests,
    "h200.pytest_flashinfer": pytest_flashinfer,
    "h200.peers_by_size_table": peers_by_size_table,
    "h200.peer_x_reasons": peer_x_reasons,
    "h200.masks_with_rows": h200_masks_with_rows,
    "h200.dense_more_table": dense_more_table,
    "h200.dense_more_vs_flex": dense_more_vs_flex,
    "h200.dense_more_below_flex": dense_more_below_flex,
    "h200.block_sparse_table": block_sparse_table,
    "h200.cp1_table": cp1_h200_table,
    "h200.plan_once_vs_fa4": plan_once_vs_fa4,
    "h200.plan_once_vs_flex": plan_once_vs_flex,
    "h200.plan_once_full_document_fwd": plan_once_full_document_fwd,
    "h200.no_lse_vs_fa4": no_lse_vs_fa4,
    "h200.no_lse_vs_flex": no_lse_vs_flex,
    "h200.no_lse_2k": no_lse_2k,
    "h200.lse_probe_table": lse_probe_table,
    "h200.lse_cost": lse_cost,
    "h200.peers_table": peers_table,
    "h200.peers_vs_fa4": peers_vs_fa4,
    "h200.triton_v3_table": triton_v3_table,
    "h200.magi_profile_table": magi_profile_table,
    "h200x2.cp2_table": cp2_table,
    "h200x2.cp2_s16_table": cp2_s16_table,
    "h200x2.cp2_s16_summary": cp2_s16_summary,
    "h200x2.cp2_s17_table": cp2_s17_table,
    "h200x2.cp2_s17_summary": cp2_s17_summary,
    "h200x2.cp2_s17_changes": cp2_s17_changes,
    "h200x2.cp2_s18_table": cp2_s18_table,
    "h200x2.cp2_s18_summary": cp2_s18_summary,
    "h200x2.cp2_s18_changes": cp2_s18_changes,
    "h200x2.cp2_s19_table": cp2_s19_table,
    "h200x2.cp2_s19_summary": cp2_s19_summary,
    "h200x2.cp2_s19_changes": cp2_s19_changes,
    "h200x2.cp2_s19_profile": cp2_s19_profile,
    "h200x2.pytest_nccl_s19": pytest_nccl_s19,
    "h200x2.pytest_nccl_s19_kernels": pytest_nccl_s19_kernels,
    "h200x2.cp2_s19_below": cp2_s19_below,
    "h200x2.cp_ab_s20_table": cp_ab_s20_table,
    "h200x2.cp2_s20_table": cp2_s20_table,
    "h200x2.cp2_s20_summary": cp2_s20_summary,
    "h200x2.cp2_s20_cut_cells": cp2_s20_cut_cells,
    "h200x2.cp2_s20_below": cp2_s20_below,
    "h100x2.cp_s25_table": cp_s25_table,
    "h100x2.cp_s25_summary": cp_s25_summary,
    "h100x2.cp_s25_below": cp_s25_below,
    "h100x2.cp_s25_cp1_low": cp_s25_cp1_low,
    "h100x2.profile_s25": profile_s25,
    "h100x2.pytest_nccl_s25": pytest_nccl_s25,
    "h100x2.hybrid_steps_s25": hybrid_steps_s25,
    "h100x2.outside_kernel_s25": outside_kernel_s25,
    "h100x2.doc64k_s25": doc64k_s25,
    "h100x2.bwd_per_pair_s25": bwd_per_pair_s25,
    "h100x2.equal_token_s25_summary": equal_token_s25_summary,
    "h100x2.equal_token_s25_table": equal_token_s25_table,
    "h100x2.ab64k_s26": ab64k_s26,
    "h100x2.causal64k_s26": causal64k_s26,
    "h100x2.cp2_s26_summary": cp2_s26_summary,
    "h100x2.pytest_nccl_s26": pytest_nccl_s26,
    "h100x2.cast_bandwidth_s26": cast_bandwidth_s26,
    "h100x2.probe_ranks_s26": probe_ranks_s26,
    "h100x2.order_s26": order_s26,
    "h100x2.dq_add_share_s26": dq_add_share_s26,
    "h100x2.timing_s26": timing_s26,
    "h100x2.bwd_fit_s26": bwd_fit_s26,
    "h100x2.persistent_s26": persistent_s26,
    "h100.kernels_s26_table": kernels_s26_table,
    "h100.kernels_s26_goals": kernels_s26_goals,
    "h100x2.triton_docs_s26": triton_docs_s26,
    "h200x2.pytest_nccl_s20": pytest_nccl_s20,
    "h200x2.pytest_nccl_split": pytest_nccl_split,
    "h200x2.fa4_groups_table": fa4_groups_table,
    "h200x2.pytest_fa4_groups": pytest_fa4_groups,
    "h200x2.pytest_triton_s17": pytest_triton_s17,
    "h200x2.cp2_dispatch_gain": cp2_dispatch_gain,
    "h200x2.cp2_profile_table": cp2_profile_table,
    "h200x2.cp_gpu_check": cp_gpu_check_2,
    "h200x2.cp2_profile_summary": cp2_profile_summary,
    "h200x2.pytest_gpu_magi": pytest_gpu_magi_s16,
    "h200.pytest_gpu": pytest_gpu_h200,
    "h200.pytest_fa4": pytest_fa4,
    "h200.kernel_sweep_rows": kernel_sweep_rows,
    "h200.kernel_table": kernel_table,
    "h200.harness_ffa_fa4_small": harness_ffa_fa4_small,
    "h200.helper_ffa_fa4_small": helper_ffa_fa4_small,
    "h200.ffa_vs_fa4_fwd": ffa_vs_fa4_fwd,
    "h200.ffa_vs_fa4_bwd": ffa_vs_fa4_bwd,
    "h200.ffa_goal": ffa_goal,
    "h200.ffa_vs_cudnn_fwd": ffa_vs_cudnn_fwd,
    "h200.ffa_vs_flex_fwd": ffa_vs_flex_fwd,
    "h200.ffa_vs_flex_bwd": ffa_vs_flex_bwd,
    "h200.ffa_vs_flex_verdict": ffa_vs_flex_verdict,
    "h200.helper_ffa_fa4_64k": helper_ffa_fa4_64k,
    "h200.helper_ffa_fa4_16k_30": helper_ffa_fa4_16k_30,
    "h200.helper_ffa_fa4_goal_64k": helper_ffa_fa4_goal_64k,
    "h200.helper_ffa_fa4_goal_16k": helper_ffa_fa4_goal_16k,
    "h200.sweep_ffa_fa4_64k": sweep_ffa_fa4_64k,
    "h200.sweep_ffa_fa4_goal_64k": sweep_ffa_fa4_goal_64k,
    "h200.fa4_window_64k_fwd": fa4_window_64k_fwd,
    "h200.helper_ffa_fa4_vs_flex": helper_ffa_fa4_vs_flex,
    "h200.helper_ffa_fa4_vs_flex_goal": helper_ffa_fa4_vs_flex_goal,
    "h200x4.magi_check": magi_check,
    "h200x4.magi_bench": magi_bench,
    "h200x4.magi_keeps": magi_keeps,
    "h200x4.cp_check": cp_check,
    "h200x4.cp_sweep_rows": cp_sweep_rows,
    "h200x4.cp_ratio_table": cp_ratio_table,
    "h200x4.cp1_allgather_fwd": cp1_allgather_fwd,
    "h200x4.cp1_allgather_bwd": cp1_allgather_bwd,
    "h200x4.cp1_allgather_example": cp1_allgather_example,
    "h200x4.cp_scaling": cp_scaling,
    "solver.dispatch_volume_table": dispatch_volume_table,
    "solver.dispatch_volume_extremes": dispatch_volume_extremes,
}


def stale_spans(text: str) -> list[str]:
    """The names of the spans whose text differs from what their sections compute."""
    fresh = {m["name"]: m["body"] for m in SPAN.finditer(render(text, SECTIONS))}
    return [m["name"] for m in SPAN.finditer(text) if fresh[m["name"]] != m["body"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=RESULTS_MD)
    parser.add_argument("--check", action="store_true", help="only report stale spans")
    args = parser.parse_args(argv)
    text = args.path.read_text()
    if args.check:
        stale = stale_spans(text)
        if stale:
            sys.exit(f"{args.path}: stale spans {stale}; run python -m bench.results_md")
        print(f"{args.path}: every span is current")
        return
    args.path.write_text(render(text, SECTIONS))
    print(f"{args.path}: {len(SPAN.findall(text))} spans written")


if __name__ == "__main__":
    main()
