"""Sections on 2 H200s: MagiAttention against the CP baselines (issue 15)."""
from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd

from ._common import (CP_MASKS, CP_S16, CP_S31, DOC_MASKS, _ab_medians, _ab_table, _baselines,
                      _below_best, _cp2_below, _cp_cells, _cp_wins, _cut_ms, _cut_pair, _files,
                      _helper, _magi_note, _magi_over_best, _note, _profiler_rows, _pytest_counts,
                      _row_note, _summed_counts, _tf_cells, _vs_best, _with_unequal, ab_masks_table,
                      cp2_s16_summary, cp2_s16_table, cp_moves, key_clock_moves,
                      key_clock_table, timed_summary, timed_table, unequal_s28_summary,
                      unequal_s28_table)
from ._paths import RESULTS
from .h200x4 import TIMED_CP4_S59


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
CP_S30 = "h200x2/cp_s30"
BWD_TIMING_S30 = "h200x2/bwd_timing_s30/bwd_timing_probe_{}_rank0.csv"


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
UNEQUAL_S31 = {(b, s): CP_S31[f"{b}, {s}/GPU"] for s in ("16k", "64k") for b in ("fa4", "triton")}


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
        for mask in ("full", "causal"):
            whole, cut = _cut_ms(relpath, mask, 2, "fwd")
            out.append(f"{label} {mask}: whole {whole:.1f} / cut {cut:.1f} ms")
    return "; ".join(out)


def pytest_s31() -> str:
    return (f"the Triton forward's key parts (`-k long_key`): "
            f"{_pytest_counts('h200x2/tests/pytest_long_key_s31.log')}; every installed "
            f"adapter's set_dout (`-k set_dout`, FA4 staged, no other peer): "
            f"{_pytest_counts('h200x2/tests/pytest_set_dout_s31.log')}")


# -- session 33: 2 H200s, 16k a GPU, cp 2 again at 8d6b466 (TIE_ORDER), with magi_refine_comm --
# (balanced_runs' cut weighing the exposed cast: opt-in, removed after this run) beside magi and
# the six baselines; then the interleaved A/B of the two on FA4 causal_document
CP_S33 = {f"{b}, 16k/GPU": f"h200x2/cp_s33/cp_h200x2__{b}_16k_cp2.csv" for b in ("fa4", "triton")}
REFINE_AB_S33 = {"cp2_causal_document": "h200x2/cp_s33/cp_ab__fa4_16k_refine_comm.csv"}


def cp2_s33_table() -> str:
    """cp 2, per run and mask: magi and magi_refine_comm over the best baseline, each direction,
    and magi / best in session 31's run of the same cell."""
    lines = ["| run | mask | fwd magi / best (name) | fwd refine_comm / best | "
             "bwd magi / best (name) | bwd refine_comm / best | s31 magi / best, fwd / bwd |",
             "|" + "---|" * 7]
    for run, relpath in CP_S33.items():
        cells, before = _cp_cells(relpath), _cp_cells(CP_S31[run])
        for mask in CP_MASKS:
            cols = [f"{_vs_best(cells[mask, 2, d])} | "
                    f"{_magi_over_best(cells[mask, 2, d], 'magi_refine_comm'):.2f}"
                    for d in ("fwd", "bwd")]
            old = " / ".join(f"{_magi_over_best(before[mask, 2, d]):.2f}" for d in ("fwd", "bwd"))
            lines.append(f"| {run} | {mask} | {' | '.join(cols)} | {old} |")
    return "\n".join(lines)


def cp2_s33_summary() -> str:
    """cp 2 cells at >= 1.0x the best baseline per local kernel: magi, magi_refine_comm, and
    magi in session 31's run."""
    out = []
    for run, relpath in CP_S33.items():
        counts = [_cp_wins(relpath), _cp_wins(relpath, "magi_refine_comm"),
                  _cp_wins(CP_S31[run])]
        out.append(f"{run.split(',')[0]}: magi " + ", ".join(
            f"{label}{won} of {n}" for label, (won, n)
            in zip(("", "magi_refine_comm ", "s31 magi "), counts)))
    return "; ".join(out)


def cp2_s33_below() -> str:
    return _cp2_below(CP_S33)


def refine_ab_s33() -> str:
    return _ab_table(REFINE_AB_S33, "magi")


def refine_notes_s33() -> str:
    """FA4 causal_document cp 2, forward rows of magi and magi_refine_comm: the bytes a rank
    sent per call (the runner's count), the overlap solver's predicted communication and the
    dispatch's imbalance, from each row's message."""
    def note(kernel: str, key: str) -> str:
        return _row_note(CP_S33["fa4, 16k/GPU"], kernel, "causal_document", 2, key)

    return "; ".join(f"{k}: {int(note(k, 'comm_bytes_per_rank')) / 1e6:.1f} MB sent a rank, "
                     f"predicted comm {note(k, 'pred_comm_us')} us, "
                     f"imbalance {note(k, 'imbalance')}" for k in ("magi", "magi_refine_comm"))


def refine_runner_s33() -> str:
    """FA4 causal_document cp 2 in the runner (same node as the A/B): ms of magi,
    magi_refine_comm and HybridCP, each direction."""
    frame = _files((CP_S33["fa4, 16k/GPU"],))
    cell = frame[(frame["mask"] == "causal_document") & (frame.cp_size == 2)]
    ms = cell.set_index(["direction", "kernel"]).runtime_ms
    return "; ".join(f"{d} " + ", ".join(f"{k} {ms[d, k]:.2f}"
                                         for k in ("magi", "magi_refine_comm", "hybrid_cp"))
                     + " ms" for d in ("fwd", "bwd"))


# -- session 37: 2 H200s (asked for 2 H100s): balance="timed" against the model's cuts and
# HybridCP (cp_ab.py, Triton, 16k a GPU, cp 2, 4 rounds; the key kept the model's layout on
# every mask: its row notes, balance_ms)
TIMED_CP2_S37 = "h200x2/cp_s37/cp_ab_timed_cp2.csv"


def timed_cp2_s37_ab() -> str:
    return ab_masks_table(TIMED_CP2_S37)


# -- session 41: issue 15's table on 2 H200s at HEAD (the first H200 pair since session 33):
# both local kernels at 16k with the runner's interleaved rounds, FA4's document masks at 64k
CP_S41 = {"fa4, 16k/GPU, rounds 3": "h200x2/cp_s41/cp_h200x2__fa4_16k_rounds3.csv",
          "triton, 16k/GPU, rounds 3": "h200x2/cp_s41/cp_h200x2__triton_16k_rounds3.csv",
          "fa4, 64k/GPU, document masks": "h200x2/cp_s41/cp_h200x2__fa4_64k_docs.csv"}


