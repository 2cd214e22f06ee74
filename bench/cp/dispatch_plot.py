"""Figures of MagiAttention's dispatch, per mask and cp size: which rank owns each q chunk and
how much attention each chunk and each rank computes, and the KV tokens group_cast moves to each
rank against a ring's; plus one summary of group_cast / ring against cp size for every mask.

    python -m bench.cp.dispatch_plot --out plots/dispatch [--seqlen 65536] [--cp-sizes 2 4 8]

writes ``<out>/<mask>/dispatch_cp<N>.png``, ``<out>/comm_volume.png`` and ``comm_volume.csv``.
Computed by the solver on CPU (no GPU, no result file); documents come from ``bench.data`` with
seed 0. A ring moves every other rank's whole shard to
each rank, (cp_size - 1) * S / cp_size tokens; group_cast moves only the remote key ranges that
some local query row touches (forward; the backward's group_reduce moves as much back).
"""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bench.barplot import DPI, label_x, save_figure  # noqa: E402
from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import MASK_NAMES, build_mask  # noqa: E402
from magi_attention.meta import AttnShape, OverlapConfig, SliceArray, solve_magi_meta  # noqa: E402

__all__ = ["DispatchStats", "dispatch_stats", "dispatch_figure", "volume_figure", "write_figures",
           "main"]

# the KV bytes per token cancel in every ratio drawn here; heads and head_dim only fix the size
SHAPE = AttnShape(num_heads_q=32, num_heads_kv=8, head_dim=128)


@dataclass(frozen=True)
class DispatchStats:
    """One (mask, cp_size) solve. ``owner``, ``chunk_area``: int64 [num_chunks]; ``rank_area``,
    ``received_tokens``: int64 [cp_size] (KV tokens group_cast moves to each rank)."""

    mask: str
    seqlen: int
    cp_size: int
    chunk_size: int
    algorithm: str
    owner: np.ndarray
    chunk_area: np.ndarray
    rank_area: np.ndarray
    received_tokens: np.ndarray

    @property
    def ring_tokens_per_rank(self) -> int:
        return (self.cp_size - 1) * self.seqlen // self.cp_size

    @property
    def volume_ratio(self) -> float:
        """group_cast's total KV tokens over the ring's (1.0 at cp 1, where neither moves any)."""
        ring = self.ring_tokens_per_rank * self.cp_size
        return float(self.received_tokens.sum() / ring) if ring else 1.0

    @property
    def imbalance(self) -> float:
        return float(self.rank_area.max() / self.rank_area.mean()) if self.rank_area.sum() else 1.0


def dispatch_stats(mask: str, seqlen: int, cp_size: int, chunk_size: int = 1024,
                   algorithm: str = "min_heap", seed: int = 0) -> DispatchStats:
    """Solve the dispatch of ``mask`` at ``seqlen`` over ``cp_size`` ranks."""
    built = build_mask(mask, seqlen, doc_lens=sample_doc_lens(seqlen, seed=seed), seed=seed)
    meta = solve_magi_meta(SliceArray.from_slices(built.slices), seqlen, cp_size, chunk_size, 0,
                           SHAPE, algorithm, OverlapConfig(num_stages=1))
    received = np.bincount(meta.table.dst, weights=meta.table.lengths, minlength=cp_size)
    return DispatchStats(mask, seqlen, cp_size, chunk_size, algorithm, meta.dispatch.owner.copy(),
                         meta.dispatch.chunk_areas.copy(), meta.dispatch.bucket_areas(),
                         received.astype(np.int64))


def _rank_colors(cp_size: int):
    return [plt.get_cmap("tab20").colors[r % 20] for r in range(cp_size)]


