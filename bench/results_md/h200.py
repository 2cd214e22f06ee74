"""Sections on one H200: the kernel sweeps, FFA (Triton, FA4) against its peers, probes."""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable

import pandas as pd

from ._common import (CP_MASKS, FFA_FA4_GOAL, K16, K64, KERNEL_MASKS, _baselines, _bwd_orders,
                      _by_size_table, _cp_cells, _files, _fit_ms, _helper, _k, _kernel_tflops,
                      _low_cells, _ncu_metric, _no_rate, _pairs, _probe_ms, _pytest_counts, _rows,
                      _span, _summed_counts, _tf, _verdict, flex_goals, triton_s21_goals,
                      triton_s21_table)
from ._paths import RESULTS


DOC_WINDOW_MASKS = ("full_document", "causal_document", "sliding_window_causal")
# the FA4 helper script's files (scripts/device/fa4_check.py)
HELPER_5 = "h200/ffa_fa4/fa4_bench.csv"
HELPER_30 = "h200/ffa_fa4/fa4_bench_16k_repeat30.csv"
FFA_GOALS = {"fwd": 0.8, "bwd": 0.7}  # FFA (Triton) over FA4, issue 3
FFA_FA4_FLEX_GOAL = 2.0  # ffa_fa4 over FlexAttention where FA4 cannot run, issue 4


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
DENSE_WINDOWS = "h200/kernels/dense_sweep__sliding_window_global_sliding_window__cut_at_320s.csv"
TRITON_V4 = "h200/ffa_triton/v4_bwd_det_sweep.csv"
V3_DEFAULT_BWD = "bwd_det_64x64_w4_s3_p2"  # the ordered two-kernel path, pointer loads


def dense_windows_table() -> str:
    return dense_more_table(DENSE_WINDOWS, ("sdpa", "cudnn", "fa4", "flex", "ffa", "ffa_fa4"))


# session 21 (issue 14): the forward options measured, the Gluon proof of concept, and one
# bench run of FFA's Triton kernel against FA4 and compiled FlexAttention
S21_SWEEP = "h200/ffa_triton/s21_sweep.csv"
S21_GLUON = ("h200/ffa_triton/s21_gluon_poc_a.csv", "h200/ffa_triton/s21_gluon_poc_b.csv")
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


def cp1_triton_s21(relpath: str | tuple[str, ...] = CP1_TRITON_S21) -> str:
    """magi / single_gpu at cp 1 with the Triton local kernel (forward: Gluon on long rows), from
    one file or several."""
    frame = _files(relpath if isinstance(relpath, tuple) else (relpath,))
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


def gluon_s21_table() -> str:
    return triton_s21_table(S21_GLUON_KERNELS)


def gluon_s21_goals() -> str:
    return triton_s21_goals(S21_GLUON_KERNELS)


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


# -- session 30: one H200 (probes, the dense-split A/B), then 2 H200s ---------------------------
# the key-length and FA4 dense/varlen probes and the FFA fa4 backend with and without the
# (since removed) dense split, all on one H200; on 2 H200s the unequal_runs A/B with FA4's dense
# rate (16k), Triton at 64k with the cut timed and forced, and the backward timing probe
PROBES_S30 = "h200/probes_s30"


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
KERNELS_S31 = "h200/kernels/kernel_masks__whole_dout_16k_64k_s31.csv"


def kernels_s31_table() -> str:
    return triton_s21_table(KERNELS_S31)


def kernels_s31_goals() -> str:
    return triton_s21_goals(KERNELS_S31)

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
        rows.loc[g.index, "fit"] = _fit_ms(g, ["pairs", "tiles"])[1]
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


# -- session 33: the Triton backward's key tile orders on the H200 (rank_mask_probe.py) ---------
# run a: bwd_heavy_first (the library's), bwd_natural, bwd_docs_heavy_first; run b reversed;
# 300 ms warm-up before each variant; ncu (SpeedOfLight, MemoryWorkloadAnalysis) of one backward
# launch on causal_document 64k under each of the first two orders
BWD_ORDER_S33 = {"run a": "h200/bwd_order_s33/rank_mask_probe_a.csv",
                 "run b": "h200/bwd_order_s33/rank_mask_probe_b.csv"}
NCU_BWD_S33 = "h200/bwd_order_s33/ncu_cd64k_bwd_{}.txt"


def bwd_order_s33() -> str:
    """Natural and documents-heaviest-first orders over the plan's heaviest first, per run, and
    the masks where natural order is more than 2% faster."""
    faster = []
    for label, relpath in BWD_ORDER_S33.items():
        t = _probe_ms(relpath)
        r = t.bwd_natural / t.bwd_heavy_first
        faster.append(f"{label} {(r < 0.98).sum()} of {len(r)} "
                      f"(lowest {r.min():.2f}, {r.idxmin()[0]})")
    return (f"{_bwd_orders(BWD_ORDER_S33)}. natural / heavy_first below 0.98: "
            + ", ".join(faster))


def ncu_bwd_s33() -> str:
    """ncu of one Triton backward launch on causal_document 64k, per key tile order."""
    out = []
    for order in ("heavy_first", "natural"):
        text = (RESULTS / NCU_BWD_S33.format(order)).read_text()
        m = {k: _ncu_metric(text, k) for k in ("Duration", "SM Frequency", "Elapsed Cycles",
                                               "DRAM Throughput", "L2 Hit Rate")}
        out.append(f"{order}: {m['Duration']:.2f} ms at {m['SM Frequency']:.2f} GHz "
                   f"({m['Elapsed Cycles'] / 1e6:.1f} M cycles), DRAM throughput "
                   f"{m['DRAM Throughput']:.1f}%, L2 hit rate {m['L2 Hit Rate']:.1f}%")
    return "; ".join(out)


# -- session 38: issue 14's kernel masks on an H200 again (FFA's Triton backend, FA4, compiled
# Flex in one run per seqlen; the first H200 since session 33), code at 5ec87f8
KERNELS_S38 = ("h200/kernels_s38/kernel_masks_16k.csv", "h200/kernels_s38/kernel_masks_64k.csv")


def kernels_s38_table() -> str:
    return triton_s21_table(KERNELS_S38)


def kernels_s38_goals() -> str:
    return triton_s21_goals(KERNELS_S38)


def pytest_auto_s41() -> str:
    """The "auto" backend GPU tests, FA4 installed (run on one H200 of a 2-GPU node)."""
    return _pytest_counts("h200/tests/pytest_auto_backend_s41.log")


# -- session 48: issue 14's kernel masks on an H200 at HEAD 252ce95 (after PackGQA, the per-pair
# bitmaps and "auto" per mask; FFA's Triton backend, FA4 and compiled Flex in one run per seqlen)
KERNELS_S48 = ("h200/kernels_s48/kernel_masks_16k.csv", "h200/kernels_s48/kernel_masks_64k.csv")


def kernels_s48_table() -> str:
    return triton_s21_table(KERNELS_S48)


def kernels_s48_goals() -> str:
    return triton_s21_goals(KERNELS_S48)


