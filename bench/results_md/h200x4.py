"""Sections on 4 H200s: the CP checks and sweeps at cp 4."""
from __future__ import annotations

import functools
import json

from bench.cp.plot import ratio_table

from ._common import (DOC_MASKS, K16, K64, KERNEL_MASKS, _ab_medians, _ab_table, _baselines,
                      _cp2_below, _cp_cells, _cut_ms, _cut_pair, _helper, _k, _kernel_tflops,
                      _magi_note, _magi_over_best, _note, _pytest_counts, _row_note, _rows,
                      _span, _vs_best, _with_unequal,
                      ab_masks_table, cp1_spread_s31, cp2_s16_summary, cp2_s16_table, cp_moves,
                      cp_only_spans, key_clock_table, timed_summary, timed_table,
                      unequal_s28_table)
from ._paths import RESULTS


# the six CP baselines, in the order the tables show them
CP_BASELINES = ("ulysses", "ring_p2p", "ring_allgather", "usp", "loongtrain", "hybrid_cp")

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
    baselines = [b for b in CP_BASELINES if b in set(table.baseline)]
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


# -- session 32: 4 H200s (nvidia-h200-x4, the first 4-GPU node lent for issue 15) -------------
# issue 15's cp 4 check at 0348a47: 16k a GPU (cp 1 and 4, every strategy and magi_unequal,
# repeat 6) with FA4 and Triton; FA4 at 64k a GPU, cp 4 (repeat 3; the call's limit cut full
# before four of its baselines). Then the interleaved A/B of Triton's dispatch on causal.
# (the 16k files as they stood, moved to cp_history when session 54 measured cp 4 again)
CP_S32 = {"fa4, 16k/GPU": "h200x4/cp_history/cp_h200x4__fa4_16k__0348a47c8426.csv",
          "triton, 16k/GPU": "h200x4/cp_history/cp_h200x4__triton_16k__0348a47c8426.csv",
          "fa4, 64k/GPU": "h200x4/cp/cp_h200x4__fa4_64k.csv"}
UNEQUAL_S32 = {tuple(run.replace("/GPU", "").split(", ")): relpath
               for run, relpath in CP_S32.items()}
AB_S32 = {name: f"h200x4/cp_ab_s32/cp_ab__triton_16k_{name}.csv"
          for name in ("cp4_causal", "cp2_causal", "cp4_full")}


def cp_s32_table() -> str:
    return cp2_s16_table(CP_S32, cp=4)


def cp_s32_summary() -> str:
    return cp2_s16_summary(CP_S32, cp_n=4)


def cp_s32_below() -> str:
    return _cp2_below(CP_S32, cp_n=4)


def cp_s32_with_unequal(files: dict[str, str] = CP_S32) -> str:
    return (f"16k: {_with_unequal(files, '16k', cp_n=4)}; "
            f"64k: {_with_unequal(files, '64k', cp_n=4)}")


def cp_s32_partial(files: dict[str, str] = CP_S32) -> str:
    """The cp 4 cells measured with fewer than the six baselines."""
    out = [f"{run.replace('/GPU', '')} {mask} {d}: {len(_baselines(v))} of {len(CP_BASELINES)} "
           f"({', '.join(sorted(_baselines(v)))})"
           for run, relpath in files.items()
           for (mask, cp, d), v in sorted(_cp_cells(relpath).items())
           if cp == 4 and len(_baselines(v)) < len(CP_BASELINES)]
    return "; ".join(out) or "none"


def cp_s32_docs(files: dict[str, str] = CP_S32) -> str:
    """magi / the best baseline on the three document masks at cp 4, per run."""
    out = []
    for run, relpath in files.items():
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
    return _ab_table(AB_S32, "magi (min_heap)")


