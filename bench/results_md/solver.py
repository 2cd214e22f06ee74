"""Sections from the dispatch solver on the CPU."""
from __future__ import annotations

import pandas as pd

from ._paths import ROOT


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
