"""FFA on per-KV-head masks three ways, interleaved in rounds on one GPU (notes/ffa_triton.md
"Session 40"): the bench's earlier slice-and-cat (one flex_flash_attn_func a KV head, torch.cat,
autograd through the slices) against flex_flash_attn_per_kv_head with 1, 4 and 8 side streams,
so the gain of one autograd node and that of the streams are told apart.

    python3 scripts/dev/per_head_ab.py --out $OUT --seqlen 16384 --rounds 3
    python3 scripts/dev/per_head_ab.py --out /tmp/ab --seqlen 512 --heads 8 2 --backend reference

Rows: ``per_head_ab.csv`` (variant, mask, direction, round, ms, tflops)."""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.kernels._autograd import autograd_prepared  # noqa: E402
from bench.metrics import attn_flops, tflops_per_s, time_cuda_ms  # noqa: E402
from bench.problem import Shapes, make_inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.functional import (FlexAttnPlan, flex_flash_attn_func,  # noqa: E402
                                      flex_flash_attn_per_kv_head, per_kv_head)


def slice_cat(plans, group, backend):
    def attention(q, k, v):
        return torch.cat([flex_flash_attn_func(q[:, h * group:(h + 1) * group], k[:, h:h + 1],
                                               v[:, h:h + 1], plan, backend=backend,
                                               return_lse=False)[0]
                          for h, plan in enumerate(plans)], dim=1)
    return attention


def per_head(plans, streams, backend):
    def attention(q, k, v):
        per_kv_head.MAX_STREAMS = streams
        return flex_flash_attn_per_kv_head(q, k, v, plans, backend=backend, return_lse=False)[0]
    return attention


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seqlen", type=int, default=16384)
    p.add_argument("--heads", type=int, nargs=2, default=[64, 8])
    p.add_argument("--masks", nargs="+", default=["block_sparse", "var_block_sparse"])
    p.add_argument("--backend", default="triton")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    default_streams = per_kv_head.MAX_STREAMS
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = "bfloat16" if dev.type == "cuda" else "float32"
    shapes = Shapes(batch=1, seqlen=args.seqlen, num_heads_q=args.heads[0],
                    num_heads_kv=args.heads[1], head_dim=128, dtype=dtype)
    inputs = make_inputs(shapes, dev)
    group = shapes.num_heads_q // shapes.num_heads_kv
    with (args.out / "per_head_ab.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["variant", "mask", "direction", "round", "ms", "tflops"])
        w.writeheader()
        for name in args.masks:
            mask = cell_mask(MaskChoice(label=name, name=name), args.seqlen, DataConfig(),
                             num_heads_kv=shapes.num_heads_kv)
            plans = [FlexAttnPlan.from_slices(list(s), args.seqlen) for s in mask.head_slices]
            variants = {"slice_cat": slice_cat(plans, group, args.backend)}
            variants.update({f"per_kv_head_s{n}": per_head(plans, n, args.backend)
                             for n in (1, 4, 8)})
            prepared = {v: autograd_prepared(fn, inputs, "thd") for v, fn in variants.items()}
            for prep in prepared.values():
                prep.fwd(), prep.bwd()  # plans, compiles
            for r in range(args.rounds):
                order = list(prepared) if r % 2 == 0 else list(prepared)[::-1]
                for variant in order:
                    prep = prepared[variant]
                    prep.fwd()  # MAX_STREAMS of this variant before bwd's replay
                    for direction, fn in (("fwd", prep.fwd), ("bwd", prep.bwd)):
                        ms = time_cuda_ms(fn, 3, 10)
                        flops = attn_flops(mask.area, shapes.num_heads_q, shapes.head_dim, 1, direction)
                        w.writerow(dict(variant=variant, mask=name, direction=direction, round=r,
                                        ms=f"{ms:.3f}", tflops=f"{tflops_per_s(flops, ms):.1f}"))
                        f.flush()
            print(name, "done", flush=True)
    per_kv_head.MAX_STREAMS = default_streams


if __name__ == "__main__":
    main()
