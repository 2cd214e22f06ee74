"""Sections on 2 H100s: MagiAttention against the CP baselines."""
from __future__ import annotations

import re

import pandas as pd

from ._common import (DOC_MASKS, UNEQUAL_S28, _ab_medians, _cp2_below, _cp_cells, _files, _fit_ms,
                      _cut_ms, _magi_over_best, _profiler_rows, _pytest_counts, _summed_counts,
                      _tf_cells, _variant_ratios, _vs_best, cp2_s16_summary, cp2_s16_table,
                      cp_only_table, cp_only_wins)
from ._paths import RESULTS
from .h200x2 import CP_S33 as CP_S33_H200X2
from .h200x2 import _forward_prologues, _steady_prologue, switch_ab_table


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
TRITON_DOCS_S26 = "h100x2/cp/cp_h100x2__triton_16k_docs_s26.csv"
FULL_OR_CAUSAL = ("full_16k", "causal_16k", "full_docs_16384", "causal_docs_16384")


def persistent_s26() -> str:
    """Persistent / one-program-per-item forward time per mask, per run."""
    return _variant_ratios(PERSISTENT_S26, "fwd_persistent", "fwd_per_item", FULL_OR_CAUSAL)


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
    coef, fitted = _fit_ms(rows, ["pairs", "partial", "tiles"])
    ratio = rows.ms.to_numpy() / fitted
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
SPLIT_S27 = {"fa4": "h100x2/cp_ab_s27/cp_h100x2__fa4_16k_docs_split_fwd.csv",
             "triton": "h100x2/cp_ab_s27/cp_h100x2__triton_16k_docs_split_fwd.csv"}


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


def cp_s28_table() -> str:
    return cp2_s16_table(CP_S28)


def cp_s28_summary() -> str:
    return cp2_s16_summary(CP_S28)


def cp_s28_below() -> str:
    return _cp2_below(CP_S28)


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


# -- session 34: 2 H100s (asked for 2 H200s), 16k a GPU, cp 2, the runner's interleaved timing --
# (hardware.rounds=3: every strategy of a cell built first, then timed in turn, three rounds,
# each row the median) at b364ea8 (the cut backward sends its reduce first); then the A/B of the
# cut backward's two orders on Triton
CP_S34 = {f"{b}, 16k/GPU": f"h100x2/cp_s34/cp_h100x2__{b}_16k_cp2_rounds3.csv"
          for b in ("fa4", "triton")}
CUT_ORDER_S34 = "h100x2/cp_s34/cut_bwd_order__triton_16k.csv"


def cp2_s34_table() -> str:
    return cp_only_table(CP_S34, 2)


def cp2_s34_summary() -> str:
    return cp_only_wins(CP_S34, 2)


def cp2_s34_below() -> str:
    return _cp2_below(CP_S34)


def cut_ms_s34() -> str:
    """The key's own timing of the backward on the document masks (slowest rank, ms, whole /
    cut): this run (cut reduce first) and session 33's 2 H200s (reduce last), cut / whole."""
    lines = ["| run | mask | s34 H100 whole / cut (cut / whole) | s33 H200 whole / cut (cut / whole) |",
             "|---|---|---|---|"]
    for run in CP_S34:
        for mask in DOC_MASKS:
            cols = []
            for relpath in (CP_S34[run], CP_S33_H200X2[run]):
                whole, cut = _cut_ms(relpath, mask, 2, "bwd")
                cols.append(f"{whole:.2f} / {cut:.2f} ({cut / whole:.3f})")
            lines.append(f"| {run.split(',')[0]} | {mask} | {cols[0]} | {cols[1]} |")
    return "\n".join(lines)


def cut_order_s34() -> str:
    """The cut backward's two orders interleaved (Triton, 16k a GPU, cp 2): median ms of the
    rounds, last / first, and the rounds' spread of each."""
    frame = pd.read_csv(RESULTS / CUT_ORDER_S34)
    lines = ["| mask | reduce first (ms) | reduce last (ms) | last / first | rounds, min-max first "
             "/ last |", "|---|---|---|---|---|"]
    for mask, cell in frame.groupby("mask", sort=False):
        ms = {o: cell[cell.order == o].ms for o in ("reduce_first", "reduce_last")}
        first, last = ms["reduce_first"].median(), ms["reduce_last"].median()
        spread = " / ".join(f"{m.min():.2f}-{m.max():.2f}" for m in ms.values())
        lines.append(f"| {mask} | {first:.3f} | {last:.3f} | {last / first:.3f} | "
                     f"{len(ms['reduce_first'])}, {spread} |")
    return "\n".join(lines)