# -- session 57: four Gluon backward experiments on cp ranks' masks (all reverted), the head
# chunk count on the cp ranks' shapes and a probe of what the dK/dV stores cost;
# rank_mask_probe.py rows, one H200 (label -> file per run)
PROBES_S57 = "h200/probes_s57/"
PERSISTENT_S57 = PROBES_S57 + "persistent_bwd_ab.csv"
CHUNKS_S57 = {"magi, cp 4 ranks (16k x 64k keys, 64:8)": PROBES_S57 + "chunks_magi_cp4.csv",
              "Ulysses' cp 4 rank (64k x 64k, 16:2)": PROBES_S57 + "chunks_ulysses_cp4.csv",
              "magi, cp 2 ranks (16k x 32k keys, 64:8)": PROBES_S57 + "chunks_magi_cp2.csv"}
DKV_TMA_S57 = {"magi cp 4 ranks": PROBES_S57 + "dkv_tma_magi_cp4.csv",
               "Ulysses' cp 4 rank": PROBES_S57 + "dkv_tma_ulysses_cp4.csv",
               "16k cp 2 ranks and full / causal 16k": PROBES_S57 + "dkv_tma_cp2_16k.csv"}
COUNTER_S57 = {"16k cp 2 ranks, full / causal 16k and 64k": PROBES_S57 + "counter_cp2_16k.csv",
               "magi cp 4 ranks": PROBES_S57 + "counter_magi_cp4.csv",
               "Ulysses' cp 4 rank": PROBES_S57 + "counter_ulysses_cp4.csv"}
NOSTORE_S57 = {"16k cp 2 ranks, full / causal / sliding_window_causal 16k":
               PROBES_S57 + "nostore_cp2_16k.csv",
               "magi cp 4 ranks": PROBES_S57 + "nostore_magi_cp4.csv"}
TMA_OUT_S57 = {"16k cp 2 ranks, full / causal / sliding_window_causal 16k":
               PROBES_S57 + "tma_out_cp2_16k.csv",
               "magi cp 4 causal ranks": PROBES_S57 + "tma_out_magi_cp4.csv"}


def _span_of(ratios: pd.Series) -> str:
    return f"{ratios.min():.3f}-{ratios.max():.3f}"


def persistent_bwd_s57_table() -> str:
    """Per mask: the s56 kernel's ms and each variant over it (the s56 kernel timed first and
    last: its second row is the drift)."""
    t = _probe_ms(PERSISTENT_S57)
    lines = ["| mask | strategy | rank | s56 ms | loop, one program an item / s56 | "
             "persistent / s56 | s56 again / s56 |", "|---|---|---|---|---|---|---|"]
    for (mask, strategy, rank), r in t.iterrows():
        base = r.bwd_s56
        lines.append(f"| {mask} | {strategy} | {rank} | {base:.2f} | {r.bwd_per_item / base:.3f} "
                     f"| {r.bwd_persistent / base:.3f} | {r.bwd_s56_again / base:.3f} |")
    return "\n".join(lines)


def persistent_bwd_s57_summary() -> str:
    t = _probe_ms(PERSISTENT_S57)
    return (f"one program an item {_span_of(t.bwd_per_item / t.bwd_s56)}, persistent "
            f"{_span_of(t.bwd_persistent / t.bwd_s56)}, the s56 kernel again "
            f"{_span_of(t.bwd_s56_again / t.bwd_s56)}")


def head_chunks_s57_table() -> str:
    """Per rank mask: 8 chunks' ms and 4, 2, 1 chunks and head_chunks_for's choice over it."""
    lines = ["| shape | mask | rank | 8 chunks ms | 4 / 8 | 2 / 8 | 1 / 8 | default / 8 |",
             "|---|---|---|---|---|---|---|---|"]
    for label, relpath in CHUNKS_S57.items():
        for (mask, _, rank), r in _probe_ms(relpath).iterrows():
            base = r.bwd_heads_8
            lines.append(f"| {label} | {mask} | {rank} | {base:.2f} | "
                         + " | ".join(f"{r[f'bwd_heads_{n}'] / base:.3f}" for n in (4, 2, 1))
                         + f" | {r.bwd_heavy_first / base:.3f} |")
    return "\n".join(lines)


def rank_vs_ulysses_s57() -> str:
    """ns per (tile pair x q head) at 8 chunks: magi's cp 4 ranks against Ulysses' rank (the
    same attention flops: 64 q heads over 16k rows against 16 over 64k)."""
    magi_rows, ulysses_rows = (CHUNKS_S57["magi, cp 4 ranks (16k x 64k keys, 64:8)"],
                               CHUNKS_S57["Ulysses' cp 4 rank (64k x 64k, 16:2)"])
    heads = {magi_rows: 64, ulysses_rows: 16}
    per = {}
    for relpath, h in heads.items():
        rows = pd.read_csv(RESULTS / relpath)
        rows = rows[rows.order == "bwd_heads_8"]
        for r in rows.itertuples():
            mask = r.mask.removesuffix("_64k")
            per.setdefault(mask, {}).setdefault(relpath, []).append(1e6 * r.ms / (r.pairs * h))
    out = []
    for mask, by in per.items():
        magi, uly = by[magi_rows], by[ulysses_rows][0]
        out.append(f"{mask}: magi's ranks {min(magi):.2f}-{max(magi):.2f} ns, Ulysses' "
                   f"{uly:.2f} ns ({min(magi) / uly:.3f}-{max(magi) / uly:.3f})")
    return "; ".join(out)


def _ab_ranges_s57(runs: dict[str, str], variant: str, base: str, again: str) -> str:
    """``variant`` / ``base`` per run (label -> rank_mask_probe.py rows), with the drift:
    ``again`` (the base timed last) / ``base``."""
    parts = []
    for label, relpath in runs.items():
        t = _probe_ms(relpath)
        parts.append(f"{label}: {_span_of(t[variant] / t[base])} (the library's kernel again "
                     f"{_span_of(t[again] / t[base])})")
    return "; ".join(parts)


def dkv_tma_s57() -> str:
    return _ab_ranges_s57(DKV_TMA_S57, "bwd_heavy_first", "bwd_s56", "bwd_s56_again")


def pytest_s57() -> str:
    return (f"persistent: {_summed_counts(PROBES_S57 + 'gluon_bwd_tests_persistent.log')}; "
            f"TMA dK/dV: {_summed_counts(PROBES_S57 + 'gluon_bwd_tests_dkv_tma.log')}")


def counter_s57() -> str:
    """The counter-fed persistent backward over the library's kernel, per run."""
    return _ab_ranges_s57(COUNTER_S57, "bwd_heavy_first", "bwd_s56", "bwd_s56_again")


def nostore_s57() -> str:
    """The kernel with its dK/dV stores never run (MMAs kept) over the library's kernel."""
    return _ab_ranges_s57(NOSTORE_S57, "bwd_no_epilogue", "bwd_lib", "bwd_lib_again")


def tma_out_s57() -> str:
    """dK/dV out by one TMA copy a consumer over the library's kernel."""
    return _ab_ranges_s57(TMA_OUT_S57, "bwd_heavy_first", "bwd_s56", "bwd_s56_again")


def pytest_tma_out_s57() -> str:
    return _summed_counts(PROBES_S57 + "gluon_bwd_tests_tma_out.log")