def dispatch_figure(stats: DispatchStats) -> Figure:
    """Chunk owners and loads (top), each rank's load (bottom left) and its KV received against
    the ring's (bottom right)."""
    fig = plt.figure(figsize=(11, 6.5), dpi=DPI, layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=(1.2, 1))
    chunks, ranks, volume = fig.add_subplot(grid[0, :]), fig.add_subplot(grid[1, 0]), \
        fig.add_subplot(grid[1, 1])
    colors = _rank_colors(stats.cp_size)
    starts = np.arange(len(stats.owner)) * stats.chunk_size
    chunks.bar(starts, stats.chunk_area, width=stats.chunk_size, align="edge",
               color=[colors[r] for r in stats.owner], edgecolor="white", linewidth=0.3)
    chunks.set_xlim(0, stats.seqlen)
    chunks.set_xticks(np.linspace(0, stats.seqlen, 9),
                      [label_x(int(v)) for v in np.linspace(0, stats.seqlen, 9)])
    chunks.set_xlabel(f"q chunk (start token; {label_x(stats.chunk_size)} tokens each), "
                      "coloured by the rank that owns it")
    chunks.set_ylabel("attention area")
    positions = np.arange(stats.cp_size)
    ranks.bar(positions, stats.rank_area, color=colors)
    ranks.set_xticks(positions, [str(r) for r in positions])
    ranks.set_xlabel("rank")
    ranks.set_ylabel("attention area")
    ranks.set_title(f"load per rank (max / mean {stats.imbalance:.3f})", fontsize=10)
    width = 0.4
    volume.bar(positions - width / 2, stats.received_tokens, width, label="group_cast",
               color="tab:blue")
    volume.bar(positions + width / 2, np.full(stats.cp_size, stats.ring_tokens_per_rank), width,
               label="ring", color="lightgray")
    volume.set_xticks(positions, [str(r) for r in positions])
    volume.set_xlabel("rank")
    volume.set_ylabel("KV tokens received (forward)")
    volume.set_title(f"group_cast / ring = {stats.volume_ratio:.3f}", fontsize=10)
    volume.legend(fontsize=8, loc="lower right")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors]
    fig.legend(handles, [f"rank {r}" for r in positions], loc="outside right upper", fontsize=8,
               title="owner")
    fig.suptitle(f"{stats.mask} | S {label_x(stats.seqlen)} | cp {stats.cp_size} | "
                 f"dispatch {stats.algorithm}", fontsize=11)
    return fig


def volume_figure(table: pd.DataFrame) -> Figure:
    """group_cast / ring against cp size, one line per mask; ``table`` as ``write_figures``
    writes it to comm_volume.csv."""
    fig = plt.figure(figsize=(9, 5.5), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    colors, markers = plt.get_cmap("tab20").colors, "os^Dv<>p"  # 16 masks, none alike
    for i, (mask, rows) in enumerate(table.groupby("mask", sort=False)):
        ax.plot(rows["cp_size"], rows["volume_ratio"], marker=markers[i % len(markers)],
                color=colors[i % len(colors)], label=mask)
    cp_sizes = sorted(table["cp_size"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(cp_sizes, [str(c) for c in cp_sizes])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("cp_size")
    ax.set_ylabel("group_cast KV tokens / ring KV tokens")
    first = table.iloc[0]
    ax.set_title(f"KV moved by MagiAttention against a ring | S {label_x(int(first['seqlen']))} | "
                 f"dispatch {first['algorithm']}", fontsize=11)
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


def write_figures(out_dir: str | os.PathLike, seqlen: int = 65536,
                  cp_sizes: Iterable[int] = (2, 4, 8), chunk_size: int = 1024,
                  algorithm: str = "min_heap", masks: Iterable[str] = MASK_NAMES) -> list[Path]:
    """Every (mask, cp_size) figure, the summary figure and its CSV; returns the paths."""
    out_dir = Path(out_dir)
    written, records = [], []
    for mask in masks:
        for cp_size in cp_sizes:
            stats = dispatch_stats(mask, seqlen, cp_size, chunk_size, algorithm)
            written.append(save_figure(dispatch_figure(stats),
                                       out_dir / mask / f"dispatch_cp{cp_size}.png"))
            records.append({"mask": mask, "seqlen": seqlen, "cp_size": cp_size,
                            "chunk_size": chunk_size, "algorithm": algorithm,
                            "group_cast_tokens": int(stats.received_tokens.sum()),
                            "ring_tokens": stats.ring_tokens_per_rank * cp_size,
                            "volume_ratio": round(stats.volume_ratio, 6),
                            "imbalance": round(stats.imbalance, 6)})
    table = pd.DataFrame(records)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "comm_volume.csv", index=False)
    written += [out_dir / "comm_volume.csv", save_figure(volume_figure(table),
                                                         out_dir / "comm_volume.png")]
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="figure folder, e.g. plots/dispatch")
    parser.add_argument("--seqlen", type=int, default=65536)
    parser.add_argument("--cp-sizes", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--chunk-size", type=int, default=1024)
    parser.add_argument("--algorithm", default="min_heap")
    parser.add_argument("--masks", nargs="+", default=list(MASK_NAMES))
    args = parser.parse_args(argv)
    paths = write_figures(args.out, args.seqlen, args.cp_sizes, args.chunk_size, args.algorithm,
                          args.masks)
    print(f"wrote {len(paths)} files under {args.out}")


if __name__ == "__main__":
    main()
