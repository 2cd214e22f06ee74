"""Sections on one H100: the GPU suite, the kernel sweeps and probes."""
from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

from magi_attention.kernels.block_sparse import plan_for
from magi_attention.kernels.plan import FlexAttnPlan

from ..data import sample_doc_lens
from ..masks import build_mask
from ._common import (DOC_MASKS, FFA_FA4_GOAL, K16, K64, KERNEL_MASKS, _bwd_orders,
                      _by_size_table, _cell_rows, _files, _helper, _k, _low_cells, _ncu_metric,
                      _pairs, _probe_ms, _pytest_counts, _span, _summed_counts, _tf,
                      _variant_ratios, _verdict, triton_s21_goals, triton_s21_table)
from ._paths import RESULTS


KERNELS_S26 = "h100/kernels/kernel_masks__16k_s26.csv"


def kernels_s26_table() -> str:
    return triton_s21_table(KERNELS_S26, (K16,))


def kernels_s26_goals() -> str:
    return triton_s21_goals(KERNELS_S26)


# -- session 15: the GPU suite and kernel_masks on one H100, the window patterns, v4 backward ---
H100_SUITE_LOG = "h100/tests/pytest_gpu_6e50c055a20c_6workers.log"
H100_FLASHINFER_LOG = "h100/tests/pytest_gpu_6e50c055a20c_flashinfer.log"
H100_RUNS = {**{s: "h100/kernels/kernel_masks__1k-2k-4k-8k-16k.csv"
                for s in (1024, 2048, 4096, 8192, K16)},
             **{s: "h100/kernels/kernel_masks__32k-64k.csv" for s in (32768, K64)}}
H100_KERNELS = ("sdpa", "cudnn", "fa2_torch", "fa3", "flashinfer", "flex", "ffa", "ffa_fa4")


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


# -- session 27: O from registers, the forward's threshold and default path, the row split's
# forward on a second stream, HybridCP capped, kernel_masks at 64k on an H100 -----------------
O_REGS_S27 = ("h100/probes_s27/rank_mask_probe_o_regs_1.csv",
              "h100/probes_s27/rank_mask_probe_o_regs_2.csv")
FWD_PATHS_S27 = "h100/ffa_triton/s27_gluon_vs_triton_fwd.csv"
FWD_ROUTE_S27 = "h100/ffa_triton/s27_gluon_vs_triton_fwd_route_cache.csv"
KERNELS_S27 = "h100/kernels/kernel_masks__64k_s27.csv"
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
    """The backward's key tile orders over the plan's heaviest first, per run."""
    return _bwd_orders({f"run {n}": relpath for n, relpath in enumerate(BWD_ORDERS_S27, 1)})


# -- session 34: issue 14's two Flex misses at 64k (H200, session 31) on one H100, two runs in a
# row on one machine (ffa and compiled FlexAttention only, the whole dout)
FLEX64K_S34 = {"a": "h100/kernels_s34/kernel_masks__ffa_flex_64k_a.csv",
               "b": "h100/kernels_s34/kernel_masks__ffa_flex_64k_b.csv"}


def flex64k_s34() -> str:
    """ffa / flex per run, mask and direction at 64k."""
    out = []
    for run, relpath in FLEX64K_S34.items():
        tf = _files((relpath,)).set_index(["kernel", "mask", "direction"]).tflops_per_s
        out.append(f"run {run}: " + ", ".join(
            f"{mask} {d} {tf['ffa', mask, d] / tf['flex', mask, d]:.2f}"
            for mask in ("causal", "causal_document") for d in ("fwd", "bwd")))
    return "; ".join(out)


# -- session 35: a kv head's q heads split over programs (head_chunks) ---------------------------
HEAD_CHUNKS_S35 = "h100/head_chunks_s35/"


def _probe_ratios(names: Iterable[str], base: str) -> pd.DataFrame:
    """Time of each probe variant over ``base``'s, per mask and run (rank_mask_probe rows)."""
    runs = []
    for run, name in enumerate(names):
        ms = _probe_ms(HEAD_CHUNKS_S35 + name)  # indexed (mask, strategy, rank): one each here
        runs.append(ms.div(ms[base], axis=0).drop(columns=base).assign(run=run))
    return pd.concat(runs)