# -- session 33: 4 H200s, Triton at 64k a GPU (cp 4) and Triton's causal 16k cell again --------
# Triton 64k a GPU, cp 4, at 8d6b466 (session 32's code and TIE_ORDER): three calls' rows in one
# file (document masks; causal and full, cut by the call's limit before HybridCP's and
# LoongTrain's full; then those two). With session 32's three runs: issue 15's cp 4 table but
# FA4 64k full's four missing baselines.
CP_S33 = dict(CP_S32, **{"triton, 64k/GPU": "h200x4/cp/cp_h200x4__triton_64k.csv"})
UNEQUAL_S33 = {("triton", "64k"): CP_S33["triton, 64k/GPU"]}
# the Triton 16k causal cp 4 cell measured again after TIE_ORDER (magi on balanced_runs)
CAUSAL16K_S33 = "h200x4/cp_s33/cp_h200x4__triton_16k_causal_again.csv"


def cp_s33_table() -> str:
    return cp2_s16_table(CP_S33, cp=4)


def cp_s33_summary() -> str:
    return cp2_s16_summary(CP_S33, cp_n=4)


def cp_s33_below() -> str:
    return _cp2_below(CP_S33, cp_n=4)


def cp_s33_with_unequal() -> str:
    return cp_s32_with_unequal(CP_S33)


def cp_s33_partial() -> str:
    return cp_s32_partial(CP_S33)


def cp_s33_docs() -> str:
    return cp_s32_docs(CP_S33)


def unequal_s33_table() -> str:
    return unequal_s28_table(UNEQUAL_S33)


def causal16k_again_s33() -> str:
    """Triton 16k a GPU, causal, cp 4: magi / the best baseline in session 32's run and again
    in this one (after TIE_ORDER), with the dispatch magi's row names and magi's own timing of
    its whole forward at key time (cut_ms)."""
    out = []
    for label, relpath in (("s32", CP_S32["triton, 16k/GPU"]), ("s33", CAUSAL16K_S33)):
        cells = _cp_cells(relpath)
        own, _ = _cut_ms(relpath, "causal", 4, "fwd")
        out.append(f"{label} (dispatch={_row_note(relpath, 'magi', 'causal', 4, 'dispatch')}, own "
                   f"key-time fwd {own:.1f} ms): "
                   + ", ".join(f"{d} {_vs_best(cells['causal', 4, d])}" for d in ("fwd", "bwd")))
    return "; ".join(out)


def ab_s33_table() -> str:
    """Triton's causal 16k cp 4 cell interleaved at HEAD (balanced_runs): magi, Ulysses and
    Ring AllGather over four rounds."""
    return _ab_table({"cp4_causal": "h200x4/cp_s33/cp_ab__triton_16k_cp4_causal.csv"}, "magi")


# -- session 37: 4 H200s (asked for 4 H100s): where cp 4 full_document's step goes, per rank
# (scripts/device/magi_profile_cp.py, Triton, 16k a GPU), and balance="timed" against the
# model's cuts (cp_ab.py, 4 rounds)
PROFILE_S37 = "h200x4/cp_s37/magi_profile_cp4_triton.csv"
TIMED_CP4_S37 = "h200x4/cp_s37/cp_ab_timed_cp4.csv"
PROFILE_PIECES = ("kernel_fwd", "kernel_bwd", "runner_bwd", "runtime_bwd", "clock_bwd",
                  "group_reduce", "fused_kv")


def profile_s37_table() -> str:
    """ms per rank of each piece (the local kernel alone on the rank's fused mask, the backward
    timed three ways, the reduce and the fused buffer's build)."""
    rows = _helper(PROFILE_S37)
    t = rows.pivot_table(index=["mask", "piece"], columns="rank", values="ms")
    ranks = list(t.columns)
    lines = ["| mask | piece | " + " | ".join(f"rank {r}" for r in ranks) + " |",
             "|---|---|" + "---|" * len(ranks)]
    for mask in dict.fromkeys(rows["mask"]):
        for piece in PROFILE_PIECES:
            lines.append(f"| {mask} | {piece} | "
                         + " | ".join(f"{t.loc[(mask, piece), r]:.2f}" for r in ranks) + " |")
    return "\n".join(lines)


def timed_cp4_s37_ab() -> str:
    return ab_masks_table(TIMED_CP4_S37)