def pytest_nccl_s34() -> str:
    return _pytest_counts("h100x2/cp_s34/nccl_cut_bwd.log")


# -- session 35: Triton 16k cp 2 again with the Gluon backward's head chunks (every strategy's
# local kernel), the runner and rounds as in session 34
CP_S35 = {"triton, 16k/GPU, session 34": CP_S34["triton, 16k/GPU"],
          "triton, 16k/GPU, session 35": "h100x2/cp_s35/cp_h100x2__triton_16k_cp2_rounds3.csv"}


def cp2_s35_table() -> str:
    return cp_only_table(CP_S35, 2)


def cp2_s35_summary() -> str:
    return cp_only_wins(CP_S35, 2)


CP_S36 = {"triton, 16k/GPU, session 35": CP_S35["triton, 16k/GPU, session 35"],
          "triton, 16k/GPU, session 36": "h100x2/cp_s36/cp_h100x2__triton_16k_cp2_docs_rounds3.csv"}


def cp2_s36_table() -> str:
    """The two document masks still below HybridCP, again after session 36's changes."""
    return cp_only_table(CP_S36, 2)


# -- session 37: the Gluon kernels read the fused KV buffer's K and V halves in place; the same
# A/B (cp_ab.py, Triton, 16k a GPU, cp 2, 4 rounds) with the package before the change on
# PYTHONPATH, then after, on one 2 x H100 node
STRIDED_S37 = {"before": "h100x2/cp_s37/cp_ab_old.csv", "after": "h100x2/cp_s37/cp_ab_new.csv"}


def strided_s37_ab() -> str:
    old, new = (_ab_medians(STRIDED_S37[k]) for k in ("before", "after"))
    lines = ["| mask | dir | magi ms before | after | before / after | magi / HybridCP speed "
             "before | after |", "|---|---|---|---|---|---|---|"]
    for mask, d in dict.fromkeys((m, d) for m, d, _ in new):
        a, b = old[mask, d, "magi"], new[mask, d, "magi"]
        lines.append(f"| {mask} | {d} | {a:.3f} | {b:.3f} | {a / b:.3f} | "
                     f"{old[mask, d, 'hybrid_cp'] / a:.3f} | {new[mask, d, 'hybrid_cp'] / b:.3f} |")
    return "\n".join(lines)


# -- session 38: issue 15's cp 2 table with FA4 and the benchmark's magi timing its balance
# (balance: timed, session 37), 2 H100s (asked for 2 H200s), code at 5ec87f8
CP_S38 = {"fa4, 16k/GPU, rounds 3": "h100x2/cp_s38/cp_h100x2__fa4_16k_cp2_rounds3.csv",
          "fa4, 64k/GPU, document masks": "h100x2/cp_s38/cp_h100x2__fa4_64k_cp2_docs.csv",
          "fa4, 64k/GPU, full and causal": "h100x2/cp_s38/cp_h100x2__fa4_64k_cp2_full_causal.csv"}


def cp2_s38_table() -> str:
    return cp_only_table(CP_S38, 2)


def cp2_s38_summary() -> str:
    return cp_only_wins(CP_S38, 2)


def cp2_s38_below() -> str:
    return _cp2_below(CP_S38)


def pytest_nccl_s38() -> str:
    return _pytest_counts("h100x2/cp_s38/pytest_nccl_timed_triton.log")


# -- session 39: Triton 16k cp 2 document masks after PackGQA (2 H100s, rounds 3) --------------
CP_S39 = {"triton, 16k/GPU, rounds 3": "h100x2/cp_s39/cp_h100x2__triton_16k_cp2_docs_rounds3.csv",
          "triton, 16k/GPU, rounds 3, five masks (a later call)":
          "h100x2/cp_s39/cp_h100x2__triton_16k_cp2_rounds3.csv"}
CP_S36_SAME = {"triton, 16k/GPU, rounds 3 (session 36)":
               "h100x2/cp_s36/cp_h100x2__triton_16k_cp2_docs_rounds3.csv"}


