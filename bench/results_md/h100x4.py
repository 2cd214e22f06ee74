"""Sections on 4 H100s: MagiAttention against the CP baselines at cp 4 (issue 15)."""
from __future__ import annotations

import re

import pandas as pd

from ._common import (_ab_medians, _baselines, _cp2_below, _cp_cells, _cp_wins, _cut_ms, _files,
                      _helper, _magi_over_best, _pytest_counts, _row_note, _with_unequal,
                      ab_masks_table, cp2_s16_summary, cp2_s16_table, cp_moves, cp_only_spans,
                      cp_only_table, cp_only_wins)
from ._paths import RESULTS

# -- session 34: 4 H100s (asked for 4 H200s) at e5be184: 16k a GPU with the runner's interleaved
# timing (hardware.rounds=3), both kernels; FA4 64k a GPU on full (rounds 1, repeat 3), the cell
# whose baselines session 33's 4 H200s did not reach
CP4_S34 = {"fa4, 16k/GPU": "h100x4/cp_s34/cp_h100x4__fa4_16k_cp4_rounds3.csv",
           "triton, 16k/GPU": "h100x4/cp_s34/cp_h100x4__triton_16k_cp4_rounds3.csv",
           "fa4, 64k/GPU": "h100x4/cp_s34/cp_h100x4__fa4_64k_full.csv"}


def cp4_s34_table() -> str:
    return cp_only_table(CP4_S34, 4)


def cp4_s34_summary() -> str:
    return cp_only_wins(CP4_S34, 4)


def cp4_s34_below() -> str:
    return _cp2_below(CP4_S34, cp_n=4)


# -- session 37: 4 H100s: each cp 4 rank's mask alone on each GPU (rank_mask_probe.py
# --cp-size 4, the four GPUs at once, Triton, 16k a GPU), and issue 15's cp 4 check at 16k with
# the Triton kernel, magi with the model's cuts and with balance="timed" (magi_timed), rounds 3
PROBE_S37 = tuple(f"h100x4/cp_s37/probe_gpu{i}.csv" for i in range(4))
CP4_S37 = "h100x4/cp_s37/cp_h100x4__triton_16k_cp4_rounds3.csv"


def probe_s37_table() -> str:
    """ms of each rank's mask (rows) on each GPU (columns), the library's default launches."""
    frames = [_helper(relpath).assign(gpu=gpu) for gpu, relpath in enumerate(PROBE_S37)]
    t = pd.concat(frames).pivot_table(index=["mask", "direction", "rank", "pairs"],
                                      columns="gpu", values="ms")
    lines = ["| mask | dir | rank | tile pairs | " + " | ".join(f"GPU {g}" for g in t.columns)
             + " |", "|---|---|---|---|" + "---|" * len(t.columns)]
    for (mask, d, rank, pairs), row in t.iterrows():
        lines.append(f"| {mask} | {d} | {rank} | {pairs} | "
                     + " | ".join(f"{v:.2f}" for v in row) + " |")
    return "\n".join(lines)


def cp4_s37_table() -> str:
    """magi and magi_timed / the best baseline, per cell."""
    lines = ["| mask | dir | magi / best | magi_timed / best | best |", "|---|---|---|---|---|"]
    for (mask, cp, d), v in sorted(_cp_cells(CP4_S37).items()):
        base = _baselines(v)
        name = max(base, key=base.get)
        lines.append(f"| {mask} | {d} | {_magi_over_best(v):.3f} | "
                     f"{_magi_over_best(v, 'magi_timed'):.3f} | {name} {base[name]:.0f} |")
    return "\n".join(lines)


def cp4_s37_summary() -> str:
    return "; ".join(f"{k}: {won} of {n} cells >= the best baseline" for k, (won, n) in
                     ((k, _cp_wins(CP4_S37, k, cp_n=4)) for k in ("magi", "magi_timed")))


def cp4_s37_moves() -> str:
    """Cells where magi_timed / best differs from magi / best by more than 1%, and each
    variant's cells below the best baseline."""
    cells = sorted(_cp_cells(CP4_S37).items())
    moved = [f"{mask} {d} {_magi_over_best(v):.3f} -> {_magi_over_best(v, 'magi_timed'):.3f}"
             for (mask, _, d), v in cells
             if abs(_magi_over_best(v, "magi_timed") - _magi_over_best(v)) > 0.01]
    below = {k: [f"{mask} {d} {_magi_over_best(v, k):.3f}" for (mask, _, d), v in cells
                 if _magi_over_best(v, k) < 1.0] for k in ("magi", "magi_timed")}
    return (f"moved by more than 1%: {', '.join(moved)}; below the best baseline: magi "
            f"{', '.join(below['magi'])}; magi_timed {', '.join(below['magi_timed'])}")