def cp2_s41_table() -> str:
    """cp2_s16_table of the session's runs, without the masks a run did not measure."""
    return "\n".join(line for line in cp2_s16_table(CP_S41).splitlines()
                     if "not measured | not measured" not in line)


def cp2_s41_summary() -> str:
    return cp2_s16_summary(CP_S41)


def cp2_s41_below() -> str:
    return _cp2_below(CP_S41)


# -- session 42: issue 15's whole table at HEAD in results/h200x2/cp/ (16k: session 41's rows
# with the runner's rounds; 64k: this session's, FA4's document masks from session 41; no CP
# change between them), the 16k document cells taken apart, the cast's transport
# (its 16k rows moved to cp_history when session 43 measured 16k at its HEAD, its 64k rows when
# session 44 measured the 64k document masks at its HEAD)
CP_S42 = {f"{b}, {s}/GPU": (f"h200x2/cp_history/cp_h200x2__{b}_{s}__daf76280f383.csv"
                            if s == "16k" else
                            f"h200x2/cp_history/cp_h200x2__{b}_{s}__f848813cf422.csv")
          for s in ("16k", "64k") for b in ("fa4", "triton")}
PROFILE_S42 = "h200x2/cp_s42/profile_16k"
CAST_ENV_S42 = "h200x2/cp_s42/nccl_env/cast_bandwidth_env.csv"
TRACE_S42 = "h200x2/cp_s42/trace/trace_causal_document_triton_rank{}.json.gz"


def cp2_s42_table() -> str:
    return cp2_s16_table(CP_S42)


def cp2_s42_summary() -> str:
    return cp2_s16_summary(CP_S42)


def cp2_s42_below() -> str:
    return _cp2_below(CP_S42)


def cp2_s42_equal_tokens() -> str:
    return _equal_tokens(CP_S42)


def _equal_tokens(files: dict) -> str:
    """magi against the best baseline whose ranks hold equal token counts (HybridCP's rows with
    unequal shares left out)."""
    ratios = [(run, m, d, _magi_over_best(v))
              for run, relpath in files.items()
              for (m, cp, d), v in sorted(_cp_cells(relpath, equal_tokens=True).items())
              if cp == 2 and "magi" in v and _baselines(v)]
    low = [f"{run.replace('/GPU', '')} {m} {d} {r:.3f}" for run, m, d, r in ratios if r < 1.0]
    docs = [r for _, m, _, r in ratios if m in DOC_MASKS]
    return (f"{sum(r >= 1.0 for *_, r in ratios)} of {len(ratios)} cells >= 1.0 (below: "
            f"{'; '.join(low) or 'none'}); the document masks {min(docs):.2f}-{max(docs):.2f}x, "
            f"{sum(r >= 1.2 for r in docs)} of {len(docs)} at >= 1.2x")


def _pieces_s42() -> pd.DataFrame:
    """magi_profile_cp's pieces, the slower rank's (max over ranks) per mask / backend / piece."""
    frame = pd.concat(pd.read_csv(RESULTS / PROFILE_S42 / f"magi_profile_cp2_{b}_auto_rank{r}.csv")
                      for b in ("fa4", "triton") for r in (0, 1))
    return frame.groupby(["mask", "backend", "piece"]).ms.max()


def profile_s42_table() -> str:
    """Per mask and kernel: calc_attn's forward and backward against the kernel alone over the
    rank's fused mask (the slower rank of each), and the fused path's pieces timed alone."""
    pieces = _pieces_s42()
    lines = ["| mask | kernel | fwd: calc_attn / kernel (ms) | bwd: runtime / kernel (ms) | "
             "cast + buffer alone | reduce alone |", "|---|---|---|---|---|---|"]
    for mask in DOC_MASKS:
        for b in ("fa4", "triton"):
            p = pieces[mask, b]
            lines.append(f"| {mask} | {b} | {p['calc_attn_fwd']:.3f} / {p['kernel_fwd']:.3f} "
                         f"({p['calc_attn_fwd'] - p['kernel_fwd']:+.3f}) | "
                         f"{p['runtime_bwd']:.3f} / {p['kernel_bwd']:.3f} "
                         f"({p['runtime_bwd'] - p['kernel_bwd']:+.3f}) | {p['fused_kv']:.3f} | "
                         f"{p['group_reduce']:.3f} |")
    return "\n".join(lines)


