"""FFA with and without the cached launches (kernels/triton/_launch.py) beside FlexAttention at
short sequences, interleaved in rounds on one GPU (notes/host_overhead.md "Session 36").

At 1k-2k tokens a call's time is mostly its host's, and one sweep's rows of it move by up to
40% between runs; this times, per cell and round, each variant's host time per call (the GPU
held, bench.metrics.host_us_per_call) and its CUDA-event median as the sweep takes it, the
variants' order flipped every round, through the benchmark's own adapters.

    python3 scripts/dev/launch_ab.py --out $OUT --seqlens 1024 2048 --rounds 5

Rows: ``launch_ab.csv`` (variant, mask, seqlen, direction, round, host_us, device_us); variants
``ffa`` (cached launches), ``ffa_uncached`` (every launch through JITFunction.run), ``flex``.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.kernels import load_adapter  # noqa: E402
from bench.metrics import host_us_per_call, time_cuda_ms  # noqa: E402
from bench.problem import Shapes, make_inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.kernels.triton import _launch  # noqa: E402

MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window_causal",
         "block_causal_document")
VARIANTS = {"ffa": ("ffa", True), "ffa_uncached": ("ffa", False), "flex": ("flex", True)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--masks", nargs="+", default=list(MASKS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=30)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    fields = ["variant", "mask", "seqlen", "direction", "round", "host_us", "device_us"]
    with (args.out / "launch_ab.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        for seqlen in args.seqlens:
            shapes = Shapes(batch=1, seqlen=seqlen, num_heads_q=64, num_heads_kv=8, head_dim=128,
                            dtype="bfloat16")
            inputs = make_inputs(shapes, dev)
            for name in args.masks:
                mask = cell_mask(MaskChoice(label=name, name=name), seqlen, DataConfig(),
                                 num_heads_kv=8)
                prepared = {}
                for variant, (kernel, cached) in VARIANTS.items():
                    _launch.ENABLED = cached
                    prep = load_adapter(kernel).prepare(mask, shapes, dev, inputs)
                    prep.fwd(), prep.bwd()  # compiles (and keeps the cached handles)
                    prepared[variant] = (prep, cached)
                order = list(prepared)
                for r in range(args.rounds):
                    for variant in (order if r % 2 == 0 else order[::-1]):
                        prep, cached = prepared[variant]
                        _launch.ENABLED = cached
                        for direction, fn in (("fwd", prep.fwd), ("bwd", prep.bwd)):
                            row = dict(variant=variant, mask=name, seqlen=seqlen,
                                       direction=direction, round=r,
                                       host_us=f"{host_us_per_call(fn, args.calls):.1f}",
                                       device_us=f"{time_cuda_ms(fn, 3, 20) * 1e3:.1f}")
                            w.writerow(row)
                            f.flush()  # every row kept if the call is cut
                print(name, seqlen, "done", flush=True)
    _launch.ENABLED = True


if __name__ == "__main__":
    main()