def head_chunks_s35_ab() -> str:
    """bwd_heads_{2,4,8} / bwd_heads_1 (the first runs: bwd_heavy_first was the old grid then)."""
    r = _probe_ratios(("rank_mask_probe_a.csv", "rank_mask_probe_b.csv"), "bwd_heavy_first")
    out = []
    for mask, g in r.groupby(level=0, sort=True):
        cells = ", ".join(f"{c.split('_')[-1]}: " + " / ".join(f"{v:.3f}" for v in g[c])
                          for c in ("bwd_heads_2", "bwd_heads_4", "bwd_heads_8"))
        out.append(f"| {mask} | {cells} |")
    return "| mask | chunks: time / one program per kv head (run a / run b) |\n|---|---|\n" + \
        "\n".join(out)


def head_chunks_s35_rule() -> str:
    """The first rule (head_chunks_for before MIN_LIST_CV) over bwd_heads_1, two runs."""
    r = _probe_ratios(("rule_vs_heads_1_p1.csv", "rule_vs_heads_1_p2.csv"), "bwd_heads_1")
    return ", ".join(f"{mask} " + " / ".join(f"{v:.3f}" for v in g["bwd_heavy_first"])
                     for mask, g in r.groupby(level=0, sort=True))


def head_chunks_s35_ncu() -> str:
    """ncu of causal_document 64k: one program per kv head against one per q head."""
    out = []
    for chunks in (1, 8):
        path = (RESULTS / f"{HEAD_CHUNKS_S35}ncu_cd64k_heads_{chunks}.txt").read_text()
        out.append(f"{chunks} chunk{'s' if chunks > 1 else ''}: "
                   f"{_ncu_metric(path, 'Elapsed Cycles') / 1e6:.1f}M cycles, "
                   f"L2 hit {_ncu_metric(path, 'L2 Hit Rate'):.0f}%, "
                   f"DRAM {_ncu_metric(path, 'DRAM Throughput'):.0f}%")
    return "; ".join(out)


HEAD_CHUNKS_KERNELS = {K16: ("kernel_masks__ffa_flex_16k.csv",),
                       K64: ("kernel_masks__ffa_flex_64k_rule_v1.csv",
                             "kernel_masks__ffa_flex_64k_swc.csv")}


def head_chunks_s35_flex() -> str:
    """FFA / Flex per cell: 16k one run; 64k the first rule's run for the five masks where it
    chose as the final one does, sliding_window_causal from the rerun under the final rule (the
    newer rows: _files keeps the latest of a cell)."""
    rows = []
    for seqlen, names in HEAD_CHUNKS_KERNELS.items():
        ratio = dict(_pairs(_files(tuple(HEAD_CHUNKS_S35 + n for n in names)), "ffa", "flex"))
        for mask in KERNEL_MASKS:
            rows.append(f"| {mask} | {_k(seqlen)} | {ratio[mask, seqlen, 'fwd']:.2f} "
                        f"| {ratio[mask, seqlen, 'bwd']:.2f} |")
    return "| mask | S | fwd FFA / Flex | bwd FFA / Flex |\n|---|---|---|---|\n" + "\n".join(rows)


# -- session 36: dK/dV by atomic adds, FA4 in the same runs, cached launches ----------------------
S36_KERNELS = "h100/kernels_s36/"
S36_HOST = "h100/host_s36/"
S36_SWEEPS = (S36_KERNELS + "kernel_masks_16k__1.csv", S36_KERNELS + "kernel_masks_64k__1.csv")


def _ratio_cell(ratios: dict, cell: tuple) -> str:
    return f"{ratios[cell]:.2f}" if cell in ratios else "X"


def kernels_s36_table() -> str:
    """FFA over FA4 and over Flex per cell (one run per seqlen), and the backward's peak memory."""
    frame = _files(S36_SWEEPS)
    fa4, flex = dict(_pairs(frame, "ffa", "fa4")), dict(_pairs(frame, "ffa", "flex"))
    mem = frame[frame.direction == "bwd"].set_index(["kernel", "mask", "seqlen"]).peak_mem_gb
    rows = []
    for seqlen in (K16, K64):
        for mask in KERNEL_MASKS:
            cells = [_ratio_cell(r, (mask, seqlen, d)) for r in (fa4, flex) for d in ("fwd", "bwd")]
            gb = " / ".join(f"{mem[k, mask, seqlen]:.2f}" if pd.notna(mem.get((k, mask, seqlen)))
                            else "X" for k in ("ffa", "fa4", "flex"))
            rows.append(f"| {mask} | {_k(seqlen)} | " + " | ".join(cells) + f" | {gb} |")
    return ("| mask | S | fwd FFA / FA4 | bwd FFA / FA4 | fwd FFA / Flex | bwd FFA / Flex "
            "| bwd peak GB FFA / FA4 / Flex |\n|---|---|---|---|---|---|---|\n" + "\n".join(rows))