def rank_kernels_s42_table() -> str:
    """Each rank's mask alone (rank_mask_probe, one GPU): the slower rank of magi's equal
    shards against HybridCP's slower rank, ms, per kernel and direction."""
    frame = pd.read_csv(RESULTS / PROFILE_S42 / "rank_mask_probe.csv")
    slowest = frame.groupby(["mask", "strategy", "backend", "direction"]).ms.max()
    lines = ["| mask | kernel | fwd magi / hybrid_cp (ms) | bwd magi / hybrid_cp (ms) |",
             "|---|---|---|---|"]
    for mask in DOC_MASKS:
        for b in ("fa4", "triton"):
            cells = [f"{slowest[mask, 'magi', b, d]:.3f} / {slowest[mask, 'hybrid_cp', b, d]:.3f}"
                     for d in ("fwd", "bwd")]
            lines.append(f"| {mask} | {b} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def cast_env_s42_table() -> str:
    """The cast's transport alone (cast_bandwidth.py, 2 H200s): us per exchange by NCCL
    setting, the one-way 27.6 MB (causal_document 16k's shape) and the symmetric copies."""
    frame = pd.read_csv(RESULTS / CAST_ENV_S42).fillna({"env": "(default)"})
    big = frame[frame.mb == 27.6].pivot_table(index="env", columns="method", values="us",
                                                sort=False)
    cols = ["nccl_a2a_one_way", "nccl_a2a", "symm_pull", "symm_push"]
    lines = ["| NCCL setting | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for env, row in big.iterrows():
        lines.append(f"| {env} | " + " | ".join(f"{row[c]:.0f}" for c in cols) + " |")
    return "\n".join(lines)


def _forward_prologues(relpath: str, cats: tuple[str, ...] = ("kernel",)
                       ) -> tuple[list[dict], list[tuple[float, list[dict]]]]:
    """(the forward kernels, and for each two consecutive ones the us from the first's end to
    the second's start with the GPU events of ``cats`` between them) of a magi_trace.py trace."""
    import gzip
    import json
    with gzip.open(RESULTS / relpath) as f:
        events = sorted((e for e in json.load(f)["traceEvents"]
                         if e.get("ph") == "X" and e.get("cat") in cats), key=lambda e: e["ts"])
    fwd = [e for e in events if e["name"] == "_fwd_kernel"]
    return fwd, [(b["ts"] - a["ts"] - a["dur"],
                  [e for e in events if a["ts"] + a["dur"] <= e["ts"] < b["ts"]])
                 for a, b in zip(fwd, fwd[1:])]


def _steady_prologue(relpath: str) -> tuple[float, float, list[dict]]:
    """(us between the last two forward kernels, the longest forward kernel's us, the GPU
    events between those two) of a magi_trace.py trace: the first gap holds the profiler's
    start, so the last one is the steady forward's prologue."""
    fwd, gaps = _forward_prologues(relpath)
    gap, between = gaps[-1]
    return gap, max(e["dur"] for e in fwd), between


def trace_s42_prologues() -> str:
    """The gaps before each steady forward kernel of the Triton causal_document trace, per rank
    (us from the end of one forward kernel to the start of the next)."""
    out = []
    for rank in (0, 1):
        steady, kernel, _ = _steady_prologue(TRACE_S42.format(rank))
        out.append(f"rank {rank}: {steady:.0f} us before a {kernel:.0f} us kernel")
    return "; ".join(out)


# -- session 43: issue 15's 16k cells at HEAD (the fused buffer's pads, on since session 42, and
# the own KV copied by one row kernel), the runtime switches' interleaved A/Bs, kernel timelines
# (its 16k rows moved to cp_history/*__fc4f011d46c3 when session 48 measured 16k at its HEAD)
CP_S43 = {f"{b}, {s}/GPU": (f"h200x2/cp_history/cp_h200x2__{b}_{s}__fc4f011d46c3.csv"
                            if s == "16k" else
                            f"h200x2/cp_history/cp_h200x2__{b}_{s}__f848813cf422.csv")
          for s in ("16k", "64k") for b in ("fa4", "triton")}
def _runs_at(files: dict[str, str], per_gpu: str) -> dict[str, str]:
    """The runs of ``files`` at ``per_gpu`` tokens a GPU ("16k", "64k": in the run's name)."""
    return {run: path for run, path in files.items() if per_gpu in run}


CP_S43_16K = _runs_at(CP_S43, "16k")
SWITCH_AB_S43 = {"H200, switches": "h200x2/cp_s43/switch_ab_h200_early_gather_copy.csv",
                 "H100, pads / early / priority": "h100x2/cp_s43/switch_ab_h100_pads_early_prio.csv",
                 "H100, priority with the switches": "h100x2/cp_s43/switch_ab_h100_prio_all.csv"}
TRACE_S43 = {"switches off": "h200x2/cp_s43/trace/trace_causal_document_triton_rank1.json.gz",
             "gather_first, one_copy, early_reduce":
             "h200x2/cp_s43/trace/trace_causal_document_triton_gather_first_one_copy_"
             "early_reduce_rank1.json.gz"}


def cp2_s43_table() -> str:
    return cp2_s16_table(CP_S43_16K)


def cp2_s43_summary() -> str:
    return cp2_s16_summary(CP_S43_16K)


def cp2_s43_below() -> str:
    return _cp2_below(CP_S43_16K)


def cp2_s43_equal_tokens() -> str:
    return _equal_tokens(CP_S43_16K)


def cp2_s43_whole() -> str:
    """The whole table now in results/h200x2/cp/ (16k at this session's HEAD, 64k at session
    42's): cells at cp 2 where magi >= the best baseline."""
    return cp2_s16_summary(CP_S43).split("; ")[-1]


def switch_ab_s43_table() -> str:
    return switch_ab_table(SWITCH_AB_S43)


def switch_ab_table(runs: dict[str, str]) -> str:
    """Per A/B run (magi_switch_ab.py's rows), mask and direction: magi's median ms over the
    rounds and each variant's speed against it (magi ms / variant ms), HybridCP's too."""
    lines = ["| run | mask | dir | magi ms | each variant's speed: magi ms / its ms | "
             "hybrid_cp's: magi ms / its ms |",
             "|---|---|---|---|---|---|"]
    for run, relpath in runs.items():
        med = pd.read_csv(RESULTS / relpath).groupby(
            ["mask", "strategy", "direction"], sort=False).ms.median()
        for (mask, direction), cell in med.groupby(level=[0, 2], sort=False):
            cell = cell.droplevel([0, 2])
            magi = cell["magi"]
            variants = ", ".join(f"{k.removeprefix('magi_')} {magi / v:.3f}"
                                 for k, v in cell.items() if k.startswith("magi_"))
            lines.append(f"| {run} | {mask} | {direction} | {magi:.3f} | {variants} | "
                         f"{magi / cell['hybrid_cp']:.3f} |")
    return "\n".join(lines)


def trace_s43_prologues() -> str:
    """Rank 1's steady forward prologue in the two Triton causal_document traces, and the own
    KV's copies in it (the strided torch copies, or the one row kernel)."""
    out = []
    for label, relpath in TRACE_S43.items():
        steady, _, between = _steady_prologue(relpath)
        copies = [e["dur"] for e in between if e["name"] == "_copy_rows_pair_kernel"
                  or e["name"].startswith("void at::native::elementwise_kernel<128, 4")]
        out.append(f"{label}: {steady:.0f} us before the kernel, own KV copies "
                   f"{' + '.join(f'{d:.0f}' for d in copies)} us")
    return "; ".join(out)


# results/h200x2/cp/ as it stood before session 59 replaced its cp 2 rows (every later section
# that read the table reads these copies)
CP_BEFORE_S59 = {f"{b}, {s}/GPU": f"h200x2/cp_history/cp_h200x2__{b}_{s}__{sha}.csv"
                 for (b, s), sha in {("fa4", "16k"): "08b877caa76e", ("triton", "16k"): "08b877caa76e",
                                     ("fa4", "64k"): "08b877caa76e",
                                     ("triton", "64k"): "d2cee15588d4"}.items()}


# -- session 44: issue 15's 64k document cells at HEAD (both kernels, the runner's rounds 3);
# the whole table in results/h200x2/cp/ (16k at session 43's HEAD, 64k full and causal at
# session 42's)
# (Triton's 64k full and causal rows measured again in session 50, FA4's full in session 52:
# the 64k files as they stood here)
TRITON_64K_S44 = "h200x2/cp_history/cp_h200x2__triton_64k__9cc6eeca992e.csv"
FA4_64K_S44 = "h200x2/cp_history/cp_h200x2__fa4_64k__9cc6eeca992e.csv"
CP_S44 = {**CP_S43_16K, "fa4, 64k/GPU": FA4_64K_S44, "triton, 64k/GPU": TRITON_64K_S44}
CP_S44_64K = _runs_at(CP_S44, "64k")


def cp2_s44_table() -> str:
    """The 64k rows now in results/h200x2/cp/ (document masks this session's)."""
    return cp2_s16_table(CP_S44_64K)


def cp2_s44_summary() -> str:
    return cp2_s16_summary(CP_S44)


def cp2_s44_below() -> str:
    return _cp2_below(CP_S44)


def cp2_s44_equal_tokens() -> str:
    return _equal_tokens(CP_S44)


# -- session 45: the first H200 rows under one hardware queue (bench.cp's default from then on):
# Triton 16k document cells at cp 2, against the main table's rows (session 43, eight queues)
QUEUE1_S45 = "h200x2/cp_s45/cp_triton_16k_doc__conn1.csv"


def queue1_s45_table() -> str:
    """magi / the best baseline per cell, this run (one queue) beside the main table's row of
    the same cell (session 43's code, eight queues), and the best baseline's name."""
    now, before = _cp_cells(QUEUE1_S45), _cp_cells(CP_S43["triton, 16k/GPU"])
    lines = ["| mask | dir | magi / best, one queue (session 45) | magi / best, eight queues "
             "(session 43) |", "|---|---|---|---|"]
    for (mask, cp, direction), values in now.items():
        if cp == 2:
            lines.append(f"| {mask} | {direction} | {_vs_best(values)} | "
                         f"{_vs_best(before[(mask, cp, direction)])} |")
    return "\n".join(lines)


# -- session 48: issue 15's 16k cells on 2 H200s at HEAD 252ce95 under one hardware queue (the
# first H200 16k table since bench.cp's default became one queue; session 43's 16k rows moved to
# cp_history/*__fc4f011d46c3), magi_unequal beside magi, the runner's rounds 3; 64k stays
# session 42's / 44's rows; early_start's third arm (magi_early_layout) in an interleaved A/B
# (Triton's 16k rows moved to cp_history/*__252ce956e0e6 when session 49 measured them again)
# (FA4's 16k rows as they stood before session 51 measured its document cells again)
CP_S48 = {"fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__252ce956e0e6.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__252ce956e0e6.csv",
          "fa4, 64k/GPU": FA4_64K_S44, "triton, 64k/GPU": TRITON_64K_S44}
EARLY_AB_S48 = "h200x2/cp_s48/early_ab_triton_16k.csv"


def _table_spans(files: dict[str, str]) -> dict[str, Callable[[], str]]:
    """The spans of one session's issue-15 table (``files``: its 16k runs beside the 64k ones):
    its 16k rows' table, summary (magi_unequal, opt-in, counted as magi's too), the cells below
    the best baseline and against the equal-token baselines; and the whole table's count."""
    sixteen = _runs_at(files, "16k")
    return {"table": lambda: cp2_s16_table(sixteen),
            "summary": lambda: (cp2_s16_summary(sixteen) + "; counting magi_unequal: "
                                + _with_unequal(sixteen, "16k")),
            "below": lambda: _cp2_below(sixteen),
            "equal_tokens": lambda: _equal_tokens(sixteen),
            "whole": lambda: cp2_s16_summary(files).split("; ")[-1]}


CP2_S48_SPANS = _table_spans(CP_S48)


def early_ab_s48_table() -> str:
    return ab_masks_table(EARLY_AB_S48)


EARLY_LOG_S48 = "h200x2/cp_s48/early_ab.log"  # rank 0's stdout: each key's notes, the medians


def early_key_s48() -> str:
    """Per mask and magi arm: the key's own timing of the whole fused forward (``cut_ms`` fwd
    whole: before ``early_start`` is planned, so with the launch off, fastest of short bursts)
    and the A/B's median over it."""
    key_fwd = {}
    for line in (RESULTS / EARLY_LOG_S48).read_text().splitlines():
        m = re.match(r"(\w+) (magi\w*): .*cut_ms=fwd:([\d.]+)/", line)
        if m:
            key_fwd[m[1], m[2]] = float(m[3])
    med = pd.read_csv(RESULTS / EARLY_AB_S48).groupby(
        ["mask", "strategy", "direction"]).ms.median()
    out = []
    for mask in dict.fromkeys(mask for mask, _ in key_fwd):
        arms = [f"{s} {ms:.3f} ms (A/B / key {med[mask, s, 'fwd'] / ms:.2f})"
                for (m, s), ms in key_fwd.items() if m == mask]
        out.append(f"{mask}: " + ", ".join(arms))
    return "; ".join(out)


def cut_causal_s48() -> str:
    """Triton causal 16k cp 2: magi's key-time forward whole / cut by keys (``cut_ms``), the cut
    it chose and the bench's forward, under eight queues (session 43's rows) and one (this
    session's); FA4's under one queue beside them."""
    runs = {"Triton, eight queues (session 43)": CP_S43["triton, 16k/GPU"],
            "Triton, one queue": CP_S48["triton, 16k/GPU"],
            "FA4, one queue": CP_S48["fa4, 16k/GPU"]}
    out = []
    for label, relpath in runs.items():
        whole, cut = _cut_ms(relpath, "causal", 2, "fwd")
        tflops = _cp_cells(relpath)["causal", 2, "fwd"]["magi"]
        out.append(f"{label}: whole {whole:.3f} / cut {cut:.3f} ms, chose "
                   f"cut={_row_note(relpath, 'magi', 'causal', 2, 'cut')}, {tflops:.0f} TFLOPs/s")
    return "; ".join(out)


# -- session 49: the dynamic grid beside the cast (OverlapConfig.dynamic_grid) in interleaved
# A/Bs on 2 H200s (Triton, 16k a GPU, cp 2; one launch at e524bd7 under the default queue, four
# alternating eight and one queue), then on by default (e2e0a1b) and the key's cut timings made
# longer (d046fd9); Triton's 16k table at d046fd9 with magi_static (the strided grid) beside magi.
# FA4's 16k rows stay session 48's, 64k sessions 42 / 44's.
S49 = "h200x2/cp_s49"
DYN_AB_S49 = {"default queue": f"{S49}/dyn_ab_triton_16k.csv",
              **{f"{q} queue{'s' * (q == '8')}, launch {i}": f"{S49}/queue_ab_q{q}_{i}.csv"
                 for q, i in (("8", 1), ("1", 2), ("8", 3), ("1", 4))}}
CUT_AB_S49 = {f"launch {i}": f"{S49}/cut_ab_{i}.csv" for i in (1, 2, 3)}
# (the file as it stood before session 51 measured it again)
CP_S49 = {**CP_S48,
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__d046fd9f344f.csv"}
TRITON_16K_E2E = f"{S49}/cp_h200x2__triton_16k__e2e0a1b.csv"  # dynamic on, 0.05 s timings


def _ab_cut(relpath: str, mask: str, strategy: str) -> str:
    """The cut one cp_ab.py launch's key chose for ``strategy`` on ``mask`` (its notes line in
    the launch's rank-0 log, logs/<rows' name>.log beside the rows)."""
    path = RESULTS / relpath
    for line in (path.parent / "logs" / f"{path.stem}.log").read_text().splitlines():
        m = re.match(rf"{mask} {strategy}: .*; cut=([^;]*);", line)
        if m:
            return m[1]
    raise KeyError((relpath, mask, strategy))


def dyn_ab_s49_table() -> str:
    """Per launch and mask: the cut magi_dynamic's key chose, and magi (strided) ms over
    magi_dynamic ms per direction (> 1: the dynamic grid faster), medians over 5 rounds."""
    lines = ["| launch | mask | magi_dynamic's cut | fwd magi / magi_dynamic | "
             "bwd magi / magi_dynamic | fwd magi_dynamic / best baseline |",
             "|---|---|---|---|---|---|"]
    for launch, relpath in DYN_AB_S49.items():
        med = _ab_medians(relpath)
        for mask in dict.fromkeys(m for m, _, _ in med):
            ratio = [med[mask, d, "magi"] / med[mask, d, "magi_dynamic"] for d in ("fwd", "bwd")]
            best = min(ms for (m, d, s), ms in med.items()
                       if m == mask and d == "fwd" and not s.startswith("magi"))
            lines.append(f"| {launch} | {mask} | {_ab_cut(relpath, mask, 'magi_dynamic')} | "
                         f"{ratio[0]:.3f} | {ratio[1]:.3f} | "
                         f"{best / med[mask, 'fwd', 'magi_dynamic']:.3f} |")
    return "\n".join(lines)


def dyn_ab_s49_causal() -> str:
    """The causal forward's gain from the dynamic grid over every launch (range)."""
    gains = [med["causal", "fwd", "magi"] / med["causal", "fwd", "magi_dynamic"]
             for med in map(_ab_medians, DYN_AB_S49.values())]
    return (f"{min(gains):.3f}-{max(gains):.3f} over {len(gains)} launches "
            f"({sum(g > 1 for g in gains)} faster)")


def cut_ab_s49_table() -> str:
    """After the longer key timings: per launch, the cut each magi key chose on causal and the
    forward's medians (ms), magi's over the best equal-share baseline's."""
    lines = ["| launch | magi's cut | magi_static's cut | magi fwd ms | magi_static fwd ms | "
             "usp fwd ms | loongtrain fwd ms | best baseline / magi |",
             "|---|---|---|---|---|---|---|---|"]
    for launch, relpath in CUT_AB_S49.items():
        med = _ab_medians(relpath)
        ms = {s: med["causal", "fwd", s] for s in ("magi", "magi_static", "usp", "loongtrain")}
        lines.append(f"| {launch} | {_ab_cut(relpath, 'causal', 'magi')} | "
                     f"{_ab_cut(relpath, 'causal', 'magi_static')} | "
                     + " | ".join(f"{v:.3f}" for v in ms.values())
                     + f" | {min(ms['usp'], ms['loongtrain']) / ms['magi']:.3f} |")
    return "\n".join(lines)


def cut_causal_s49() -> str:
    """Triton causal 16k cp 2 in the table runs: the key's forward timing (whole / cut), its
    choice and the bench's forward, with the dynamic grid at 0.05 s timings and at 0.2 s."""
    runs = {"dynamic grid, 50 ms timings (e2e0a1b)": TRITON_16K_E2E,
            "dynamic grid, 200 ms timings (d046fd9)": CP_S49["triton, 16k/GPU"]}
    out = []
    for label, relpath in runs.items():
        whole, cut = _cut_ms(relpath, "causal", 2, "fwd")
        cell = _cp_cells(relpath)["causal", 2, "fwd"]
        out.append(f"{label}: whole {whole:.3f} / cut {cut:.3f} ms, chose "
                   f"cut={_row_note(relpath, 'magi', 'causal', 2, 'cut')}, {cell['magi']:.0f} "
                   f"TFLOPs/s = {_magi_over_best(cell):.3f}x the best baseline")
    return "; ".join(out)


CP2_S49_SPANS = _table_spans(CP_S49)


def static_s49() -> str:
    """Triton 16k cp 2, both table runs: magi_static's forward over magi's where neither key
    cut the forward (the same kernels run each call): the second magi key of a launch."""
    out = []
    for label, relpath in (("e2e0a1b", TRITON_16K_E2E), ("d046fd9", CP_S49["triton, 16k/GPU"])):
        cells = _cp_cells(relpath)
        for mask in CP_MASKS:
            cuts = {k: _row_note(relpath, k, mask, 2, "cut") for k in ("magi", "magi_static")}
            if "fwd" not in cuts["magi"] + cuts["magi_static"]:
                v = cells[mask, 2, "fwd"]
                out.append(f"{label} {mask} {v['magi_static'] / v['magi']:.3f}")
    return "; ".join(out)


def static_key_s49() -> str:
    """block_causal_document 16k cp 2 at d046fd9: each magi key's own timing of its whole
    forward (``cut_ms`` fwd whole), against the bench's steady-state forward."""
    relpath = CP_S49["triton, 16k/GPU"]
    rows = _files((relpath,))
    out = []
    for kernel in ("magi", "magi_static"):
        key_ms, _ = _cut_ms(relpath, "block_causal_document", 2, "fwd", kernel)
        row = rows[(rows.kernel == kernel) & (rows["mask"] == "block_causal_document")
                   & (rows.cp_size == 2) & (rows.direction == "fwd")]
        out.append(f"{kernel} {key_ms:.3f} ms at key time, {row.runtime_ms.iloc[0]:.3f} ms in "
                   f"the rounds")
    return "; ".join(out)


# -- session 50: the second magi key's slower forward taken apart (cp_ab.py launches on 2 H200s,
# Triton, 16k a GPU, cp 2; magi_twin = configs/cp/magi.yaml under another name, written by the
# device command) and the garbage collection before each timing that ended it (bench/metrics.py);
# Triton's 64k full and causal cells at d2cee15 (the document cells stay session 44's)
S50 = "h200x2/cp_s50"
GC_RUNNER_S50 = f"{S50}/gc_runner_triton_16k.csv"
CP_S50 = {**CP_S49, "triton, 64k/GPU": CP_BEFORE_S59["triton, 64k/GPU"]}


def gc_runner_s50() -> str:
    """The runner (bench.cp, its own order: build, gate, time each strategy in turn) with the
    collection: magi_static and magi_unequal (built after magi) over magi, and magi over
    HybridCP, per mask and direction (TFLOPs/s ratios)."""
    cells = _cp_cells(GC_RUNNER_S50)
    out = []
    for (mask, _, d), v in cells.items():
        out.append(f"{mask} {d}: magi_static / magi {v['magi_static'] / v['magi']:.3f}, "
                   f"magi / hybrid_cp {v['magi'] / v['hybrid_cp']:.3f}, magi_unequal / "
                   f"hybrid_cp {v['magi_unequal'] / v['hybrid_cp']:.3f}")
    return "; ".join(out)


def triton_64k_s50_table() -> str:
    return cp2_s16_table({"triton, 64k/GPU": CP_S50["triton, 64k/GPU"]})


def triton_64k_s50_before() -> str:
    """Triton 64k full and causal, cp 2: magi / the best baseline in session 42's rows and in
    this session's."""
    before, now = (_cp_cells(p) for p in (TRITON_64K_S44, CP_S50["triton, 64k/GPU"]))
    return "; ".join(f"{m} {d} {_magi_over_best(before[m, 2, d]):.3f} -> "
                     f"{_magi_over_best(now[m, 2, d]):.3f}"
                     for m in ("full", "causal") for d in ("fwd", "bwd"))


def _whole_with_unequal(files: dict[str, str]) -> str:
    """The whole table's count of cp 2 cells where magi >= the best baseline, and at 16k the
    count with magi_unequal (opt-in) counted as magi's too."""
    return (cp2_s16_summary(files).split("; ")[-1] + "; counting magi_unequal: "
            + _with_unequal(files, "16k") + " at 16k")


def cp2_s50_whole() -> str:
    return _whole_with_unequal(CP_S50)


def cp2_s50_below() -> str:
    return _cp2_below(CP_S50)


def triton_64k_full_bwd_s50() -> str:
    v = _cp_cells(CP_S50["triton, 64k/GPU"])["full", 2, "bwd"]
    return f"{_magi_over_best(v):.4f}"


# -- session 51 (2 H200s): session 50's probe again, with and without the collection; the key's
# own timings collecting garbage first (533fe0e); issue 15's 16k tables with the collection:
# Triton's document cells at b10ead8 and full / causal at 533fe0e, FA4's document cells at
# 533fe0e (its full / causal rows stay session 48's, the 64k rows sessions 42 / 44 / 50's)
S51 = "h200x2/cp_s51"
# (the 16k files as they stood before session 52 measured Triton's document cells and FA4's
# full / causal again)
CP_S51 = {**CP_S50, "fa4, 16k/GPU": "h200x2/cp_history/cp_h200x2__fa4_16k__533fe0e7c2ee.csv",
          "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__b10ead8cf977.csv"}
# its whole-table span also counts magi_unequal at 16k
CP2_S51_SPANS = {**_table_spans(CP_S51), "whole": lambda: _whole_with_unequal(CP_S51)}
FC_S51 = {"b10ead8, the key's timings without the collection": f"{S51}/triton_16k_fc__b10ead8.csv",
          "533fe0e, the key's timings collecting first": f"{S51}/triton_16k_fc__533fe0e.csv"}


def key_timing_s51() -> str:
    """Triton 16k cp 2, full and causal: magi's and magi_static's own key-time timings of the
    whole forward (and causal's cut), the cut chosen and the bench's forward, before and after
    the key's timings collect garbage first."""
    out = []
    for label, relpath in FC_S51.items():
        cells = _cp_cells(relpath)
        parts = []
        for kernel in ("magi", "magi_static"):
            whole, cut = _cut_ms(relpath, "causal", 2, "fwd", kernel)
            full, _ = _cut_ms(relpath, "full", 2, "fwd", kernel)
            parts.append(f"{kernel} causal whole {whole:.3f} / cut {cut:.3f} ms, "
                         f"cut={_row_note(relpath, kernel, 'causal', 2, 'cut')}, "
                         f"{cells['causal', 2, 'fwd'][kernel]:.0f} TFLOPs/s, full whole "
                         f"{full:.3f} ms")
        parts.append(f"magi / the best baseline on causal's forward "
                     f"{_magi_over_best(cells['causal', 2, 'fwd']):.3f}")
        out.append(f"{label}: " + ", ".join(parts))
    return "; ".join(out)


def cp2_s51_below_64k() -> str:
    """The whole table's 64k cells below the best baseline (rows unchanged this session)."""
    return _cp2_below(_runs_at(CP_S51, "64k"))


# -- session 52 (2 H200s, 08b877c): Triton's 16k document cells and FA4's 16k full / causal and
# 64k full measured again (the files as they stood: cp_history/*__b10ead8cf977, *__533fe0e7c2ee,
# fa4_64k__9cc6eeca992e); what in the collection removes the second key's slow state: cp_ab.py's
# launches with the collector off, with a census, and with a host pause instead of a collection
S52 = "h200x2/cp_s52"
CP_S52 = dict(CP_BEFORE_S59)
CP2_S52_SPANS = {**_table_spans(CP_S52), "whole": lambda: _whole_with_unequal(CP_S52)}
FA4_64K_FULL_S52 = f"{S52}/fa4_64k_full__08b877c.csv"


def cp2_s52_table_64k() -> str:
    return cp2_s16_table(_runs_at(CP_S52, "64k"))


def cp2_s52_below_64k() -> str:
    return _cp2_below(_runs_at(CP_S52, "64k"))


def fa4_64k_full_s52() -> str:
    """FA4 64k full at cp 2: magi / the best baseline to four places, the rounds the time
    limit left (the rows' rounds_done), and the same ratios in the rows it replaced."""
    cells, before = _cp_cells(FA4_64K_FULL_S52), _cp_cells(FA4_64K_S44)
    done = _row_note(FA4_64K_FULL_S52, "magi", "full", 2, "rounds_done").split()[0]
    ratios = [(d, _magi_over_best(cells["full", 2, d]), _magi_over_best(before["full", 2, d]))
              for d in ("fwd", "bwd")]
    return (", ".join(f"{d} {now:.4f}" for d, now, _ in ratios)
            + f" (rounds done at cp 2: {done} of 3; session 42's rows: "
            + ", ".join(f"{d} {old:.3f}" for d, _, old in ratios) + ")")


# -- session 55 (df6f59f): side_backward against magi at cp 2 (cp_ab.py, Triton, 16k, full and
# causal, 5 rounds, 2 H200s); the slow forward's per-call rows are slow_forward.py's
S55 = "h200x2/cp_s55"
SIDE_BWD_S55 = f"{S55}/side_bwd"


def side_bwd_s55_table() -> str:
    return ab_masks_table(f"{SIDE_BWD_S55}/cp_ab.csv")


def side_bwd_s55_keys() -> str:
    """What each magi key chose at key time (from the launch's log): its cut and its own
    backward timing whole / cut by keys (ms, the slowest rank's)."""
    text = (RESULTS / SIDE_BWD_S55 / "ab.log").read_text()
    parts = []
    for mask, key, note in re.findall(r"^(\w+) (magi\w*): (.*)$", text, re.M):
        cut = re.search(r"\bcut=([\w,-]+)", note).group(1)
        whole, split = re.search(r"bwd:([\d.]+)/([\d.]+)", note).groups()
        parts.append(f"{mask} {key}: cut {cut}, backward whole {float(whole):.1f} / cut "
                     f"{float(split):.1f} ms")
    return "; ".join(parts)




# -- session 58: dispatch_alg="timed" (configs/cp/magi_timed.yaml: the key times "auto"'s equal
# shares against unequal_runs, communication included, and keeps the faster) beside magi and the
# six baselines, 2 H200s, cp 2, one run a file (magi_unequal beside them on Triton's documents)
S58 = "h200x2/cp_s58/"
TIMED_S58 = {"triton, 16k/GPU": (S58 + "triton_16k_documents.csv",
                                 S58 + "triton_16k_full_causal.csv"),
             "fa4, 16k/GPU": (S58 + "fa4_16k_documents.csv", S58 + "fa4_16k_full_causal.csv"),
             "fa4, 64k/GPU": (S58 + "fa4_64k_documents.csv",),
             # the last call: two of three rounds inside its time limit (rows: rounds_done=2)
             "triton, 64k/GPU": (S58 + "triton_64k_causal_document.csv",)}


def timed_s58_table() -> str:
    return timed_table(TIMED_S58, 2)


def timed_s58_summary() -> str:
    return timed_summary(TIMED_S58, 2)


def pytest_timed_s58() -> str:
    return _summed_counts(S58 + "timed_nccl_test.log")


# -- session 59: magi_timed on the 64k cp 2 cells session 58 did not reach (two cp 2 runs at
# once on one node of 4 H200s: FA4 on GPUs 0-1, Triton on GPUs 2-3); results/h200x2/cp/'s cp 2
# rows then replaced by sessions 58-59's runs (magi, magi_timed and the six baselines in one run
# a file; 64k full stays session 50's / 54's rows, its cp 1 rows sessions 42-54's)
S59 = "h200x2/cp_s59/"
TIMED_S59 = {"fa4, 64k/GPU": (S59 + "fa464kbcd__1.csv", S59 + "fa464kfc__1.csv"),
             "triton, 64k/GPU": (S59 + "tri64kdocs__1.csv", S59 + "tri64kfc__1.csv")}
CP_NOW = {f"{b}, {s}/GPU": f"h200x2/cp/cp_h200x2__{b}_{s}.csv"
          for s in ("16k", "64k") for b in ("fa4", "triton")}
# the table as session 59 left it (session 60 replaced FA4's 16k cp 2 rows and both kernels'
# 64k full cp 2 rows; the files as they stood are in cp_history)
CP_S59 = {**CP_NOW, **{f"{b}, {s}/GPU": f"h200x2/cp_history/cp_h200x2__{b}_{s}__{sha}.csv"
                       for (b, s), sha in {("fa4", "16k"): "a0f91b663572",
                                           ("fa4", "64k"): "a52890e069c0",
                                           ("triton", "64k"): "a52890e069c0"}.items()}}
# the table as session 60 left it (session 61 replaced Triton's 16k causal and 64k
# full_document cp 2 rows; the files as they stood are in cp_history)
CP_S60 = {**CP_NOW, "triton, 16k/GPU": "h200x2/cp_history/cp_h200x2__triton_16k__6b2de9ca4445.csv",
          "triton, 64k/GPU": "h200x2/cp_history/cp_h200x2__triton_64k__22aa09620e4c.csv"}


def timed_s59_table() -> str:
    return timed_table(TIMED_S59, 2, build=True)


def timed_s59_summary() -> str:
    return timed_summary(TIMED_S59, 2)


def _table_summary(files: dict[str, str]) -> str:
    """issue 15's cp 2 table (``files``: {run: file}): cells where magi, and magi_timed (where
    its run measured it), reach the best baseline of the same run, and the cells below."""
    (magi, n), (timed, n_timed) = (
        [sum(c) for c in zip(*(_cp_wins(relpath, kernel) for relpath in files.values()))]
        for kernel in ("magi", "magi_timed"))
    below = []
    for run, relpath in files.items():
        for (mask, cp, direction), values in _cp_cells(relpath).items():
            over = {k: _magi_over_best(values, k) for k in ("magi", "magi_timed") if k in values}
            if cp == 2 and min(over.values()) < 1.0:
                below.append(f"{run} {mask} {direction} "
                             + " / ".join(f"{k} {r:.4f}" for k, r in over.items()))
    return (f"magi >= the best baseline on {magi} of {n} cp 2 cells, magi_timed on {timed} of "
            f"the {n_timed} its runs measured; below 1.0: {'; '.join(below)}")


def table_s59_summary() -> str:
    return _table_summary(CP_S59)


def build_s59() -> str:
    """The range of magi's and magi_timed's key builds (s, rank 0) over this session's runs
    at cp 2 (64k) and cp 4 (16k)."""
    rows = _files(tuple(f for runs in (TIMED_S59, TIMED_CP4_S59) for fs in runs.values()
                        for f in fs))
    secs = {k: rows[rows.kernel == k].build_ms / 1e3 for k in ("magi", "magi_timed")}
    return (f"magi's key {secs['magi'].min():.0f}-{secs['magi'].max():.0f} s, magi_timed's "
            f"after it {secs['magi_timed'].min():.0f}-{secs['magi_timed'].max():.0f} s")


# -- session 60 (one node of 4 H200s): the bench-vs-key probe at cp 2 (cp_ab.py --clock both);
# 64k full with magi_timed (Triton; FA4 twice: under the cut's old 2% rule, then under 1% for
# the forward); FA4 16k again; results/h200x2/cp/'s FA4 16k cp 2 rows and both kernels' 64k
# full cp 2 rows replaced by this session's runs
S60 = "h200x2/cp_s60/"
KEY_CLOCK_S60 = {"triton, 16k/GPU": S60 + "ab_key_triton__cp_ab.csv",
                 "fa4, 16k/GPU": S60 + "ab_key_fa4__cp_ab.csv"}
TIMED_S60 = {"triton, 64k/GPU": (S60 + "tri64kfull__1.csv",),
             "fa4, 64k/GPU, 2% rule": (S60 + "fa464kfull_min2__1.csv",),
             "fa4, 64k/GPU": (S60 + "fa464kfull__1.csv",),
             "fa4, 16k/GPU": (S60 + "fa416k__1.csv",)}


def key_clock_s60_table() -> str:
    return key_clock_table(KEY_CLOCK_S60)


def key_clock_s60_moves() -> str:
    return key_clock_moves(KEY_CLOCK_S60)


def timed_s60_table() -> str:
    return timed_table(TIMED_S60, 2, build=True)


def timed_s60_summary() -> str:
    return timed_summary(TIMED_S60, 2)


def cut_s60_table() -> str:
    """magi's timed cut on the full runs: the key's whole / cut ms, the cut's gain, what the
    key kept (the row's ``cut=``: the directions cut, "-" none), and magi / the best baseline."""
    lines = ["| run | dir | key: whole / cut ms | cut faster by | directions cut | magi / best |",
             "|---|---|---|---|---|---|"]
    for run, (relpath,) in TIMED_S60.items():
        for (mask, cp, d), values in _cp_cells(relpath).items():
            if mask != "full":
                continue
            whole, cut = _cut_ms(relpath, mask, cp, d)
            kept = _row_note(relpath, "magi", mask, cp, "cut", d)
            lines.append(f"| {run} | {d} | {whole:.1f} / {cut:.1f} | {1 - cut / whole:.2%} | "
                         f"{kept} | {_magi_over_best(values):.3f} |")
    return "\n".join(lines)


def fa4_64k_full_cut_gains() -> str:
    """The cut forward's gain at key time (1 - cut / whole) in every magi key of FA4 full at
    64k a GPU, cp 2, in results/h200x2 and h100x2 (one per run: the files under cp/ and
    cp_history/ repeat their runs' rows), in time order, each with what the key kept."""
    seen = {}
    for machine in ("h200x2", "h100x2"):
        for path in sorted((RESULTS / machine).rglob("*.csv")):
            frame = pd.read_csv(path, comment="#")
            if not {"kernel", "mask", "cp_size", "seqlen", "message", "run_id"} <= set(frame):
                continue
            rows = frame[(frame.kernel == "magi") & (frame["mask"] == "full")
                         & (frame.cp_size == 2) & (frame.seqlen == 2 * 65536)
                         & frame.message.astype(str).str.contains("local=fa4")
                         & frame.message.astype(str).str.contains("cut_ms=")]
            for _, row in rows.iterrows():
                whole, cut = _cut_pair(_note(row.message, "cut_ms"), "fwd")
                kept = "cut" if "fwd" in _note(row.message, "cut") else "whole"
                seen[row.run_id] = (row.time, 1 - cut / whole, kept)
    return ", ".join(f"{gain:.2%} ({kept})" for _, gain, kept in sorted(seen.values()))


def fa4_16k_moves_s60() -> str:
    """FA4's 16k cp 2 cells whose magi / best crossed 1.0 between session 58's run and 60's."""
    key = "fa4, 16k/GPU"
    return cp_moves({key: CP_S60[key]}, {key: CP_S59[key]}, 2)


def table_s60_summary() -> str:
    return _table_summary(CP_S60)


# -- session 61 (one node of 4 H200s): the forward's 1% rule against fixed-cut arms
# (cp_ab.py: magi_whole against magi_cut_fwd, interleaved); Triton's 16k causal and 64k
# full_document cp 2 rows replaced by this session's runs (eight strategies a run)
S61 = "h200x2/cp_s61/"
# {run: (cp_ab.py stem, the official file whose key timed the cells where the launch built no
# magi key)}
FWD_CUT_S61 = {"triton, 16k/GPU": (S61 + "cf", CP_S60["triton, 16k/GPU"]),
               "triton, 64k/GPU": (S61 + "cf64", CP_S60["triton, 64k/GPU"]),
               "triton, 16k/GPU, in the band": (S61 + "bandtri", CP_NOW["triton, 16k/GPU"]),
               "fa4, 16k/GPU, in the band": (S61 + "bandfa4", CP_NOW["fa4, 16k/GPU"])}
TIMED_S61 = {"triton, 16k/GPU": (S61 + "tri16kc__1.csv",),
             "triton, 64k/GPU": (S61 + "tri64kfd__1.csv",)}


def fwd_cut_s61_table() -> str:
    """Per cell: the cut forward's gain at key time and what that key kept (this launch's magi
    key where it built one, else the official row's), and the fixed arms' interleaved forwards
    (medians, ms) with the cut's gain in the bench."""
    lines = ["| run | mask | key: cut forward faster by (whose key) | key kept | "
             "magi_whole fwd ms | magi_cut_fwd fwd ms | cut faster by in the bench |",
             "|---|---|---|---|---|---|---|"]
    for run, (stem, official) in FWD_CUT_S61.items():
        med = _ab_medians(stem + "__cp_ab.csv")
        for mask in dict.fromkeys(m for m, _, _ in med):
            note = _magi_note(stem + ".log", mask, "cut_ms")
            if note is not None:
                (whole, cut), cuts = (_cut_pair(note, "fwd"),
                                      _magi_note(stem + ".log", mask, "cut"))
            else:
                (whole, cut), cuts = (_cut_ms(official, mask, 2, "fwd"),
                                      _row_note(official, "magi", mask, 2, "cut"))
            ms = med[mask, "fwd", "magi_whole"], med[mask, "fwd", "magi_cut_fwd"]
            lines.append(f"| {run} | {mask} | {1 - cut / whole:.1%} "
                         f"({'launch' if note else 'table'}) | "
                         f"{'cut' if 'fwd' in cuts else 'whole'} | {ms[0]:.2f} | {ms[1]:.2f} | "
                         f"{1 - ms[1] / ms[0]:.1%} |")
    return "\n".join(lines)


def timed_s61_table() -> str:
    return timed_table(TIMED_S61, 2, build=True)


def triton_moves_s61() -> str:
    """magi / the best baseline on the cp 2 cells this session's runs replaced: the table as
    session 60 left it -> now."""
    moves = []
    for key, (relpath,) in TIMED_S61.items():
        before, now = _cp_cells(CP_S60[key]), _cp_cells(CP_NOW[key])
        for cell in _cp_cells(relpath):
            moves.append(f"{key.split('/')[0]} {cell[0]} {cell[2]} "
                         f"{_magi_over_best(before[cell]):.3f} -> "
                         f"{_magi_over_best(now[cell]):.3f}")
    return ", ".join(moves)


def table_s61_summary() -> str:
    return _table_summary(CP_NOW)


def whole_cut_clocks_s61() -> str:
    """Triton 64k full_document's forward, magi_whole and magi_cut_fwd, under the runner's clock
    and the key's (interleaved, ``--clock both``): each arm's ms both ways and how much faster
    the cut runs under each."""
    med = _ab_medians(S61 + "kc64__cp_ab.csv")
    ms = {(arm, c): med["full_document", "fwd", f"{arm}{c}"]
          for arm in ("magi_whole", "magi_cut_fwd") for c in ("", "@key")}
    gains = [1 - ms["magi_cut_fwd", c] / ms["magi_whole", c] for c in ("", "@key")]
    return (f"whole {ms['magi_whole', '']:.1f} ms under the runner's clock against "
            f"{ms['magi_whole', '@key']:.1f} under the key's, cut {ms['magi_cut_fwd', '']:.1f} "
            f"against {ms['magi_cut_fwd', '@key']:.1f}: the cut faster by {gains[0]:.1%} under "
            f"the runner's clock, {gains[1]:.1%} under the key's")


# -- session 63 (2 H200s, the session's last ~300 s): magi against HybridCP on the 16k document
# cells at cp 2 (cp_ab.py, Triton, interleaved rounds), after the forward's under-PV plan rule
CP_AB_S63 = "h200x2/cp_ab_s63/"


def cp_ab_s63_table() -> str:
    return ab_masks_table(CP_AB_S63 + "cp_ab_doc_masks_5rounds.csv")