# -- session 54: issue 15's cp 4 cells at HEAD (573b8d5) on one node of 4 H200s, both kernels,
# every strategy and magi_unequal, the runner's rounds 3, cp 4 alone (the node's cp 1 rows stay
# session 32's); then FA4's 64k full at cp 2 on GPUs 0-1 of the same node, rounds 3
S54 = "h200x4/cp_s54"
# (moved to cp_history when session 59 measured cp 4 again)
CP4_S54 = {f"{b}, 16k/GPU": f"h200x4/cp_history/cp_h200x4__{b}_16k_cp4__573b8d5d59ae.csv"
           for b in ("fa4", "triton")}
FA4_64K_FULL_S54 = f"{S54}/fa4_64k_full_cp2__573b8d5.csv"


CP4_S54_SPANS = cp_only_spans(CP4_S54, 4)


def cp4_s54_moves() -> str:
    """The cp 4 cells whose magi / best baseline crossed 1.0 since session 32 (same node kind,
    0348a47)."""
    return cp_moves(CP4_S54, {run: CP_S32[run] for run in CP4_S54}, 4)


def fa4_64k_full_s54() -> str:
    """FA4 64k full at cp 2: magi / the best baseline to four places (its name), each
    direction, and the rounds the rows report."""
    cells = _cp_cells(FA4_64K_FULL_S54)
    out = []
    for d in ("fwd", "bwd"):
        base = _baselines(cells["full", 2, d])
        out.append(f"{d} {_magi_over_best(cells['full', 2, d]):.4f} ({max(base, key=base.get)})")
    # a row cut short by the call's time limit names the rounds it kept (rounds_done=k)
    cut = _helper(FA4_64K_FULL_S54).message.str.contains("rounds_done=").any()
    return ", ".join(out) + (" (cut short: see rounds_done)" if cut else " (all 3 rounds)")


def cp4_s54_docs() -> str:
    """magi / the best baseline over the document masks' cp 4 cells of both kernels, per
    direction (range)."""
    out = []
    for d in ("fwd", "bwd"):
        ratios = [_magi_over_best(v) for relpath in CP4_S54.values()
                  for (mask, cp, dd), v in _cp_cells(relpath).items()
                  if cp == 4 and dd == d and mask in DOC_MASKS and "magi" in v]
        out.append(f"{d} {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} cells")
    return ", ".join(out)


# -- session 59: issue 15's cp 4 cells again on one node of 4 H200s, magi_timed beside magi
# and the six baselines, both kernels, the runner's rounds 3 (these runs replace session 54's in
# results/h200x4/cp/*_16k_cp4.csv)
S59 = "h200x4/cp_s59/"
TIMED_CP4_S59 = {"triton, 16k/GPU": (S59 + "tri16kcp4__1.csv",),
                 "fa4, 16k/GPU": (S59 + "fa416kcp4__1.csv",)}


def timed_cp4_s59_table() -> str:
    return timed_table(TIMED_CP4_S59, 4, build=True)


def timed_cp4_s59_summary() -> str:
    return timed_summary(TIMED_CP4_S59, 4)


# -- session 60: FA4 full at cp 4 (16k a GPU), magi against Ulysses interleaved (cp_ab.py) in two
# launches whose keys chose differently: the first cut the backward (timed 1.2% faster than
# whole), the second kept it whole (and also timed both the key's way: --clock both)
S60 = "h200x4/cp_s60/"
CUT_BWD_CP4_S60 = {"cut backward kept": S60 + "ab_fa4_cutbwd",
                   "whole kept": S60 + "ab_fa4_whole_key"}


def cut_bwd_cp4_s60() -> str:
    """Per launch: the backward cut magi's key kept, its key-time whole / cut backward (ms), and
    the interleaved runner-clock medians of magi and Ulysses (ms)."""
    lines = ["| launch | key: bwd whole / cut ms | magi bwd ms | ulysses bwd ms | ulysses / magi |",
             "|---|---|---|---|---|"]
    for label, stem in CUT_BWD_CP4_S60.items():
        med = _ab_medians(stem + "__cp_ab.csv")
        whole, cut = _cut_pair(_magi_note(stem + ".log", "full", "cut_ms"), "bwd")
        magi, ulysses = med["full", "bwd", "magi"], med["full", "bwd", "ulysses"]
        lines.append(f"| {label} | {whole:.1f} / {cut:.1f} | {magi:.1f} | "
                     f"{ulysses:.1f} | {ulysses / magi:.3f} |")
    return "\n".join(lines)