# -- session 58: the head chunks' dK/dV adds as red (no return) instead of gl.atomic_add's atom,
# timed against the s56 kernel (timed first and last) on the 16k cp 2 document ranks and full 16k
RED_S58 = {"16k cp 2 document ranks (magi, HybridCP), full 16k": "h200/probes_s58/red_cp2_16k.csv"}


def red_s58() -> str:
    return _ab_ranges_s57(RED_S58, "bwd_heavy_first", "bwd_s56", "bwd_s56_again")


def pytest_red_s58() -> str:
    return _summed_counts(("h200/probes_s58/red_tests.log", "h200/probes_s58/red_gluon_bwd_tests.log"))


# -- session 62: the Gluon forward against FA4's SM90 forward (ncu of both, full and causal 16k),
# then two changes to its consumer loop: the PV wait made to depend on the softmax
# (SOFTMAX_UNDER_PV) and the turns handed over on named barriers (NAMED_TURNS); probe rows of
# scripts/dev/fwd_fa4_probe.py (each arm in its own process, FA4 timed in the same process)
PROBES_S62 = "h200/probes_s62/"
ARMS_S62 = {"call 2": PROBES_S62 + "s62_softmax_under_pv.csv",
            "call 3": PROBES_S62 + "s62_named_turns.csv"}
NCU_S62 = {"Gluon forward before (call 1)": PROBES_S62 + "s62_ncu_ffa_full_details.csv",
           "SOFTMAX_UNDER_PV (call 2)": PROBES_S62 + "s62_ncu_ffa_full_under_pv.csv",
           "SOFTMAX_UNDER_PV + NAMED_TURNS (call 3)": PROBES_S62 + "s62_ncu_ffa_full_named.csv",
           "FA4 (call 1)": PROBES_S62 + "s62_ncu_fa4_full_details.csv"}
KERNELS_S62 = ("h200/kernels_s62/kernel_masks_16k.csv", "h200/kernels_s62/kernel_masks_64k.csv")


def _arm(label: str) -> str:
    """'<sha> named=1 under_pv=0' -> 'NAMED_TURNS 1, SOFTMAX_UNDER_PV 0' (call 2 had no named)."""
    named = re.search(r"named=(\d)", label)
    under = re.search(r"under_pv=(\d)", label).group(1)
    return f"NAMED_TURNS {named.group(1) if named else 0}, SOFTMAX_UNDER_PV {under}"


def fwd_arms_s62() -> str:
    """Per call and arm: FFA's forward TFLOPs/s (median of the rounds) and FFA / FA4 (median of
    the per-process ratios; FA4 timed in the same process)."""
    lines = ["| call | arm | mask | rounds | ffa TFLOPs/s | ffa / fa4 |",
             "|---|---|---|---|---|---|"]
    for call, relpath in ARMS_S62.items():
        rows = pd.read_csv(RESULTS / relpath)
        rows["arm"] = rows.label.map(_arm)
        rows["process"] = rows.groupby(["arm", "kernel", "mask"]).cumcount()
        wide = rows.pivot_table(index=["arm", "mask", "process"], columns="kernel",
                                values="tflops").reset_index()
        wide["ratio"] = wide.ffa / wide.fa4
        for (arm, mask), cell in wide.groupby(["arm", "mask"], sort=False):
            lines.append(f"| {call} | {arm} | {mask} | {len(cell)} | {cell.ffa.median():.0f} | "
                         f"{cell.ratio.median():.3f} |")
    return "\n".join(lines)


def _ncu_details(relpath: str) -> dict[str, float]:
    """Metric name -> value of an ncu --csv --page details file (its ==PROF== lines skipped)."""
    text = (RESULTS / relpath).read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("=="))
    frame = pd.read_csv(pd.io.common.StringIO(body))
    frame = frame.drop_duplicates("Metric Name")
    return {r["Metric Name"]: float(str(r["Metric Value"]).replace(",", ""))
            for _, r in frame.iterrows() if re.fullmatch(r"[\d,.]+", str(r["Metric Value"]))}


def ncu_fwd_s62() -> str:
    """One launch each, full 16k, ncu's locked clocks: cycles and the SMs' throughput."""
    parts = []
    for label, relpath in NCU_S62.items():
        m = _ncu_details(relpath)
        parts.append(f"{label}: {m['Elapsed Cycles'] / 1e6:.2f} M cycles, SM throughput "
                     f"{m['Compute (SM) Throughput']:.1f}%")
    return "; ".join(parts)


def _loop_stalls(relpath: str) -> pd.Series:
    """Stall reasons' shares (%) of the samples on the instructions of the main loop (those run
    the most often with the most samples) in an ncu source page (SASS, gzip'd csv)."""
    frame = pd.read_csv(RESULTS / relpath, skiprows=1, compression="gzip", low_memory=False)
    samples = "Warp Stall Sampling (All Samples)"
    counted = (samples, "Instructions Executed")
    for col in [c for c in frame.columns if c.startswith("stall_") or c in counted]:
        frame[col] = pd.to_numeric(frame[col].astype(str).str.replace(",", ""), errors="coerce")
    loop_count = frame.groupby("Instructions Executed")[samples].sum().idxmax()
    loop = frame[frame["Instructions Executed"] == loop_count]
    reasons = [c for c in frame.columns if c.startswith("stall_") and "Not Issued" not in c]
    stalls = loop[reasons].sum()
    return stalls / stalls.sum() * 100


def loop_stalls_s62() -> str:
    """The main loop's barrier and wait stalls before the changes, FFA against FA4 (full 16k)."""
    parts = []
    for label, name in (("Gluon forward", "ffa"), ("FA4", "fa4")):
        s = _loop_stalls(PROBES_S62 + f"s62_ncu_{name}_full_sass.csv.gz")
        parts.append(f"{label}: barrier {s['stall_barrier']:.1f}%, wait {s['stall_wait']:.1f}%, "
                     f"selected {s['stall_selected']:.1f}%")
    return "; ".join(parts)


def kernels_s62_table() -> str:
    return triton_s21_table(KERNELS_S62)


def kernels_s62_goals() -> str:
    return triton_s21_goals(KERNELS_S62)


def _fwd_moves(before_files: tuple[str, ...], now_files: tuple[str, ...], before: str,
               now: str, direction: str = "fwd") -> str:
    """FFA's forward (or backward), one run (``before``) -> another (``now``), with FA4 in each,
    per cell."""
    first, second = _files(before_files), _files(now_files)
    d = direction
    lines = [f"| mask | S | ffa {d} {before} -> {now} | change | fa4 {d} {before} -> {now} "
             f"| ffa / fa4 {before} -> {now} |", "|---|---|---|---|---|---|"]
    for mask in KERNEL_MASKS:
        for seqlen in (K16, K64):
            lines.append(f"| {mask} | {_k(seqlen)} | "
                         f"{_move_cells(first, second, mask, seqlen, d)} |")
    return "\n".join(lines)