# -- session 38: FA4 at cp 4, 16k a GPU, magi with balance="timed" (4 H100s, code at 5ec87f8,
# one plain run); then the interleaved A/B of causal after every layout got one timing recipe
CP4_S38 = {"fa4, 16k/GPU": "h100x4/cp_s38/cp_h100x4__fa4_16k_cp4.csv"}
RECIPE_S38 = "h100x4/cp_s38/cp_ab_causal_cp4_recipe.csv"
RECIPE_S38_LOG = "h100x4/cp_s38/cp_ab_causal_cp4_recipe.log"


def cp4_s38_table() -> str:
    return cp_only_table(CP4_S38, 4)


def cp4_s38_summary() -> str:
    return cp_only_wins(CP4_S38, 4) + "; below: " + _cp2_below(CP4_S38, cp_n=4)


def _balance_ms(note: str) -> list[float]:
    """The slowest rank's ms of each layout in a row's ``balance_ms=`` note, in order."""
    return [float(pair.split("/")[0]) for pair in note.split(",")]


def recipe_s38() -> str:
    """The causal cell's layouts before (the plain run's row) and after the one-recipe timing
    (the A/B's printed note), and magi / Ulysses in the A/B."""
    before = _balance_ms(_row_note(CP4_S38["fa4, 16k/GPU"], "magi", "causal", 4, "balance_ms"))
    log = (RESULTS / RECIPE_S38_LOG).read_text()
    after = _balance_ms(re.search(r"balance_ms=([^;\s]*)", log)[1])
    med = _ab_medians(RECIPE_S38)
    ratio = {d: med["causal", d, "ulysses"] / med["causal", d, "magi"] for d in ("fwd", "bwd")}
    fmt = lambda ms: ", ".join(f"{x:.1f}" for x in ms)  # noqa: E731
    return (f"slowest rank's kernel ms of each layout, before: {fmt(before)}; after: "
            f"{fmt(after)}; in the A/B magi / Ulysses speed forward {ratio['fwd']:.3f}, "
            f"backward {ratio['bwd']:.3f}")


# -- session 47: issue 15's 16k table at HEAD (fe96b2b) at cp 1, 2 and 4 in one launch a kernel
# and mask group on one node of 4 H100s (asked for 4 H200s), one hardware queue (bench.cp's
# default), the runner's rounds 3; and the early_start A/B with the key built for it (GPUs 0-1)
# (the files as they stood, moved to cp_history when session 53 measured cp 4 again)
CP_S47 = {f"{b}, 16k/GPU": tuple(f"h100x4/cp_history/cp_h100x4__{b}_16k_{part}__fe96b2b5cb58.csv"
                                 for part in ("doc", "fc")) for b in ("fa4", "triton")}
EARLY_AB_S47 = "h100x4/cp_ab_s47/cp_ab__triton_16k_cp2_early.csv"
PYTEST_S47 = {kind: f"h100x4/cp_ab_s47/pytest_{kind}.txt" for kind in ("nccl", "kernel")}
# session 38's FA4 cp 4 run (8 hardware queues then) beside session 47's (one queue)
QUEUES_S47 = {"session 38, 8 queues": CP4_S38["fa4, 16k/GPU"],
              "session 47, 1 queue": CP_S47["fa4, 16k/GPU"][0]}


def cp_s47_table(cp_n: int) -> str:
    return cp2_s16_table(CP_S47, cp=cp_n)


def cp_s47_summary(cp_n: int) -> str:
    """cp 1's magi / single_gpu range and the cp ``cp_n`` cells >= the best baseline, with
    magi_unequal (opt-in) counted as magi's too."""
    return (cp2_s16_summary(CP_S47, cp_n=cp_n) + "; counting magi_unequal: "
            + _with_unequal(CP_S47, "16k", cp_n=cp_n))


def cp_s47_below(cp_n: int) -> str:
    return _cp2_below(CP_S47, cp_n=cp_n)


def early_ab_s47_table() -> str:
    return ab_masks_table(EARLY_AB_S47)