def kernels_s36_goals() -> str:
    """Issue 14's goals over these runs (full and causal against FA4; every mask against Flex)."""
    frame = _files(S36_SWEEPS)
    fa4 = _pairs(frame, "ffa", "fa4", ("full", "causal"))
    out = []
    for d, goal in (("fwd", 0.85), ("bwd", 0.75)):
        values = [r for (_, _, dd), r in fa4 if dd == d]
        out.append(f"{d} FFA / FA4 on full and causal {_span(values)} (goal {goal}: "
                   f"{_verdict(values, goal)})")
    return "; ".join(out) + "; FFA / Flex " + _low_cells(_pairs(frame, "ffa", "flex"), 1.2)


def dkv_add_s36() -> str:
    """Session 35's partials against the atomic adds: median time over 4 rounds, peak memory."""
    rows = _helper(S36_KERNELS + "dkv_add_ab.csv")
    med = rows.groupby(["cell", "path"]).agg(ms=("ms", "median"), mb=("peak_mb", "first"),
                                             chunks=("head_chunks", "first"))
    out = []
    for cell in rows.cell.unique():
        a, p = med.loc[(cell, "atomic_add")], med.loc[(cell, "partials_s35")]
        out.append(f"| {cell.replace(':', ' ')} | {int(a.chunks)} | {p.ms:.2f} | {a.ms:.2f} "
                   f"| {a.ms / p.ms:.3f} | {p.mb:.0f} | {a.mb:.0f} |")
    return ("| mask, S | chunks | partials ms | atomic adds ms | ratio | partials MB | "
            "atomic adds MB |\n|---|---|---|---|---|---|---|\n" + "\n".join(out))


def host_s36_probe() -> str:
    """Host us per call of each layer of the Gluon launches, before the change and after it
    (cached launches on / off in the same run)."""
    before = _helper(S36_HOST + "gluon_launch_probe_before.csv")
    after = _helper(S36_HOST + "gluon_launch_probe_after.csv")
    key = ["mask", "seqlen", "direction", "layer"]
    b = before.set_index(key).host_us
    a = after.pivot_table(index=key, columns="cached", values="host_us", sort=False)
    out = []
    for idx in a.index:
        on = f"{a.loc[idx, 1]:.0f}" if not pd.isna(a.loc[idx, 1]) else "-"
        out.append(f"| {idx[0]} {_k(idx[1])} {idx[2]} | {idx[3]} | {b[idx]:.0f} "
                   f"| {a.loc[idx, 0]:.0f} | {on} |")
    return ("| cell | layer | before | after, Triton's launch | after, cached launch |\n"
            "|---|---|---|---|---|\n" + "\n".join(out))


LAUNCH_AB_S36 = {"at 6ab73bd": "launch_ab.csv",
                 "with the stream read as Triton reads it": "launch_ab_stream.csv"}


def _launch_ab(name: str = "launch_ab.csv") -> pd.DataFrame:
    rows = _helper(S36_HOST + name)  # cached: the table and the summary read it once
    return rows.groupby(["seqlen", "mask", "direction", "variant"]).device_us.median().unstack()


def host_s36_ab() -> str:
    """Median CUDA-event time over 5 interleaved rounds: FFA cached / uncached, Flex."""
    med = _launch_ab()
    out = [f"| {m} {_k(s)} {d} | {r.ffa:.0f} | {r.ffa_uncached:.0f} | {r.flex:.0f} "
           f"| {r.ffa_uncached / r.ffa:.2f} | {r.flex / r.ffa:.2f} |"
           for (s, m, d), r in med.iterrows()]
    return ("| cell | FFA us | FFA, Triton's launch us | Flex us | speed-up of the cache "
            "| FFA speed / Flex |\n|---|---|---|---|---|---|\n" + "\n".join(out))