def _move_cells(first: pd.DataFrame, second: pd.DataFrame, mask: str, seqlen: int,
                d: str) -> str:
    """One cell's FFA before -> now, its change, FA4 before -> now and FFA / FA4 before -> now
    ("X" / "not run" and "-" where FA4 has no rate in a run)."""
    f0, f1 = (_tf(x, "ffa", mask, seqlen, d) for x in (first, second))
    a0, a1 = (_tf(x, "fa4", mask, seqlen, d) for x in (first, second))
    if a0 is None or a1 is None:
        fa4, ratio = (_no_rate(second, "fa4", mask, seqlen, d) if a1 is None else "X"), "-"
    else:
        fa4, ratio = f"{a0:.0f} -> {a1:.0f}", f"{f0 / a0:.3f} -> {f1 / a1:.3f}"
    return f"{f0:.0f} -> {f1:.0f} | {f1 / f0 - 1:+.1%} | {fa4} | {ratio}"


def kernels_s62_moves() -> str:
    """FFA's forward, session 48's run -> this one, with FA4 in each run, per cell."""
    return _fwd_moves(KERNELS_S48, KERNELS_S62, "s48", "s62")


def pytest_s62() -> str:
    """The Gluon forward's GPU tests after each change (one H200)."""
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("SOFTMAX_UNDER_PV (a08a763)", "h200/tests/s62_pytest_gluon_fwd_a08a763c6cd4.log"),
        ("+ NAMED_TURNS (c8ddfe7)", "h200/tests/s62_pytest_gluon_fwd_c8ddfe75c865.log")))


# earlier H200 bench runs of FFA's Gluon forward on causal_document 16k (sessions 24-48)
CAUSAL_DOC_16K_HISTORY = ("h200/kernels/kernel_masks__gluon_bwd_16k_64k_s24.csv",
                          "h200/kernels/kernel_masks__gluon_bwd_rowtma_16k_64k_s24.csv",
                          "h200/kernels/kernel_masks__whole_dout_16k_64k_s31.csv",
                          "h200/kernels_s38/kernel_masks_16k.csv",
                          "h200/kernels_s48/kernel_masks_16k.csv")


def short_rows_s62() -> str:
    """The two 16k cells whose forward moved the other way, FFA's and FA4's change, and the
    earlier runs of causal_document 16k."""
    before, now = _files(KERNELS_S48), _files(KERNELS_S62)
    parts = []
    for mask in ("causal_document", "sliding_window_causal"):
        f0, f1, a0, a1 = (_tf(x, k, mask, K16, "fwd") for k in ("ffa", "fa4")
                          for x in (before, now))
        parts.append(f"{mask} {f1 / f0 - 1:+.1%} (FA4 {a1 / a0 - 1:+.1%})")
    earlier = [_tf(_files((p,)), "ffa", "causal_document", K16, "fwd")
               for p in CAUSAL_DOC_16K_HISTORY]
    return (" and ".join(parts) + f"; causal_document 16k in {len(earlier)} earlier H200 runs "
            f"{min(earlier):.0f}-{max(earlier):.0f} TFLOPs/s, now "
            f"{_tf(now, 'ffa', 'causal_document', K16, 'fwd'):.0f}")


def causal_fwd_s62() -> str:
    """FFA / FA4 forward on causal at 16k and 64k in this run."""
    now = _files(KERNELS_S62)
    ratio = lambda s: _tf(now, "ffa", "causal", s, "fwd") / _tf(now, "fa4", "causal", s, "fwd")  # noqa: E731
    return ", ".join(f"{_k(s)} {ratio(s):.3f}" for s in (K16, K64))


# -- session 63: which of session 62's switches cost the short-row 16k cells, two more forward
# arms (both refuted), the softmax under the PV kept for long rows only (a plan rule), the
# kernel masks again, and ncu of the Gluon backward (fwd_fa4_probe.py rows: each arm in its own
# process, three rounds in turn; FA4 on full and causal in the same processes)
PROBES_S63 = "h200/probes_s63/"
KERNELS_S63 = ("h200/kernels_s63/kernel_masks_16k.csv", "h200/kernels_s63/kernel_masks_64k.csv")
_S63_SWITCHES = (("turns", "NAMED_TURNS"), ("under_pv", "SOFTMAX_UNDER_PV"),
                 ("split", "SPLIT_RELEASE"), ("early_q", "EARLY_Q"))


def _arm_s63(label: str) -> str:
    """'<sha> turns=1 under_pv=0 split=0 early_q=0' -> 'NAMED_TURNS 1, SOFTMAX_UNDER_PV 0, ...';
    '<sha> under_pv_min_tiles=0' -> 'under PV always' (1e9: never)."""
    tiles = re.search(r"under_pv_min_tiles=(\d+)", label)
    if tiles:
        return "under PV always" if int(tiles.group(1)) == 0 else "plain wait always"
    return ", ".join(f"{name} {_switch(label, key)}" for key, name in _S63_SWITCHES)


def _switch(label: str, key: str) -> str:
    """The 0/1 of ``key=`` in a probe label."""
    return re.search(key + r"=(\d)", label).group(1)


def _arm_medians(relpath: str, arm: Callable[[str], str] = _arm_s63) -> pd.DataFrame:
    """Per (seqlen, mask, arm): FFA's median TFLOPs/s over the processes and the TFLOPs/s of
    each process in run order (and FA4's median where it ran); ``arm`` names a row's arm from
    its label."""
    rows = pd.read_csv(RESULTS / relpath)
    rows["arm"] = rows.label.map(arm)
    ffa = rows[rows.kernel == "ffa"].groupby(["seqlen", "mask", "arm"], sort=False).tflops
    out = pd.DataFrame({"ffa": ffa.median(), "runs": ffa.apply(
        lambda x: " / ".join(f"{v:.0f}" for v in x))})
    fa4 = rows[rows.kernel == "fa4"].groupby(["seqlen", "mask", "arm"], sort=False).tflops
    return out.join(pd.DataFrame({"fa4": fa4.median()}))


def fwd_arms_s63() -> str:
    """Call 1: the six arms on 16k full, causal and the two short-row masks."""
    med = _arm_medians(PROBES_S63 + "s63_fwd_arms.csv").reset_index()
    lines = ["| mask | arm | ffa TFLOPs/s (median) | the three processes | fa4 (median) |",
             "|---|---|---|---|---|"]
    for _, r in med.sort_values(["mask"], kind="stable").iterrows():
        fa4 = "-" if pd.isna(r.fa4) else f"{r.fa4:.0f}"
        lines.append(f"| {r['mask']} | {r.arm} | {r.ffa:.0f} | {r.runs} | {fa4} |")
    return "\n".join(lines)


def under_pv_rule_s63() -> str:
    """Call 2: the softmax under the PV always against the plain wait always, per mask with its
    listed key tiles per q tile (the plan rule's measure)."""
    from bench.data import sample_doc_lens
    from bench.masks import build_mask
    from magi_attention.kernels.block_sparse import plan_block_sparse
    med = _arm_medians(PROBES_S63 + "s63_under_pv_rule.csv")
    lines = ["| S | mask | key tiles per q tile | under PV (runs) | plain wait (runs) | "
             "under / plain |", "|---|---|---|---|---|---|"]
    cells = dict.fromkeys((s, m) for s, m, _ in med.index)
    for seqlen, mask in sorted(cells, key=lambda c: (c[0], c[1])):
        docs = None if mask in ("full", "causal", "sliding_window_causal") else \
            sample_doc_lens(seqlen, seed=0)
        plan = plan_block_sparse(list(build_mask(mask, seqlen, doc_lens=docs).slices), seqlen,
                                 seqlen, 128, 128)
        tiles = plan.q_tile_kt.numel() / plan.num_q_tiles
        under, plain = (med.loc[(seqlen, mask, a)] for a in ("under PV always",
                                                            "plain wait always"))
        lines.append(f"| {_k(seqlen)} | {mask} | {tiles:.1f} | {under.ffa:.0f} ({under.runs}) | "
                     f"{plain.ffa:.0f} ({plain.runs}) | {under.ffa / plain.ffa:.3f} |")
    return "\n".join(lines)