def pytest_s47(kind: str) -> str:
    return _pytest_counts(PYTEST_S47[kind])


def queues_s47() -> str:
    """FA4 full_document at cp 4: magi's and Ulysses' ms per direction in each run."""
    out = []
    for run, relpath in QUEUES_S47.items():
        cell = _files((relpath,))
        cell = cell[(cell.cp_size == 4) & (cell["mask"] == "full_document")].set_index(
            ["kernel", "direction"]).runtime_ms
        out.append(f"{run}: " + ", ".join(
            f"{d} magi {cell['magi', d]:.2f} / ulysses {cell['ulysses', d]:.2f} ms = "
            f"{cell['ulysses', d] / cell['magi', d]:.3f}" for d in ("fwd", "bwd")))
    return "; ".join(out)


# -- session 53: issue 15's cp 4 cells at HEAD (94814e7) on one node of 4 H100s (asked for 4
# H200s), both kernels, every strategy and magi_unequal, the runner's rounds 3, cp 4 alone (the
# node's cp 1 and 2 rows stay session 47's; the 2-H200 table has both at HEAD)
CP4_S53 = {f"{b}, 16k/GPU": f"h100x4/cp/cp_h100x4__{b}_16k_cp4.csv" for b in ("fa4", "triton")}


CP4_S53_SPANS = cp_only_spans(CP4_S53, 4)


def cp4_s53_moves() -> str:
    """The cp 4 cells whose magi / best baseline crossed 1.0 since session 47 (same node kind,
    fe96b2b)."""
    return cp_moves(CP4_S53, CP_S47, 4)


# -- session 56 (9588f24): side_backward against magi at cp 4 on one node of 4 H100s (asked
# for 4 H200s), full and causal, 16k a GPU, both kernels, with Ulysses and Ring AllGather (the
# cells' best baselines in sessions 53 and 54), the runner's rounds 3
SIDE_BWD_S56 = {f"{b}, 16k/GPU": f"h100x4/cp_s56/side_bwd/cp_h100x4__{b}_16k_cp4.csv"
                for b in ("fa4", "triton")}


def side_bwd_s56_table() -> str:
    """Per cell: magi and magi_side_bwd over the best baseline, each direction, and what each
    key chose (its cut; its own backward timing whole / cut, ms, the slowest rank's)."""
    lines = ["| run | mask | fwd: magi / best; side / best (best) | bwd: magi / best; side / best "
             "(best) | key's cut, bwd whole / cut ms: magi; side |", "|---|---|---|---|---|"]
    for run, relpath in SIDE_BWD_S56.items():
        cells = _cp_cells(relpath)
        for mask in ("full", "causal"):
            ratios = []
            for d in ("fwd", "bwd"):
                v = cells[mask, 4, d]
                base = _baselines(v)
                name = max(base, key=base.get)
                ratios.append(f"{_magi_over_best(v):.3f}; {_magi_over_best(v, 'magi_side_bwd'):.3f}"
                              f" ({name} {base[name]:.0f})")
            keys = "; ".join(
                f"{_row_note(relpath, k, mask, 4, 'cut')}, "
                + "{:.1f} / {:.1f}".format(*_cut_ms(relpath, mask, 4, "bwd", k))
                for k in ("magi", "magi_side_bwd"))
            lines.append(f"| {run} | {mask} | {ratios[0]} | {ratios[1]} | {keys} |")
    return "\n".join(lines)


def side_bwd_s56_gain() -> str:
    """The side stream's effect on the key's own cut backward: magi_side_bwd's cut / whole
    against magi's, per cell (below 1: the cut faster than whole)."""
    parts = []
    for run, relpath in SIDE_BWD_S56.items():
        for mask in ("full", "causal"):
            r = [c / w for w, c in (_cut_ms(relpath, mask, 4, "bwd", k)
                                    for k in ("magi", "magi_side_bwd"))]
            parts.append(f"{run.split(',')[0]} {mask} {r[0]:.3f} -> {r[1]:.3f}")
    return "; ".join(parts)


def side_bwd_s56_bwd_span() -> str:
    """magi / the best baseline over the four backward cells of the launches."""
    ratios = [_magi_over_best(_cp_cells(relpath)[mask, 4, "bwd"])
              for relpath in SIDE_BWD_S56.values() for mask in ("full", "causal")]
    return f"{min(ratios):.3f}-{max(ratios):.3f}"