def cp2_s39_table() -> str:
    return cp_only_table({**CP_S39, **CP_S36_SAME}, 2)


def cp2_s39_summary() -> str:
    return cp_only_wins({**CP_S39, **CP_S36_SAME}, 2)


def cp2_s39_below() -> str:
    return _cp2_below(CP_S39)


def pytest_nccl_s39() -> str:
    return _pytest_counts("h100x2/cp_s39/pytest_plan_nccl_triton.log")


# -- session 44: the own KV's copy on a strided grid (copy_programs_per_sm) and the received
# keys' dK|dV gathered by one row kernel (one_gather, removed after this run), 2 H100s
SWITCH_AB_S44 = {"H100, copy grid / one gather": "h100x2/cp_s44/switch_ab_grid.csv"}
TRACE_S44 = {"one_copy": "h100x2/cp_s44/trace/trace_causal_document_triton_one_copy_rank{}.json.gz",
             "copy grid 8 + one gather": "h100x2/cp_s44/trace/trace_causal_document_triton_"
                                         "one_copy_copy_programs_per_sm8_one_gather_rank{}.json.gz"}
PYTEST_S44 = "h100x2/cp_s44/pytest_nccl_triton.txt"


def switch_ab_s44_table() -> str:
    return switch_ab_table(SWITCH_AB_S44)


def trace_s44_prologues() -> str:
    """Each trace's steady forward prologue per rank, and the kernels in it (us)."""
    short = {"_copy_rows_pair_kernel": "copy", "_gather_rows_kernel": "gather",
             "ncclDevKernel_SendRecv": "nccl"}
    out = []
    for label, pattern in TRACE_S44.items():
        for rank in (0, 1):
            steady, _, between = _steady_prologue(pattern.format(rank))
            parts = ", ".join(f"{short[name]} {e['dur']:.0f}" for e in between
                              for name in short if e["name"].startswith(name))
            out.append(f"{label}, rank {rank}: {steady:.0f} us ({parts})")
    return "; ".join(out)


def pytest_nccl_s44() -> str:
    return _pytest_counts(PYTEST_S44)


# -- session 45: where the cast's NCCL kernel waits in the forward's prologue (the own KV's copy
# by a row kernel or by the copy engines; 8, 32 or 1 hardware queues), 2 H100s
SWITCH_AB_S45 = {"H100, 8 queues": "h100x2/cp_s45/switch_ab_grid.csv",
                 "H100, 1 queue": "h100x2/cp_s45/switch_ab_grid_conn1.csv"}
_TRACE_S45 = "h100x2/cp_s45/trace/trace_causal_document_triton_{}rank{{}}{}.json.gz"
TRACE_S45 = {"8 queues, copy kernel": _TRACE_S45.format("", ""),
             "8 queues, pair_gather": _TRACE_S45.format("pair_gather_", ""),
             "8 queues, copy engine": _TRACE_S45.format("copy_engine_", ""),
             "32 queues, copy kernel": _TRACE_S45.format("", "_conn32"),
             "1 queue, copy kernel": _TRACE_S45.format("", "_conn1"),
             "1 queue, copy engine": _TRACE_S45.format("copy_engine_", "_conn1")}
CONN_S45 = {kernel: {conn: f"h100x2/cp_s45/cp_{kernel}_16k_doc__conn{conn}.csv" for conn in "81"}
            for kernel in ("triton", "fa4")}
PYTEST_S45 = {"switches": "h100x2/cp_s45/pytest_nccl_switches_triton.txt",
              "copy_engine": "h100x2/cp_s45/pytest_copy_engine_call2.txt",
              "copy_engine_fixed": "h100x2/cp_s45/pytest_copy_engine_call3.txt"}
_OWN_COPY = ("_copy_rows_pair_kernel", "Memcpy DtoD")