def pytest_s63() -> str:
    return _pytest_counts("h200/tests/s63_pytest_gluon_fwd_1595bc57950e.log")


def kernels_s63_table() -> str:
    return triton_s21_table(KERNELS_S63)


def kernels_s63_goals() -> str:
    return triton_s21_goals(KERNELS_S63)


def kernels_s63_moves() -> str:
    """FFA's forward, session 62's run -> this one, with FA4 in each run, per cell."""
    return _fwd_moves(KERNELS_S62, KERNELS_S63, "s62", "s63")


def ncu_bwd_s63() -> str:
    """The Gluon backward under ncu (one launch, locked clocks): time, tensor and L1 use,
    issue rate, spills and shared-store conflicts."""
    parts = []
    for mask in ("full", "causal"):
        m = _ncu_details(PROBES_S63 + f"s63_ncu_ffa_bwd_{mask}_details.csv")
        parts.append(f"{mask} 16k: {m['Elapsed Cycles'] / 1e6:.1f} M cycles, SM (tensor) "
                     f"throughput {m['Compute (SM) Throughput']:.1f}%, L1/shared "
                     f"{m['L1/TEX Cache Throughput']:.1f}%, issue slots busy "
                     f"{m['Issue Slots Busy']:.1f}%, {m['Warp Cycles Per Issued Instruction']:.1f} "
                     f"cycles a warp per issued instruction, "
                     f"{m['Local Memory Spilling Requests'] / 1e6:.0f} M spill requests")
    return "; ".join(parts)


# -- session 64: the prepared switch arms measured (forward: short rows take the hoisted mask
# loads and the prefetched item; backward: the early slot release by a plan rule, the two
# barrier arms and EARLY_ROW_STATS refuted), the kernel masks again, ncu of the backward by
# instruction (fwd_fa4_probe.py rows: each arm its own process, three rounds in turn)
PROBES_S64 = "h200/probes_s64/"
KERNELS_S64 = ("h200/kernels_s64/kernel_masks_16k.csv", "h200/kernels_s64/kernel_masks_64k.csv")


def _arm_s64(label: str) -> str:
    """'<sha> NAME=0 OTHER=1' -> 'NAME 0, OTHER 1' (EARLY_EMPTY_MIN_Q_TILES 0: 'early release
    always', 1e9: 'late release always')."""
    switches = re.findall(r"(\w+)=(\d+)", label)
    if switches == [("EARLY_EMPTY_MIN_Q_TILES", "0")]:
        return "early release always"
    if switches and switches[0][0] == "EARLY_EMPTY_MIN_Q_TILES":
        return "late release always"
    return ", ".join(f"{name} {value}" for name, value in switches)


def _arms_table(relpath: str, arm: Callable[[str], str] = _arm_s64) -> str:
    """Each arm's FFA TFLOPs/s per cell (median, the processes in run order), its change
    against the cell's first arm, and FA4's median in the same processes; ``arm`` names a
    row's arm from its label."""
    med = _arm_medians(relpath, arm).reset_index()
    lines = ["| S | mask | arm | ffa TFLOPs/s (median) | the processes | vs first arm | "
             "fa4 (median) |", "|---|---|---|---|---|---|---|"]
    for (seqlen, mask), cell in med.groupby(["seqlen", "mask"], sort=True):
        first = cell.ffa.iloc[0]
        for _, r in cell.iterrows():
            fa4 = "-" if pd.isna(r.fa4) else f"{r.fa4:.0f}"
            lines.append(f"| {_k(seqlen)} | {mask} | {r.arm} | {r.ffa:.0f} | {r.runs} | "
                         f"{r.ffa / first - 1:+.1%} | {fa4} |")
    return "\n".join(lines)


def fwd_arms_s64() -> str:
    return _arms_table(PROBES_S64 + "s64_fwd_arms.csv")


def bwd_arms_s64() -> str:
    return _arms_table(PROBES_S64 + "s64_bwd_arms.csv")


def bwd_early_rule_s64() -> str:
    return _arms_table(PROBES_S64 + "s64_bwd_early_rule.csv")


def bwd_row_stats_s64() -> str:
    return _arms_table(PROBES_S64 + "s64_bwd_row_stats.csv")


def pytest_s64() -> str:
    return _pytest_counts("h200/tests/s64_pytest_gluon_7654b363b99f.log")


def kernels_s64_table() -> str:
    return triton_s21_table(KERNELS_S64)


def kernels_s64_goals() -> str:
    return triton_s21_goals(KERNELS_S64)


def kernels_s64_moves() -> str:
    """FFA's forward, session 63's run -> this one, with FA4 in each run, per cell."""
    return _fwd_moves(KERNELS_S63, KERNELS_S64, "s63", "s64")


def kernels_s64_bwd_moves() -> str:
    """FFA's backward, session 63's run -> this one, with FA4 in each run, per cell."""
    return _fwd_moves(KERNELS_S63, KERNELS_S64, "s63", "s64", direction="bwd")


def ncu_bwd_s64() -> str:
    """The Gluon backward and FA4's SM90 backward under ncu (full 16k, one launch each, locked
    clocks): time, SM throughput, issue rate, spills."""
    parts = []
    for label, name in (("Gluon", "ffa"), ("FA4", "fa4")):
        m = _ncu_details(PROBES_S64 + f"s64_ncu_bwd_full_{name}_details.csv")
        parts.append(f"{label}: {m['Elapsed Cycles'] / 1e6:.1f} M cycles, SM throughput "
                     f"{m['Compute (SM) Throughput']:.1f}%, issue slots busy "
                     f"{m['Issue Slots Busy']:.1f}%, "
                     f"{m['Warp Cycles Per Issued Instruction']:.1f} cycles a warp per issued "
                     f"instruction, {m['Local Memory Spilling Requests'] / 1e6:.0f} M spill "
                     f"requests")
    return "; ".join(parts)


# -- session 65: the backward's prepared arms (KV_VIEWS_PER_STEP on, DQ_SWIZZLE_32 refuted), the
# forward's item stamps (the static grid's imbalance) and its item order by KV head sections
# (LPT_ITEMS), the kernel masks with FFA and FA4 (no FlexAttention: the device time ran out)
PROBES_S65 = "h200/probes_s65/"
KERNELS_S65 = ("h200/kernels_s65/kernel_masks_16k.csv", "h200/kernels_s65/kernel_masks_64k.csv")
SM90_PROGRAMS = 132  # the persistent forward's grid on an H200 (each stamped launch had more items)


def bwd_arms_s65() -> str:
    return _arms_table(PROBES_S65 + "s65_bwd_arms.csv")


def bwd_kv_views_64k_s65() -> str:
    return _arms_table(PROBES_S65 + "s65_bwd_kv_views_64k.csv")