def host_s36_summary() -> str:
    """Per run of launch_ab.py and seqlen: cells where FFA reaches Flex, the cache's speed-up."""
    out = []
    for run, name in LAUNCH_AB_S36.items():
        for seqlen, g in _launch_ab(name).groupby(level=0):
            wins = int((g.flex >= g.ffa).sum())
            gain = g.ffa_uncached / g.ffa
            out.append(f"{run}, {_k(seqlen)}: FFA at least Flex's speed on {wins} of {len(g)} "
                       f"cells, the cache's speed-up {_span(list(gain))} (median "
                       f"{gain.median():.2f})")
    return "; ".join(out)


# -- session 38: is the first timing after a warm call slow? (scripts/dev/first_timing_probe.py,
# one H100, causal S x S, GQA 64:8, d128, forward + backward, one step a timing)
FIRST_TIMING_S38 = ("h100/probes_s38/first_timing_triton.csv", "h100/probes_s38/first_timing_fa4.csv")


def first_timing_s38() -> str:
    """Per kernel and seqlen: the first timing over the median of the four after it (range over
    the repeats and idle gaps), and the spread of all single timings (max / min)."""
    rows = pd.concat([_helper(p) for p in FIRST_TIMING_S38])
    parts = []
    for (kernel, seqlen), g in rows.groupby(["kernel", "seqlen"], sort=False):
        firsts = [r.ms[r.timing == 0].iloc[0] / r.ms[r.timing > 0].median()
                  for _, r in g.groupby(["idle_s", "repeat"])]
        parts.append(f"{kernel} {_k(seqlen)}: first / later {min(firsts):.2f}-{max(firsts):.2f}, "
                     f"single timings {g.ms.min():.1f}-{g.ms.max():.1f} ms "
                     f"(spread {g.ms.max() / g.ms.min():.2f})")
    return "; ".join(parts)


# -- session 39: PackGQA in the Triton forward (one H100, GQA 64:8, d128, bf16, 16k) ------------
# the bench's ffa with the packed route (default) and with MAGI_ATTENTION_PACK_GQA=0 (the route
# before) in one call, then compiled Flex (qk_sparse); Flex's per-head block_sparse and
# var_block_sparse rows come from a later call after its adapter stopped building their
# BlockMask over every cell (the first call's out-of-memory rows are older, so overridden);
# its hash_sparse cells did not finish within a step in either call (no row)
PACK_S39 = {"pack": ("h100/kernels_s39/sparse_16k_pack_on.csv",),
            "before": ("h100/kernels_s39/sparse_16k_pack_off.csv",),
            "flex": ("h100/kernels_s39/sparse_16k_flex.csv",
                     "h100/kernels_s39/sparse_16k_first_call.csv",
                     "h100/kernels_s39/sparse_16k_per_head_flex.csv")}
PACK_MASKS_S39 = ("block_sparse", "var_block_sparse", "hash_sparse", "qk_sparse")


def _pack_s39(name: str, mask: str, direction: str, missing: bool = False):
    """TFLOPs/s of the run ``name``'s cell; ``missing``: the text for a cell without one."""
    kernel = "flex" if name == "flex" else "ffa"
    frame = _files(PACK_S39[name])
    if missing:
        rows = _cell_rows(frame, kernel, mask, K16, direction)
        return f"X ({rows.status.iloc[0]})" if len(rows) else "not run"
    return _tf(frame, kernel, mask, K16, direction)


def _ffa_beside_flex(mask: str, direction: str):
    """FFA's TFLOPs/s from the call that measured Flex's cell: the same file where it holds an
    ffa row (the per-head call), else the packed run of the same call (qk_sparse)."""
    for relpath in reversed(PACK_S39["flex"]):
        frame = _files((relpath,))
        if _tf(frame, "flex", mask, K16, direction) is not None:
            same = _tf(frame, "ffa", mask, K16, direction)
            return same if same is not None else _pack_s39("pack", mask, direction)
    return None


def pack_s39_table() -> str:
    """Per sparse mask and direction: FFA packed, FFA's route before, Flex, and the ratios
    (FFA over Flex with FFA from the call that measured Flex)."""
    lines = ["| mask | dir | ffa (PackGQA route) | ffa, route before | flex | packed / before "
             "| ffa / flex, same call |", "|---|---|---|---|---|---|---|"]
    for mask in PACK_MASKS_S39:
        for d in ("fwd", "bwd"):
            names = ("pack", "before", "flex")
            on, off, flex = (_pack_s39(n, mask, d) for n in names)
            cells = [f"{v:.0f}" if v is not None else _pack_s39(n, mask, d, missing=True)
                     for n, v in zip(names, (on, off, flex))]
            ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
            lines.append(f"| {mask} | {d} | " + " | ".join(cells)
                         + f" | {ratio(on, off)} | {ratio(_ffa_beside_flex(mask, d), flex)} |")
    return "\n".join(lines)