def key_clock_cp4_s60() -> str:
    return key_clock_table({"fa4, 16k/GPU, cp 4": S60 + "ab_fa4_whole_key__cp_ab.csv"})


# -- session 61: the cut backward at cp 4 under both clocks (cp_ab.py --clock both: magi,
# magi_whole, magi_cut_bwd and Ulysses interleaved, each block timed the runner's way and the
# key's way in turn), Triton and FA4, 16k a GPU
S61 = "h200x4/cp_s61/"
CUT_BWD_CP4_S61 = {"triton, 16k/GPU, cp 4": S61 + "cbtri", "fa4, 16k/GPU, cp 4": S61 + "cbfa4"}


def cut_bwd_cp4_s61() -> str:
    """Per run and mask: magi's key-time whole / cut backward and what it kept; the cut
    backward's gain over the whole one under the runner's clock and the key's (interleaved
    medians); Ulysses over magi under each clock (> 1: magi faster)."""
    lines = ["| run | mask | magi's key: bwd whole / cut ms | directions cut | "
             "cut faster by: runner | cut faster by: key clock | ulysses / magi: runner | "
             "ulysses / magi: key clock |",
             "|---|---|---|---|---|---|---|---|"]
    for run, stem in CUT_BWD_CP4_S61.items():
        med = _ab_medians(stem + "__cp_ab.csv")
        for mask in dict.fromkeys(m for m, _, _ in med):
            whole, cut = _cut_pair(_magi_note(stem + ".log", mask, "cut_ms"), "bwd")
            kept = _magi_note(stem + ".log", mask, "cut")
            gains = [1 - med[mask, "bwd", f"magi_cut_bwd{c}"] / med[mask, "bwd", f"magi_whole{c}"]
                     for c in ("", "@key")]
            over = [med[mask, "bwd", f"ulysses{c}"] / med[mask, "bwd", f"magi{c}"]
                    for c in ("", "@key")]
            lines.append(f"| {run} | {mask} | {whole:.1f} / {cut:.1f} | {kept} | {gains[0]:.1%} | "
                         f"{gains[1]:.1%} | {over[0]:.3f} | {over[1]:.3f} |")
    return "\n".join(lines)


def fwd_cut_cp4_s61() -> str:
    """The forward at cp 4 in the same launches: magi's key-time cut gain, what it kept, and
    magi_whole over magi in the bench (> 1: magi's choice faster), Ulysses over magi."""
    parts = []
    for run, stem in CUT_BWD_CP4_S61.items():
        med = _ab_medians(stem + "__cp_ab.csv")
        for mask in dict.fromkeys(m for m, _, _ in med):
            whole, cut = _cut_pair(_magi_note(stem + ".log", mask, "cut_ms"), "fwd")
            kept = "cut" if "fwd" in _magi_note(stem + ".log", mask, "cut") else "whole"
            whole_over, ulysses_over = (med[mask, "fwd", s] / med[mask, "fwd", "magi"]
                                        for s in ("magi_whole", "ulysses"))
            parts.append(f"{run.split(',')[0]} {mask}: key {1 - cut / whole:.1%} ({kept}), "
                         f"magi_whole / magi {whole_over:.3f}, ulysses / magi {ulysses_over:.3f}")
    return "; ".join(parts)


def pytest_s61() -> str:
    """The NCCL exactness / no-sync tests (every overlap mode, two GPUs a backend) and the
    plan's GPU tests at the session's HEAD."""
    logs = {"NCCL, Triton": "pytest_nccl_triton", "NCCL, FA4": "pytest_nccl_fa4",
            "plan / no-sync, one GPU": "pytest_plan_gpu"}
    return "; ".join(f"{label}: {_pytest_counts(f'h200x4/tests/{stem}_1226427e1586.log')}"
                     for label, stem in logs.items())