def fwd_heads_fastest_s65() -> str:
    return _arms_table(PROBES_S65 + "s65_fwd_arms.csv")


def fwd_sections_s65() -> str:
    return _arms_table(PROBES_S65 + "s65_fwd_sections.csv")


def stamps_s65() -> str:
    """The stamped forward launches (16k), plain order against KV head sections: the launch's
    span and the consumers' mean busy time over it (sum of item times / (2 x programs x span))."""
    d = pd.read_csv(RESULTS / PROBES_S65 / "s65_item_stamps_sections.csv.gz")
    d["lpt"] = d.lpt.astype(int)  # (written as False / True)
    took = (d.end_ns - d.start_ns).groupby([d["mask"], d.lpt]).sum()
    span = d.groupby(["mask", "lpt"]).end_ns.max() - d.groupby(["mask", "lpt"]).start_ns.min()
    busy = took / (2 * SM90_PROGRAMS * span)
    lines = ["| mask (16k) | span plain -> sections (ms) | change "
             "| busy / span plain -> sections |", "|---|---|---|---|"]
    for mask in sorted(d["mask"].unique()):
        s0, s1 = span[mask, 0] / 1e6, span[mask, 1] / 1e6
        lines.append(f"| {mask} | {s0:.2f} -> {s1:.2f} | {s1 / s0 - 1:+.1%} | "
                     f"{busy[mask, 0]:.3f} -> {busy[mask, 1]:.3f} |")
    return "\n".join(lines)


def pytest_s65() -> str:
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("`-k gluon` (23cb484)", "h200/tests/s65_pytest_gluon_23cb48437b38.log"),
        ("`-k stamps` (d0d51bd)", "h200/tests/s65_pytest_stamps_d0d51bdd06ec.log")))


def _kernel_moves(first_files: tuple[str, ...], second_files: tuple[str, ...], first: str,
                  second: str) -> str:
    """FFA and FA4, one run -> a later one, on the cells both runs measured."""
    a, b = _files(first_files), _files(second_files)
    lines = [f"| mask | S | dir | ffa {first} -> {second} | change | fa4 {first} -> {second} | "
             f"ffa / fa4 {first} -> {second} |", "|" + "---|" * 7]
    for mask in KERNEL_MASKS:
        for seqlen in (K16, K64):
            for d in ("fwd", "bwd"):
                if all(_tf(f, "ffa", mask, seqlen, d) is not None for f in (a, b)):
                    lines.append(f"| {mask} | {_k(seqlen)} | {d} | "
                                 f"{_move_cells(a, b, mask, seqlen, d)} |")
    return "\n".join(lines)


def kernels_s65_moves() -> str:
    """FFA and FA4, session 64's run -> this one, on the cells this run measured."""
    return _kernel_moves(KERNELS_S64, KERNELS_S65, "s64", "s65")


def _fa4_aims(files: tuple[str, ...]) -> str:
    """Issue 14's FA4 cells (full and causal, 16k and 64k) in one run, against the goals and
    the aims (0.95 forward, 0.85 backward)."""
    frame = _files(files)
    out = []
    for d, goal, aim in (("fwd", 0.85, 0.95), ("bwd", 0.75, 0.85)):
        r = [p for (_, _, dd), p in _pairs(frame, "ffa", "fa4", ("full", "causal")) if dd == d]
        out.append(f"{d} / fa4 on full and causal {_span(r)} over {len(r)} cells (goal {goal}: "
                   f"{_verdict(r, goal)}; aim {aim}: {sum(x >= aim for x in r)} of {len(r)})")
    return "; ".join(out)


def kernels_s65_goals() -> str:
    return _fa4_aims(KERNELS_S65)


# -- session 66: O_DIRECT refuted, the backward's programs in kv-head sections refuted, the
# forward's sections on the counter-fed grid (LPT_DYNAMIC) on; the kernel masks with FFA, FA4 and
# compiled Flex in one run; magi at cp 1 on one H200, both local kernels, 16k and 64k
PROBES_S66 = "h200/probes_s66/"
KERNELS_S66 = ("h200/kernels_s66/kernel_masks_16k.csv", "h200/kernels_s66/kernel_masks_64k.csv")
CP1_S66 = {backend: tuple(f"h200/cp_s66/cp1_{backend}_{size}.csv" for size in ("16k", "64k"))
           for backend in ("fa4", "triton")}


def fwd_o_direct_s66() -> str:
    return _arms_table(PROBES_S66 + "s66_O_DIRECT.csv")


def bwd_kv_sections_s66() -> str:
    return _arms_table(PROBES_S66 + "s66_KV_SECTIONS.csv")


def fwd_lpt_dynamic_s66() -> str:
    return _arms_table(PROBES_S66 + "s66_LPT_DYNAMIC.csv")


def _cell_changes(med: pd.DataFrame, arm: str, base: str, ratio: bool = False) -> str:
    """Per (seqlen, mask) row of arm medians: column ``arm`` against column ``base``,
    '16k full -3.0%' (or the ratio, '0.979x')."""
    return ", ".join(
        f"{_k(seqlen)} {mask} " + (f"{r[arm] / r[base]:.3f}x" if ratio
                                   else f"{r[arm] / r[base] - 1:+.1%}")
        for (seqlen, mask), r in med.sort_index().iterrows())


def _second_arm_changes(relpath: str, arm: Callable[[str], str] = _arm_s64) -> str:
    """The second arm's median against the first's, per cell: '16k full -3.0%, ...' (a two-arm
    A/B file of fwd_fa4_probe.py rows; ``arm`` names a row's arm from its label)."""
    med = _arm_medians(relpath, arm).ffa.unstack("arm")
    first, second = med.columns[:2]
    return _cell_changes(med, second, first)


def fwd_o_direct_s66_changes() -> str:
    return _second_arm_changes(PROBES_S66 + "s66_O_DIRECT.csv")


def bwd_kv_sections_s66_changes() -> str:
    return _second_arm_changes(PROBES_S66 + "s66_KV_SECTIONS.csv")


def fwd_lpt_dynamic_s66_changes() -> str:
    return _second_arm_changes(PROBES_S66 + "s66_LPT_DYNAMIC.csv")


def pytest_s66() -> str:
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("`-k gluon` (cb268ef, with the two arms' tests)",
         "h200/tests/s66_pytest_gluon_cb268ef77074.log"),
        ("`-k gluon` (0f5f82d)", "h200/tests/s66_pytest_gluon_0f5f82da76a2.log"),
        ("`-m gpu` functional and comm (0f5f82d)",
         "h200/tests/s66_pytest_magi_gpu_0f5f82da76a2.log")))


def kernels_s66_table() -> str:
    return triton_s21_table(KERNELS_S66)


def kernels_s66_moves() -> str:
    """FFA and FA4, session 65's run -> this one."""
    return _kernel_moves(KERNELS_S65, KERNELS_S66, "s65", "s66")


def kernels_s66_goals() -> str:
    """Issue 14's FA4 aims and its FlexAttention cells, in this one run."""
    return f"{_fa4_aims(KERNELS_S66)}; {flex_goals(_files(KERNELS_S66))}"


