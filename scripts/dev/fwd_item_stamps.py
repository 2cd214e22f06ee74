"""Where the Gluon forward's time goes item by item: each consumer's global timer at an item's
start and after its O store (gluon_forward.launch_fwd(stamps=)), on the probe's inputs (GQA
64:8, head_dim 128, bf16, the persistent static grid).

    python scripts/dev/fwd_item_stamps.py --masks full causal causal_document --lpt 0 1 \
        --out stamps.csv.gz

Per mask (and items' order, --lpt) it prints the fit of an item's time to its listed key tiles
(time = fixed + per_tile x tiles), the gap between one item's end and the program's next start,
the span of the launch and the programs' balance; the rows (one per item and consumer) go to
--out in a compact form (``compact``: times from the launch's first start; program, turn, q
tile and head follow from gluon_forward.item_schedule, so a session's file stays small).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from fwd_fa4_probe import HQ, SCALE, inputs, probe_mask, probe_plan  # noqa: E402


def item_rows(plan, num_heads_q: int, programs: int, stamps: np.ndarray,
              lpt: bool | None = None, group: int = 1) -> pd.DataFrame:
    """One row per (item, consumer): its program and turn on the static grid, q tile, head,
    listed key tiles, start and end (ns); items as the kernel walks them
    (gluon_forward.item_schedule; ``lpt`` None: LPT_ITEMS; ``group``: q heads a KV head)."""
    from magi_attention.kernels.triton.gluon_forward import item_schedule
    ptr = plan.q_tile_ptr.cpu().numpy()
    sched = item_schedule(plan.q_tile_order.cpu().numpy(), num_heads_q, programs, lpt, group)
    base = pd.DataFrame({"item": np.arange(len(sched["q_tile"])), **sched,
                         "tiles": ptr[sched["q_tile"] + 1] - ptr[sched["q_tile"]]})
    return pd.concat([base.assign(consumer=c, start_ns=stamps[:, c, 0], end_ns=stamps[:, c, 1])
                      for c in (0, 1)], ignore_index=True)


def summarise(rows: pd.DataFrame) -> dict:
    """The fit time = fixed + per_tile x tiles over the items with keys (least squares, ns; NaN
    where every item lists as many tiles, as on full), the median gap from an item's end to the
    same consumer's next start in its program, the launch's span, the programs' balance (their
    key tiles' max over mean; the mean consumer's busy time over the span) and the timer's
    finest step seen."""
    keyed = rows[rows.tiles > 0]
    took = (keyed.end_ns - keyed.start_ns).to_numpy(dtype=float)
    per_tile, fixed = (np.polyfit(keyed.tiles.to_numpy(dtype=float), took, 1)
                       if keyed.tiles.nunique() > 1 else (np.nan, np.nan))
    ordered = rows.sort_values(["program", "consumer", "turn"])
    nxt = ordered.groupby(["program", "consumer"]).start_ns.shift(-1)
    gaps = (nxt - ordered.end_ns).dropna()
    steps = np.diff(np.unique(rows[["start_ns", "end_ns"]].to_numpy().ravel()))
    span = rows.end_ns.max() - rows.start_ns.min()
    one = rows[rows.consumer == 0]
    tiles = one.groupby("program").tiles.sum()
    busy = (rows.end_ns - rows.start_ns).groupby([rows.program, rows.consumer]).sum()
    return {"fixed_us": fixed / 1e3, "per_tile_us": per_tile / 1e3,
            "fixed_share": fixed * len(keyed) / took.sum(),
            "gap_median_us": float(np.median(gaps)) / 1e3 if len(gaps) else 0.0,
            "span_ms": span / 1e6,
            "tiles_max_over_mean": float(tiles.max() / tiles.mean()) if tiles.mean() else 1.0,
            "busy_over_span": float(busy.mean() / span) if span else 1.0,
            "timer_step_ns": int(steps[steps > 0].min()) if (steps > 0).any() else 0}


COMPACT_COLUMNS = ["mask", "seqlen", "lpt", "item", "consumer", "start_ns", "end_ns"]


def compact(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows --out keeps: COMPACT_COLUMNS, each launch's times from its first start."""
    out = rows[COMPACT_COLUMNS].copy()
    first = out.groupby(["mask", "seqlen", "lpt"]).start_ns.transform("min")
    out["start_ns"] -= first
    out["end_ns"] -= first
    return out


def measure(mask_name: str, seqlen: int, lpt: bool | None = None) -> pd.DataFrame:
    """One warm-up launch, then one with stamps (``lpt``: launch_fwd's lpt_items)."""
    from magi_attention.kernels.triton import gluon_forward as gf
    q, k, v, _ = inputs(seqlen)
    plan = probe_plan(probe_mask(mask_name, seqlen), seqlen, gf)
    n_items = plan.num_q_tiles * HQ
    stamps = torch.zeros(n_items, 2, 2, dtype=torch.int64, device="cuda")
    gf.launch_fwd(q, k, v, plan, SCALE, dynamic=False, lpt_items=lpt)
    gf.launch_fwd(q, k, v, plan, SCALE, dynamic=False, stamps=stamps, lpt_items=lpt)
    torch.cuda.synchronize()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = min(n_items, sms) if gf.PERSISTENT else n_items
    return item_rows(plan, HQ, programs, stamps.cpu().numpy(), lpt, HQ // k.shape[1]).assign(
        mask=mask_name, seqlen=seqlen, lpt=gf.LPT_ITEMS if lpt is None else lpt)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384])
    p.add_argument("--masks", nargs="+", default=["full", "causal", "causal_document"])
    p.add_argument("--out", default=None)
    p.add_argument("--lpt", type=int, nargs="+", default=[None],
                   help="launch_fwd(lpt_items=) arms, 0 and/or 1 (default: LPT_ITEMS)")
    args = p.parse_args()
    frames = []
    for s in args.seqlens:
        for m in args.masks:
            for lpt in args.lpt:
                rows = measure(m, s, None if lpt is None else bool(lpt))
                frames.append(rows)
                print({"mask": m, "seqlen": s, "lpt": lpt,
                       **{k: round(v, 4) for k, v in summarise(rows).items()}}, flush=True)
            if args.out:
                compact(pd.concat(frames)).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