def trace_s45_prologues() -> str:
    """Per trace and rank, the shorter of the two prologues of the traced step (the other can be
    host-bound under the profiler), with when the cast's NCCL kernel started and when the own
    KV's copy ended in it (us from the prologue's start)."""
    lines = ["| trace | rank | prologue us | NCCL starts at | own copy ends at | NCCL us |",
             "|---|---|---|---|---|---|"]
    for label, pattern in TRACE_S45.items():
        for rank in (0, 1):
            _, gaps = _forward_prologues(pattern.format(rank), ("kernel", "gpu_memcpy"))
            gap, between = min(gaps, key=lambda p: p[0])
            start = min(e["ts"] for e in between)
            nccl = next(e for e in between if e["name"].startswith("ncclDevKernel"))
            copy_end = max(e["ts"] + e["dur"] for e in between if e["name"].startswith(_OWN_COPY))
            lines.append(f"| {label} | {rank} | {gap:.0f} | {nccl['ts'] - start:.0f} | "
                         f"{copy_end - start:.0f} | {nccl['dur']:.0f} |")
    return "\n".join(lines)


def switch_ab_s45_table() -> str:
    return switch_ab_table(SWITCH_AB_S45)


def conn_s45_table() -> str:
    """16k document cells at cp 2, every strategy, per local kernel one launch under 8 hardware
    queues and one under 1 (back to back, one warm machine): magi / the best baseline in each,
    and each strategy's TFLOPs/s under 1 queue over its own under 8."""
    lines = []
    for kernel, runs in CONN_S45.items():
        tf = {}
        for conn, relpath in runs.items():
            rows = _files((relpath,))
            rows = rows[(rows.cp_size == 2) & (rows.status == "ok")]
            tf[conn] = rows.pivot_table(index=["mask", "direction"], columns="kernel",
                                        values="tflops_per_s")
        names = [k for k in tf["8"].columns if k != "magi"]
        if not lines:
            lines = ["| kernel | mask | dir | magi / best, 8 queues | magi / best, 1 queue | "
                     "1 queue / 8 queues: " + ", ".join(["magi"] + names) + " |",
                     "|---|---|---|---|---|---|"]
        for (mask, direction), row8 in tf["8"].iterrows():
            row1 = tf["1"].loc[(mask, direction)]
            best = [(r[names].max(), r[names].idxmax()) for r in (row8, row1)]
            ratios = ", ".join(f"{row1[k] / row8[k]:.2f}" for k in ["magi"] + names)
            lines.append(f"| {kernel} | {mask} | {direction} | {row8['magi'] / best[0][0]:.3f} "
                         f"({best[0][1]}) | {row1['magi'] / best[1][0]:.3f} ({best[1][1]}) | "
                         f"{ratios} |")
    return "\n".join(lines)


def pytest_s45(run: str) -> str:
    return _pytest_counts(PYTEST_S45[run])


# -- session 46: the Gluon forward launched before the cast lands (early_start; Triton, 16k a
# GPU, cp 2, 2 H100s): its dynamic grid alone, interleaved A/Bs, the deadlock probe, bench rows
_S46 = "h100x2/cp_s46/"
SWITCH_AB_S46 = {"call 2: global index slot, 5 rounds": _S46 + "switch_ab_early_call2.csv",
                 "call 3: shared-memory slot, 7 rounds": _S46 + "switch_ab_early_call3.csv",
                 "call 7: late-tile table, 9 rounds": _S46 + "switch_ab_early_call7.csv"}
SCHEDULE_S46 = {"index from global memory": _S46 + "gluon_schedule_call2.csv",
                "index through shared memory": _S46 + "gluon_schedule_call3.csv"}
EARLY_S46 = _S46 + "cp_triton_16k_doc_early.csv"
PYTEST_S46 = {f"{kind}_call{c}": f"{_S46}pytest_{kind}_call{c}.txt"
              for kind in ("kernel", "nccl") for c in (2, 3, 5)}


def switch_ab_s46_table() -> str:
    return switch_ab_table(SWITCH_AB_S46)


def schedule_s46_table() -> str:
    """The Gluon forward alone (one H100, 16k, GQA 64:8, d128): the persistent grid striding
    over its items against fetching them from a counter, three rounds each in turn, medians."""
    lines = ["| run | " + " | ".join(["mask", "strided ms", "dynamic ms", "strided / dynamic"])
             + " |", "|---|---|---|---|---|"]
    for run, relpath in SCHEDULE_S46.items():
        rows = pd.read_csv(RESULTS / relpath)
        rows["grid"] = rows.kernel.str.rsplit("_", n=1).str[0]
        med = rows.groupby(["mask", "grid"], sort=False).runtime_ms.median()
        for mask in rows["mask"].unique():
            strided, dynamic = med[(mask, "strided")], med[(mask, "dynamic")]
            lines.append(f"| {run} | {mask} | {strided:.3f} | {dynamic:.3f} | "
                         f"{strided / dynamic:.3f} |")
    return "\n".join(lines)