def cp1_s66() -> str:
    """magi / single_gpu at cp 1, per local kernel, 16k and 64k, five masks, fwd and bwd."""
    return "; ".join(f"{backend}: {cp1_triton_s21(files)}" for backend, files in CP1_S66.items())


# -- session 67: O_BUFFER refuted (the third K/V slot is worth more), the forward's tiles cut at
# the slices (FA4's varlen tiling, a plan rule picks it per mask), the kernel masks with FFA, FA4
# and compiled Flex in one run
PROBES_S67 = "h200/probes_s67/"
KERNELS_S67 = ("h200/kernels_s67/kernel_masks_16k.csv", "h200/kernels_s67/kernel_masks_64k.csv")


def _arm_s67(label: str) -> str:
    """_arm_s64's names, and 'kernel before cut tiles' for the arm that ran the forward module
    of fd4f858 (--fwd-module)."""
    return "kernel before cut tiles" if "module=" in label else _arm_s64(label)


def fwd_o_buffer_s67() -> str:
    return _arms_table(PROBES_S67 + "s67_O_BUFFER.csv")


def fwd_cut_first_s67() -> str:
    return _arms_table(PROBES_S67 + "s67_CUT.csv", _arm_s67)


def fwd_cut_s67() -> str:
    return _arms_table(PROBES_S67 + "s67_CUT2.csv")


def fwd_cut_s67_changes() -> str:
    return _second_arm_changes(PROBES_S67 + "s67_CUT2.csv")


def pytest_s67() -> str:
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("`-k \"gluon and o_buffer\"` (1d6146f)", "h200/tests/s67_pytest_obuf_1d6146fbe156.log"),
        ("`-k gluon` (2cbf7e7, cut tiles' first form)",
         "h200/tests/s67_pytest_gluon_2cbf7e70f1a3.log"),
        ("`-k gluon` (718233e, cut tiles as a specialisation)",
         "h200/tests/s67_pytest_gluon_718233e3ce46.log")))


def kernels_s67_table() -> str:
    return triton_s21_table(KERNELS_S67)


def kernels_s67_moves() -> str:
    """FFA and FA4, session 66's run -> this one."""
    return _kernel_moves(KERNELS_S66, KERNELS_S67, "s66", "s67")


def kernels_s67_goals() -> str:
    """Issue 14's FA4 aims and its FlexAttention cells, in this one run."""
    return f"{_fa4_aims(KERNELS_S67)}; {flex_goals(_files(KERNELS_S67))}"


# -- session 68: the backward on tiles cut at the slices, measured: session 67's kernel (row TMA's
# illegal instruction, a loss at 64k), its cost on the full mask's grid tiles, the consumers by
# slot; the kernel masks with FFA, FA4 and compiled Flex in one run
PROBES_S68 = "h200/probes_s68/"
KERNELS_S68 = ("h200/kernels_s68/kernel_masks_16k.csv", "h200/kernels_s68/kernel_masks_64k.csv")


def _arm_s68(label: str) -> str:
    """'<sha> plan=cut,CUT_ROW_UNDER_MMA=0' -> 'plan cut, CUT_ROW_UNDER_MMA 0'."""
    return ", ".join(f"{name} {value}" for name, value in re.findall(r"(\w+)=(\w+)", label))


def bwd_cut_first_s68() -> str:
    return _arms_table(PROBES_S68 + "s68_CUTB.csv", _arm_s68)


def bwd_cut_cost_s68() -> str:
    return _arms_table(PROBES_S68 + "s68_CUTROW.csv", _arm_s68)


def bwd_cut_slot_s68() -> str:
    return _arms_table(PROBES_S68 + "s68_CUTSLOT.csv", _arm_s68)


def bwd_cut_slot_s68_changes() -> str:
    return _second_arm_changes(PROBES_S68 + "s68_CUTSLOT.csv", _arm_s68)


def bwd_gather_s68() -> str:
    return _arms_table(PROBES_S68 + "s68_GATHER.csv", _arm_s68)


def pytest_s68() -> str:
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("call 1, `-k cut_at_the_slices` (session 67's cut backward)",
         "h200/tests/s68_call1_cut_tests.log"),
        ("call 2, the same without row TMA on cut plans", "h200/tests/s68_call2_cut_tests.log"),
        ("call 3 (by slot), the cut tests without row TMA, test_every_mask at 8k and the bwd "
         "route", "h200/tests/s68_call3_cut_tests.log"),
        ("call 3, the cut tests with row TMA", "h200/tests/s68_call3_cut_row_tma.log"),
        ("call 4 (the fused gather), the backward's cut tests by table",
         "h200/tests/s68_call4_gather_tests.log")))


def kernels_s68_table() -> str:
    return triton_s21_table(KERNELS_S68)


def kernels_s68_moves() -> str:
    """FFA and FA4, session 67's run -> this one."""
    return _kernel_moves(KERNELS_S67, KERNELS_S68, "s67", "s68")


def kernels_s68_goals() -> str:
    """Issue 14's FA4 aims and its FlexAttention cells, in this one run."""
    return f"{_fa4_aims(KERNELS_S68)}; {flex_goals(_files(KERNELS_S68))}"


# -- session 69: the backward's producer reading a cut plan's q row before its empty wait, the
# forward's cut kernel on the full mask's grid tiles; the kernel masks with FFA, FA4 and
# compiled Flex in one run (the dQ gather fused into the cast, session 68, first in a bench row)
PROBES_S69 = "h200/probes_s69/"
KERNELS_S69 = ("h200/kernels_s69/kernel_masks_16k.csv", "h200/kernels_s69/kernel_masks_64k.csv")


def bwd_q_row_s69() -> str:
    return _arms_table(PROBES_S69 + "s69_QROW.csv", _arm_s68)


def fwd_cut_cost_s69() -> str:
    return _arms_table(PROBES_S69 + "s69_FWDCUT.csv", _arm_s68)


def pytest_s69() -> str:
    return "; ".join(f"{label}: {_pytest_counts(relpath)}" for label, relpath in (
        ("call 1, `-k gluon_backward_on_tiles_cut` (the q row before the wait)",
         "h200/tests/s69_call1_cut_tests.log"),))


def kernels_s69_table() -> str:
    return triton_s21_table(KERNELS_S69)


def kernels_s69_moves() -> str:
    """FFA and FA4, session 68's run -> this one."""
    return _kernel_moves(KERNELS_S68, KERNELS_S69, "s68", "s69")


def kernels_s69_goals() -> str:
    """Issue 14's FA4 aims and its FlexAttention cells, in this one run."""
    return f"{_fa4_aims(KERNELS_S69)}; {flex_goals(_files(KERNELS_S69))}"


def fwd_cut_clocks_s69() -> str:
    return _arms_table(PROBES_S69 + "s69_FWDCUT_CLK.csv", _arm_s68)


def fwd_cut_clock_table_s69() -> str:
    """Each arm process's SM clock and board power (nvidia-smi every 100 ms, the samples above
    300 W) in call 3's A/B."""
    rows = pd.read_csv(RESULTS / PROBES_S69 / "s69_FWDCUT_CLK_clocks.csv")
    lines = ["| round | arm | SM clock, MHz (median) | power, W (median) | samples |",
             "|---|---|---|---|---|"]
    for _, r in rows.iterrows():
        lines.append(f"| {r['round']} | {_arm_s68(r.arm)} | {r.sm_mhz_median:.0f} | "
                     f"{r.power_w_median:.0f} | {r.busy_samples} |")
    return "\n".join(lines)


