"""The Gluon backward's head chunks: fp32 dK/dV partials summed after the kernel (session 35)
against atomic adds into one fp32 buffer (session 36), time and peak memory, interleaved on one
GPU (notes/ffa_triton.md "Session 36").

The partials path is session 35's module, put beside the library's before the run:

    git show 93d336e:magi_attention/kernels/triton/gluon_backward.py \\
        > magi_attention/kernels/triton/_gluon_backward_s35.py
    python3 scripts/dev/dkv_add_ab.py --out $OUT --cells causal_document:16384 full:65536

Each cell: the plan's head_chunks_for, then ``--rounds`` rounds each timing both paths (the
order flips every round: the harness's position effect cancels), the median per path; the
peak memory of one call over what the inputs hold. Rows: ``dkv_add_ab.csv``.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.config import DataConfig, MaskChoice  # noqa: E402
from bench.metrics import allocated_gb, peak_mem_gb, reset_peak_mem, time_cuda_ms  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import gluon_backward, gluon_forward  # noqa: E402

HQ, HKV, D = 64, 8, 128
FIELDS = ("cell", "path", "head_chunks", "round", "ms", "peak_mb")


def peak_mb(fn) -> float:
    """Peak memory of one call of ``fn`` above what was allocated before it, in MB."""
    torch.cuda.synchronize()
    base = allocated_gb()
    reset_peak_mem()
    fn()
    torch.cuda.synchronize()
    return (peak_mem_gb() - base) * 1024


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cells", nargs="+", required=True, help="NAME:SEQLEN, e.g. causal:65536")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    old = importlib.import_module("magi_attention.kernels.triton._gluon_backward_s35")
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    with (args.out / "dkv_add_ab.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for spec in args.cells:
            name, seqlen = spec.split(":")
            n = int(seqlen)
            slices = list(cell_mask(MaskChoice(name, name), n, DataConfig(), HKV).slices)
            fplan = plan_block_sparse(slices, n, n, gluon_forward.BLOCK_M, gluon_forward.BLOCK_N,
                                      dev)
            bplan = plan_block_sparse(slices, n, n, gluon_backward.BLOCK_M,
                                      gluon_backward.BLOCK_N, dev)
            chunks = gluon_backward.head_chunks_for(bplan, HQ // HKV)
            q = torch.randn(n, HQ, D, device=dev, dtype=torch.bfloat16)
            k, v = (torch.randn(n, HKV, D, device=dev, dtype=torch.bfloat16) for _ in range(2))
            dout = torch.randn_like(q)
            out, lse, _ = gluon_forward.launch_fwd(q, k, v, fplan, D ** -0.5)
            paths = {"partials_s35": old.launch_bwd, "atomic_add": gluon_backward.launch_bwd}
            calls = {name_: (lambda fn=fn: fn(dout, q, k, v, out, lse, bplan, D ** -0.5))
                     for name_, fn in paths.items()}
            peaks = {name_: peak_mb(fn) for name_, fn in calls.items()}
            times = {name_: [] for name_ in calls}
            for r in range(args.rounds):
                for name_ in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
                    ms = time_cuda_ms(calls[name_], 2, args.repeat)
                    times[name_].append(ms)
                    w.writerow(dict(cell=spec, path=name_, head_chunks=chunks, round=r,
                                    ms=f"{ms:.4f}", peak_mb=f"{peaks[name_]:.1f}"))
                    f.flush()  # every row kept if the call is cut
            med = {name_: statistics.median(t) for name_, t in times.items()}
            ratio = med["atomic_add"] / med["partials_s35"]
            print(f"{spec} chunks={chunks} partials {med['partials_s35']:.3f} ms "
                  f"{peaks['partials_s35']:.0f} MB, atomic_add {med['atomic_add']:.3f} ms "
                  f"{peaks['atomic_add']:.0f} MB, ratio {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