def early_bench_s46_table() -> str:
    """bench.cp rows, one launch (the runner's rounds 2): magi and magi_early beside the six
    baselines, TFLOPs/s/GPU, and on which ranks early_start applied (the row's note)."""
    rows = _files((EARLY_S46,))
    rows = rows[(rows.cp_size == 2) & (rows.status == "ok")]
    tf = rows.pivot_table(index=["mask", "direction"], columns="kernel", values="tflops_per_s",
                          sort=False)
    names = [k for k in tf.columns if k not in ("magi", "magi_early")]
    lines = ["| mask | dir | magi | magi_early | best baseline | magi / best | magi_early / best "
             "| magi_early / magi | early_start on |", "|---|---|---|---|---|---|---|---|---|"]
    for (mask, direction), r in tf.iterrows():
        best = r[names].idxmax()
        note = rows[(rows["mask"] == mask) & (rows.kernel == "magi_early")].message.iloc[0]
        ranks = re.search(r"early_start=([^;]*)", note).group(1)
        on = ", ".join(m.group(1) for m in re.finditer(r"(r\d):on", ranks)) or "none"
        lines.append(f"| {mask} | {direction} | {r['magi']:.0f} | {r['magi_early']:.0f} | "
                     f"{r[best]:.0f} ({best}) | {r['magi'] / r[best]:.3f} | "
                     f"{r['magi_early'] / r[best]:.3f} | {r['magi_early'] / r['magi']:.3f} | "
                     f"{on} |")
    return "\n".join(lines)


def probe_s46() -> str:
    """The deadlock probe's verdict per case (scripts/dev/early_start_deadlock_probe.py)."""
    out = []
    for line in (RESULTS / _S46 / "probe_early_deadlock.txt").read_text().splitlines():
        case, _, rest = line.partition(" ")
        if case in ("flag_only", "ce_copy", "torch_copy"):
            out.append(f"{case}: {'deadlock (60 s limit)' if 'TIMEOUT' in rest else 'finished'}")
    return "; ".join(out)


def pytest_s46(run: str) -> str:
    return _pytest_counts(PYTEST_S46[run])


def early_s46_summary(mask: str, direction: str = "fwd") -> str:
    """magi_early_start's speed against magi (magi ms / its ms) over the three A/Bs, and
    magi_early / magi in the bench launch: 'A/Bs a-b, bench c'."""
    ab = []
    for relpath in SWITCH_AB_S46.values():
        med = pd.read_csv(RESULTS / relpath).groupby(["mask", "strategy", "direction"]).ms.median()
        ab.append(med[(mask, "magi", direction)] / med[(mask, "magi_early_start", direction)])
    rows = _files((EARLY_S46,))
    tf = rows[(rows.cp_size == 2) & (rows.status == "ok") & (rows["mask"] == mask)
              & (rows.direction == direction)].set_index("kernel").tflops_per_s
    return (f"A/Bs {min(ab):.3f}-{max(ab):.3f}, bench {tf['magi_early'] / tf['magi']:.3f}")


# -- session 56 (c3a0db2): the GPU tests after the refuted runtime switches were removed, on 2
# H100s: the NCCL test file per local kernel, and the Triton kernel file split over the two GPUs
PYTEST_S56 = {"nccl, triton": ("h100x2/tests/pytest_nccl_triton_c3a0db2.log",),
              "nccl, fa4": ("h100x2/tests/pytest_nccl_fa4_c3a0db2.log",),
              "triton kernels": tuple(f"h100x2/tests/pytest_triton_{part}_c3a0db2.log"
                                      for part in ("gluon_bwd_part0", "gluon_bwd_part1",
                                                   "rest_part0", "rest_part1"))}


def pytest_s56() -> str:
    """Each run's counts, its logs' summary lines summed."""
    return "; ".join(f"{run}: {_summed_counts(logs)}" for run, logs in PYTEST_S56.items())