def pack_s39_summary() -> str:
    """The packed route over the route before, forward and backward, over the four masks."""
    parts = []
    for d in ("fwd", "bwd"):
        gains = [_pack_s39("pack", m, d) / _pack_s39("before", m, d) for m in PACK_MASKS_S39]
        parts.append(f"{d} packed / before {_span(gains)}")
    return "; ".join(parts)


_SWEEP_ROW = re.compile(r"^\s*(?P<mask>\w+) S=\s*(?P<seqlen>\d+) (?P<dir>fwd|bwd)\s+\w+ "
                        r"(?P<variant>\S+)\s+ok\s+[\d.]+ ms (?P<tf>\d+) TFLOPs/s", re.MULTILINE)


def _sweep_log(relpath: str) -> pd.DataFrame:
    """The rows ffa_triton_sweep.py printed (mask, seqlen, dir, variant, TFLOPs/s)."""
    text = (RESULTS / relpath).read_text()
    return pd.DataFrame([{**m.groupdict(), "tf": float(m["tf"])} for m in _SWEEP_ROW.finditer(text)])


def pack_sweep_s39_table() -> str:
    """The Triton forward unpacked and packed (default and short-row tiles) and the library's
    route before (Gluon where its plan suits), per mask, from the sweep's log."""
    rows = _sweep_log("h100/ffa_triton_s39/pack_sweep.log")
    rows = rows[rows.dir == "fwd"]
    cols = {"fwd_tma_128x64_w4_s3_p2": "unpacked", "fwd_tma_128x64_w8_s3_p2_r128":
            "unpacked, short-row tiles", "fwd_tma_pack_128x64_w4_s3_p2": "packed",
            "fwd_tma_pack_128x64_w8_s3_p2_r128": "packed, short-row tiles",
            "fwd_ptr_pack_128x64_w4_s3_p2": "packed, pointer K/V", "ffa": "route before"}
    lines = ["| mask | " + " | ".join(cols.values()) + " |", "|---" * (len(cols) + 1) + "|"]
    for mask, g in rows.groupby("mask", sort=False):
        tf = dict(zip(g.variant, g.tf))
        lines.append(f"| {mask} | " + " | ".join(f"{tf[v]:.0f}" for v in cols) + " |")
    return "\n".join(lines)


def d256_s39_table() -> str:
    """head_dim 256 tile variants (full and causal, 16k), from the sweep's log."""
    rows = _sweep_log("h100/ffa_triton_s39/d256_sweep.log")
    lines = ["| dir | tiles | full | causal |", "|---|---|---|---|"]
    for (d, variant), g in rows.groupby(["dir", "variant"], sort=False):
        tf = dict(zip(g["mask"], g.tf))
        lines.append(f"| {d} | {variant} | {tf['full']:.0f} | {tf['causal']:.0f} |")
    return "\n".join(lines)


def pytest_s39() -> str:
    """The session's GPU test runs on one H100 (head_dim 256, PackGQA, the packed route, the
    plan / no-sync tests)."""
    logs = {"head_dim 256 every mask": "h100/tests/pytest_triton_d256_s39.log",
            "routed PackGQA": "h100/tests/pytest_triton_routed_pack_s39.log",
            "plan / no-sync": "h100/tests/pytest_plan_gpu_s39.log"}
    parts = [f"{name}: {_pytest_counts(path)}" for name, path in logs.items()]
    parts.append("head_dim 256 odd seqlens and the PackGQA variants: "
                 f"{_summed_counts('h100/tests/pytest_triton_d256_odd_pack_s39.log')} "
                 "(4 processes)")
    return "; ".join(parts)


