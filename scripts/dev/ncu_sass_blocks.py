"""Warp-stall samples of an ncu source page (SASS) grouped by how often each instruction ran:
the instructions of one basic block run equally often, so each group is a block (or a few),
and its share of the samples is the share of the kernel's time spent there.

    ncu --import r.ncu-rep --csv --page source --print-source sass > sass.csv
    python scripts/dev/ncu_sass_blocks.py --label qk_sparse sass.csv --out blocks.csv --top 8

Session 41 found the Gluon backward's row-table loop this way (a block run 5 times a partial
step: 15% of qk_sparse's samples, 29% of its instructions).
"""
from __future__ import annotations

import argparse
import csv
from collections import defaultdict

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def blocks(path: str) -> list[dict]:
    """One dict per executed-count group, the largest share of samples first."""
    with open(path) as f:
        reader = csv.reader(f)
        next(reader)  # "Kernel Name", name
        header = next(reader)
        rows = [dict(zip(header, r)) for r in reader if len(r) == len(header)]
    groups: dict[float, list[float]] = defaultdict(lambda: [0.0, 0, 0.0])
    for r in rows:
        runs = _num(r[EXECUTED])
        g = groups[runs]
        g[0] += _num(r[SAMPLES])
        g[1] += 1
        g[2] += runs
    samples = sum(g[0] for g in groups.values()) or 1.0
    executed = sum(g[2] for g in groups.values()) or 1.0
    out = [{"executions": int(runs), "instructions": n, "sample_share": s / samples,
            "instruction_share": e / executed} for runs, (s, n, e) in groups.items()]
    return sorted(out, key=lambda b: -b["sample_share"])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("sass", nargs="+", help="ncu --page source --print-source sass CSVs")
    p.add_argument("--label", nargs="+", help="one label per file (default: the file name)")
    p.add_argument("--out", required=True)
    p.add_argument("--top", type=int, default=8)
    args = p.parse_args()
    labels = args.label or args.sass
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, ["kernel", "executions", "instructions", "sample_share",
                               "instruction_share"])
        w.writeheader()
        for label, path in zip(labels, args.sass):
            for b in blocks(path)[:args.top]:
                w.writerow({"kernel": label, **b})


if __name__ == "__main__":
    main()