def _ncu_csv(relpath: str) -> pd.DataFrame:
    """An ncu --csv metrics or --page raw export (warning lines before the header dropped):
    one row a profiled launch, a column a metric (numbers without their thousands commas)."""
    import csv
    import gzip
    path = RESULTS / relpath
    opener = gzip.open if relpath.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = [r for r in csv.reader(line for line in f if line.startswith('"'))]
    if "Metric Name" in rows[0]:  # --metrics --csv: a row a (launch, metric)
        head = rows[0]
        idx, name, value = head.index("ID"), head.index("Metric Name"), head.index("Metric Value")
        frame = pd.DataFrame([(r[idx], r[name], r[value]) for r in rows[1:]],
                             columns=["launch", "metric", "value"])
        frame = frame.pivot(index="launch", columns="metric", values="value")
    else:  # --page raw: the header, the units, then a row a launch
        frame = pd.DataFrame(rows[2:], columns=rows[0])
    return frame.apply(lambda col: pd.to_numeric(col.str.replace(",", ""), errors="coerce"))


def fwd_cut_ncu_s69() -> str:
    """The forward's grid and cut kernels on the full mask's grid tiles (16k), under ncu at the
    GPU's own clocks (three launches each, medians) and at base clocks (--set full, one
    launch): time, cycles and the L2's sectors, which the L2 request coalescer (LRC) merges
    before they reach it."""
    lines = ["| arm | ms at own clocks | SM cycles at own clocks (M) | L2 sectors at own clocks "
             "(G) | SM cycles at base (M) | L2 sectors at base (G) | L2 requests at base (M) |",
             "|---|---|---|---|---|---|---|"]
    for arm in ("grid", "cut", "grid_both"):
        boost = _ncu_csv(PROBES_S69 + f"ncu/boost_{arm}.csv").median()
        base = "| - | - | - |"
        if arm != "grid_both":
            raw = _ncu_csv(PROBES_S69 + f"ncu/fwd_full16k_{arm}_raw.csv.gz").iloc[0]
            base = (f"| {raw['sm__cycles_elapsed.max'] / 1e6:.2f} | "
                    f"{raw['lts__t_sectors.sum'] / 1e9:.3f} | "
                    f"{raw['lts__t_requests.sum'] / 1e6:.0f} |")
        lines.append(f"| {arm} | {boost['gpu__time_duration.sum'] / 1e6:.2f} | "
                     f"{boost['sm__cycles_elapsed.max'] / 1e6:.2f} | "
                     f"{boost['lts__t_sectors.sum'] / 1e9:.3f} {base}")
    return "\n".join(lines)


def bwd_cut_ncu_s69() -> str:
    """ncu --set full (base clocks) of both directions' grid and cut kernels on the full mask's
    grid tiles, 16k: elapsed cycles and instructions executed."""
    lines = ["| direction | arm | elapsed cycles (M) | instructions executed (G) |",
             "|---|---|---|---|"]
    for direction in ("fwd", "bwd"):
        for arm in ("grid", "cut"):
            m = _ncu_details(PROBES_S69 + f"ncu/{direction}_{arm}_details.csv")
            lines.append(f"| {direction} | {arm} | {m['Elapsed Cycles'] / 1e6:.2f} | "
                         f"{m['Executed Instructions'] / 1e9:.3f} |")
    return "\n".join(lines)


def pytest_s69_call4() -> str:
    return _summed_counts("h200/tests/s69_call4_gluon_backward_tests.log")


def _arm_vs_arm(relpath: str, arm: str, base: str, ratio: bool = False,
                masks: tuple[str, ...] | None = None,
                name: Callable[[str], str] = _arm_s68) -> str:
    """Arm ``arm``'s median against arm ``base``'s, per cell where both ran (of ``masks``, None:
    every mask): '16k full +0.5%' (or the ratio, '0.979x'; arms as ``name`` names them from the
    labels)."""
    med = _arm_medians(relpath, name).ffa.unstack("arm")[[arm, base]].dropna()
    if masks is not None:
        med = med[med.index.get_level_values("mask").isin(masks)]
    return _cell_changes(med, arm, base, ratio)


def bwd_q_row_s69_changes() -> str:
    """The q row read before the wait against after it, cut plans."""
    return _arm_vs_arm(PROBES_S69 + "s69_QROW.csv", "plan cut", "plan cut, Q_ROW_EARLY 0")


def bwd_q_row_s69_full_vs_grid() -> str:
    """The full mask's cut arm over the grid arm, with the read before the wait and after."""
    full = lambda arm: _arm_vs_arm(PROBES_S69 + "s69_QROW.csv", arm, "plan grid",  # noqa: E731
                                   ratio=True, masks=("full",))
    return f"before the wait {full('plan cut')}; after it {full('plan cut, Q_ROW_EARLY 0')}"


def fwd_cut_cost_s69_changes() -> str:
    return _second_arm_changes(PROBES_S69 + "s69_FWDCUT.csv", _arm_s68)


def fwd_cut_ncu_s69_summary() -> str:
    """Call 4's ncu at the GPU's own clocks, cut against grid: time, cycles, the L2's sectors
    and, at base clocks, the LRC's fan-out (sectors delivered to GPCs per sector read from L2)."""
    boost = {arm: _ncu_csv(PROBES_S69 + f"ncu/boost_{arm}.csv").median()
             for arm in ("grid", "cut")}
    raw = {arm: _ncu_csv(PROBES_S69 + f"ncu/fwd_full16k_{arm}_raw.csv.gz").iloc[0]
           for arm in ("grid", "cut")}
    g, c = boost["grid"], boost["cut"]
    fan = {arm: raw[arm]["lrc__xbar2gpc_sectors_op_read.sum"]
           / raw[arm]["lrc__lts2lrc_sectors_op_read.sum"] for arm in raw}
    loaded = raw["cut"]["l1tex__m_xbar2l1tex_read_sectors_mem_global_op_tma_ld.sum"]
    return (f"time {c['gpu__time_duration.sum'] / g['gpu__time_duration.sum'] - 1:+.1%}, "
            f"SM cycles {c['sm__cycles_elapsed.max'] / g['sm__cycles_elapsed.max'] - 1:+.1%}, "
            f"L2 sectors {c['lts__t_sectors.sum'] / 1e9:.2f} G against "
            f"{g['lts__t_sectors.sum'] / 1e9:.2f} G; the SMs' TMA reads "
            f"{loaded / 1e9:.2f} G sectors in both, of which the L2 read "
            f"{raw['cut']['lts__t_sectors.sum'] / loaded:.0%} (cut) and "
            f"{raw['grid']['lts__t_sectors.sum'] / loaded:.0%} (grid); the LRC's fan-out "
            f"{fan['cut']:.2f} (cut) against {fan['grid']:.2f} (grid)")


def fwd_cut_clocks_s69_changes() -> str:
    return ", ".join(
        f"{a} {_arm_vs_arm(PROBES_S69 + 's69_FWDCUT_CLK.csv', f'plan {a}', 'plan grid')}"
        for a in ("cut", "grid_both"))