def d256_s39_flex() -> str:
    """The bench at head_dim 256 (causal 16k, GQA 64:8): FFA (FWD_WIDE / BWD_WIDE) against
    compiled Flex in one run."""
    frame = _files(("h100/kernels_s39/d256_causal_16k.csv",))
    parts = []
    for d in ("fwd", "bwd"):
        ffa, flex = (_tf(frame, k, "causal", K16, d) for k in ("ffa", "flex"))
        parts.append(f"{d} ffa {ffa:.0f}, flex {flex:.0f} TFLOPs/s (ffa / flex {ffa / flex:.2f})")
    return "; ".join(parts)


# Session 40: the four sparse masks at 16k, FFA and compiled Flex in one run after the session's
# changes (per-KV-head masks through flex_flash_attn_per_kv_head; the Gluon backward's table
# loop; Flex with the patterns' mask_mods and BlockMasks from the block-sparse index)
SPARSE_S40 = "h100/kernels_s40/sparse_16k_final.csv"
SPARSE_MASKS_S40 = ("block_sparse", "var_block_sparse", "hash_sparse", "qk_sparse")
# the per-head masks by the new function, then the earlier slice-and-cat adapter, one call
PER_HEAD_S40 = {"per_kv_head": "h100/kernels_s40/per_head_16k_per_kv_head.csv",
                "slice_cat": "h100/kernels_s40/per_head_16k_slice_cat.csv"}


def _mask_mod_of(frame: pd.DataFrame, mask: str) -> str:
    rows = _cell_rows(frame, "flex", mask, K16, "fwd")
    found = re.search(r"mask_mod=(\S+)", rows.message.iloc[0]) if len(rows) else None
    return found[1].rstrip(";").removeprefix(f"mask_mod_{mask}_") if found else "-"


def _sparse_ratios(path: str = SPARSE_S40, masks: Iterable[str] = SPARSE_MASKS_S40):
    """(mask, direction, ffa, flex, Flex's mask_mod) of one run's sparse cells at 16k."""
    frame = _files((path,))
    for mask in masks:
        for d in ("fwd", "bwd"):
            ffa, flex = _tf(frame, "ffa", mask, K16, d), _tf(frame, "flex", mask, K16, d)
            yield mask, d, ffa, flex, _mask_mod_of(frame, mask)


def sparse_s40_table(path: str = SPARSE_S40, masks: Iterable[str] = SPARSE_MASKS_S40) -> str:
    """Per sparse mask and direction: FFA, compiled Flex with the pattern's mask_mod, ratio."""
    lines = ["| mask | dir | ffa | flex (mask_mod) | ffa / flex |", "|---|---|---|---|---|"]
    for mask, d, ffa, flex, mod in _sparse_ratios(path, masks):
        lines.append(f"| {mask} | {d} | {ffa:.0f} | {flex:.0f} ({mod}) | {ffa / flex:.2f} |")
    return "\n".join(lines)


def sparse_s40_verdict(path: str = SPARSE_S40, masks: Iterable[str] = SPARSE_MASKS_S40) -> str:
    """FFA / Flex over the run's cells, and those under the 1.2x bar issue 14 sets."""
    ratios = {(m, d): a / b for m, d, a, b, _ in _sparse_ratios(path, masks)}
    short = [f"{m} {d} {r:.2f}" for (m, d), r in ratios.items() if r < 1.2]
    return (f"FFA / Flex {_span(list(ratios.values()))}; "
            + ("every cell >= 1.2" if not short else "below 1.2: " + ", ".join(short)))


def per_head_s40_table() -> str:
    """FFA on the per-KV-head masks: the new function against the earlier adapter, one call."""
    new, old = (_files((PER_HEAD_S40[k],)) for k in ("per_kv_head", "slice_cat"))
    lines = ["| mask | dir | slice-and-cat | flex_flash_attn_per_kv_head | new / old |",
             "|---|---|---|---|---|"]
    for mask in ("block_sparse", "var_block_sparse"):
        for d in ("fwd", "bwd"):
            a, b = _tf(old, "ffa", mask, K16, d), _tf(new, "ffa", mask, K16, d)
            lines.append(f"| {mask} | {d} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
    return "\n".join(lines)


def per_head_ab_s40() -> str:
    """The per-KV-head A/B (median of the rounds, TFLOPs/s): slice-and-cat and the library
    function with 1, 4 and 8 side streams."""
    d = pd.read_csv(RESULTS / "h100/kernels_s40/per_head_ab.csv")
    med = d.groupby(["mask", "direction", "variant"]).tflops.median().unstack()
    cols = ["slice_cat", "per_kv_head_s1", "per_kv_head_s4", "per_kv_head_s8"]
    lines = ["| mask | dir | " + " | ".join(cols) + " | s1 / slice_cat | s4 / s1 |",
             "|---|---|" + "---|" * (len(cols) + 2)]
    for (mask, direction), row in med.iterrows():
        lines.append(f"| {mask} | {direction} | " + " | ".join(f"{row[c]:.0f}" for c in cols)
                     + f" | {row.per_kv_head_s1 / row.slice_cat:.2f} "
                     f"| {row.per_kv_head_s4 / row.per_kv_head_s1:.2f} |")
    return "\n".join(lines)


def qk_bwd_s40_table() -> str:
    """The backward variants on qk_sparse and causal (16k, one process), Flex beside them."""
    d = pd.read_csv(RESULTS / "h100/ffa_triton_s40/qk_sparse_bwd_sweep.csv")
    d = d[(d.direction == "bwd") & (d.status == "ok")]
    tf = {(r.variant, r["mask"]): r.tflops_per_s for _, r in d.iterrows()}
    lines = ["| backward | causal | qk_sparse | qk_sparse / causal |", "|---|---|---|---|"]
    for variant in dict.fromkeys(d.variant):
        c, q = tf[(variant, "causal")], tf[(variant, "qk_sparse")]
        lines.append(f"| {variant} | {c:.0f} | {q:.0f} | {q / c:.2f} |")
    return "\n".join(lines)


def gluon_loop_s40_table() -> str:
    """The Gluon backward before (the table unrolled), with the loop over a transposed table
    (dropped) and with the loop (kept), one call on one H100."""
    old = pd.read_csv(RESULTS / "h100/ffa_triton_s40/gluon_bwd_loop_old.csv")
    new = pd.read_csv(RESULTS / "h100/ffa_triton_s40/gluon_bwd_loop_new.csv")
    tf = {("before", r["mask"]): r.tflops_per_s for _, r in old[old.direction == "bwd"].iterrows()}
    names = {"bwd_gluon_tma_b2": "transposed", "bwd_gluon_rowmajor_b2": "loop"}
    tf.update({(names[r.variant], r["mask"]): r.tflops_per_s
               for _, r in new[new.direction == "bwd"].iterrows()})
    lines = ["| mask | before (unrolled) | loop, transposed table (dropped) | loop (kept) "
             "| kept / before |", "|---|---|---|---|---|"]
    for mask in dict.fromkeys(old["mask"]):
        b, t, k = tf[("before", mask)], tf[("transposed", mask)], tf[("loop", mask)]
        lines.append(f"| {mask} | {b:.0f} | {t:.0f} | {k:.0f} | {k / b:.2f} |")
    return "\n".join(lines)


def pytest_s40() -> str:
    logs = {"Flex's pattern mask_mods and per-head BlockMasks": "h100/tests/pytest_flex_patterns_s40.log",
            "flex_flash_attn_per_kv_head and the per-head adapters": "h100/tests/pytest_per_kv_head_s40.log",
            "the same after Flex's index-built BlockMask": "h100/tests/pytest_flex_index_s40.log",
            "the Gluon backward tests after the table loop": "h100/tests/pytest_gluon_bwd_loop_s40.log"}
    return "; ".join(f"{name}: {_pytest_counts(path)}" for name, path in logs.items())


# Session 41: the Gluon backward's partial tiles from per-pair bitmaps (KeyTileBits), where rows
# hold several key intervals or more than the row table keeps (one H100)
BITS_VARIANTS_S41 = "h100/kernels_s41/bwd_bits_variants.csv"
SPARSE_S41 = "h100/kernels_s41/sparse_16k_bits.csv"
SPARSE_MASKS_S41 = ("qk_sparse", "global_sliding_window", "share_question", "var_block_sparse")
BITS_NAMES_S41 = {"bwd_det_tma_64x64_w4_s3_p2": "ordered", "bwd_gluon_tma_b2": "table",
                  "bwd_gluon_bits_b2": "bits"}


def bits_s41_table() -> str:
    """The backward variants per mask and seqlen, one process: the ordered Triton backward,
    the Gluon one with the row table (X: the plan has none) and with the bitmaps."""
    d = pd.read_csv(RESULTS / BITS_VARIANTS_S41)
    tf = {(BITS_NAMES_S41[r.variant], r["mask"], r.seqlen): r.tflops_per_s
          for _, r in d[d.status == "ok"].iterrows()}
    lines = ["| mask | S | ordered | gluon, table | gluon, bits | bits / table | bits / ordered |",
             "|---|---|---|---|---|---|---|"]
    for (mask, seqlen), _ in d.groupby(["mask", "seqlen"], sort=False):
        o, t, b = (tf.get((v, mask, seqlen)) for v in ("ordered", "table", "bits"))
        table, ratio = (f"{t:.0f}", f"{b / t:.2f}") if t else ("X", "-")
        lines.append(f"| {mask} | {_k(seqlen)} | {o:.0f} | {table} | {b:.0f} | {ratio} "
                     f"| {b / o:.2f} |")
    return "\n".join(lines)


def ncu_s41() -> str:
    """Where the Gluon backward's time went before the bitmaps (ncu, 16k): the blocks of the
    SASS by warp-stall samples; the row-table loop is the block qk_sparse runs 5 times a
    partial step (causal has no such block)."""
    d = pd.read_csv(RESULTS / "h100/kernels_s41/ncu_gluon_bwd_sass_blocks.csv")
    main = d.loc[d.groupby("kernel").sample_share.idxmax()].set_index("kernel")
    qk = d[d.kernel == "qk_sparse"].reset_index(drop=True)
    loop = qk.iloc[2]  # third by samples: after the main step and the idle default warps
    return (f"the step's main block {main.sample_share['causal']:.0%} of causal's samples, "
            f"{main.sample_share['qk_sparse']:.0%} of qk_sparse's; qk_sparse's table loop "
            f"({loop.instructions} instructions run {loop.executions} times) "
            f"{loop.sample_share:.0%} of its samples and {loop.instruction_share:.0%} of its "
            "instructions")


def sparse_s41_table() -> str:
    return sparse_s40_table(SPARSE_S41, SPARSE_MASKS_S41)


def sparse_s41_verdict() -> str:
    return sparse_s40_verdict(SPARSE_S41, SPARSE_MASKS_S41)


def pytest_s41() -> str:
    logs = {"the bitmap tests (every mask, 4 cases) with the table and route tests":
            "h100/tests/pytest_gluon_bits_s41.log",
            "after the partial-share rule, the route and per-KV-head tests":
            "h100/tests/pytest_bits_route_s41.log",
            "the Triton backend's default route on every mask (test_every_mask*)":
            "h100/tests/pytest_every_mask_s41.log",
            "steady-state calls without a sync, qk_sparse included":
            "h100/tests/pytest_nosync_triton_s41.log"}
    return "; ".join(f"{name}: {_pytest_counts(path)}" for name, path in logs.items())


FA4_SPARSE_S41 = "h100/kernels_s41/fa4_sparse_16k.csv"
FA4_MASKS_S41 = ("global_sliding_window", "qk_sparse", "share_question", "var_block_sparse",
                 "block_sparse", "hash_sparse")


def fa4_sparse_s41_table() -> str:
    """FFA's two backends on the masks FA4 runs through its bitmaps (16k, one run): the
    Triton backend (ffa) and the FA4 one (ffa_fa4), with FA4's share of partial pairs (of
    KV head 0's mask for the per-head masks)."""
    frame = _files((FA4_SPARSE_S41,))
    lines = ["| mask | FA4 pairs partial | dir | ffa (triton) | ffa_fa4 | ffa_fa4 / ffa |",
             "|---|---|---|---|---|---|"]
    for mask in FA4_MASKS_S41:
        built = build_mask(mask, K16, doc_lens=sample_doc_lens(K16, seed=0), seed=0)
        plan = FlexAttnPlan.from_slices(list(built.slices), K16, K16)
        tiles = plan_for(plan, 128, 128)  # none of these masks is native to FA4: all partial
        partial = 1 - tiles.num_full_pairs / tiles.num_tile_pairs  # tiles go through bitmaps
        for d in ("fwd", "bwd"):
            a, b = _tf(frame, "ffa", mask, K16, d), _tf(frame, "ffa_fa4", mask, K16, d)
            lines.append(f"| {mask} | {partial:.0%} | {d} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
    return "\n".join(lines)


def pytest_fa4_s41() -> str:
    return _pytest_counts("h100/tests/pytest_fa4_per_kv_head_s41.log")
