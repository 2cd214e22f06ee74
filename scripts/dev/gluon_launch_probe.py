"""Where the host time of one FFA call goes at short sequences (notes/host_overhead.md).

At 1k tokens FFA's forward costs ~260 us of host time per call against FlexAttention's ~80
(scripts/device/host_overhead.py, session 36), so the sweep times the host there. This times
each layer of the Gluon forward's and backward's launch alone, host time per call while a sleep
kernel holds the GPU (bench.metrics.host_us_per_call):

  descriptors     the four (fwd) TMA descriptors built
  jit_launch      the kernel launched through JITFunction.run with prebuilt arguments
  compiled_run    the compiled kernel's own launcher with the arguments bound once (the floor)
  launch          gluon_forward.launch_fwd / gluon_backward.launch_bwd whole
  library         flex_flash_attn_func (forward, no grad) / its backward via autograd.grad

For the backward also ``backend_bwd`` (the Triton backend's bwd called directly, the route the
library takes) and ``autograd_identity`` (torch.autograd.grad through a node that returns its
gradients: the engine's own cost). ``--profile``: a cProfile of the library's backward (top
functions by own time) in ``gluon_launch_probe_profile.txt``.

``launch`` and ``library`` run twice: with the library's cached launches (kernels/triton/
_launch.py, column cached=1) and through Triton's JITFunction.run on every call (cached=0).

    python3 scripts/dev/gluon_launch_probe.py --out $OUT [--seqlens 1024 4096]

Rows: ``gluon_launch_probe.csv`` (mask, seqlen, direction, layer, cached, host_us).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.metrics import host_profile, host_us_per_call  # noqa: E402
from magi_attention.common import AttnSlice  # noqa: E402
from magi_attention.functional import flex_attn_plan, flex_flash_attn_func  # noqa: E402
from magi_attention.kernels.block_sparse import plan_block_sparse  # noqa: E402
from magi_attention.kernels.triton import _launch  # noqa: E402
from magi_attention.kernels.triton import gluon_backward as gb  # noqa: E402
from magi_attention.kernels.triton import gluon_forward as gf  # noqa: E402

HQ, HKV, D = 64, 8, 128


def _slices(name: str, seqlen: int) -> list[AttnSlice]:
    if name == "full":
        return [AttnSlice.make(0, seqlen, 0, seqlen, "full")]
    doc = seqlen // 4  # four equal causal documents
    return [AttnSlice.make(s, s + doc, s, s + doc, "causal") for s in range(0, seqlen, doc)]


def _bound(jit_fn, grid, args, kwargs):
    """The compiled kernel and its bound argument values (every parameter, in order)."""
    compiled = jit_fn[grid](*args, **kwargs)
    device = torch.cuda.current_device()
    binder = jit_fn.device_caches[device][4]
    bound_args, _, _ = binder(*args, **kwargs)
    return compiled, list(bound_args.values())


def _direct(compiled, grid, values):
    stream = torch.cuda.current_stream().cuda_stream
    g = tuple(grid) + (1,) * (3 - len(grid))
    return lambda: compiled.run(g[0], g[1], g[2], stream, compiled.function,
                                compiled.packed_metadata, None, None, None, *values)


def fwd_layers(q, k, v, plan, slices, seqlen):
    scale = D ** -0.5
    descs = lambda: (gf._descriptor(q, gf.HALF_M), gf._descriptor(k, plan.block_n),  # noqa: E731
                     gf._descriptor(v, plan.block_n), gf._descriptor(q, gf.HALF_M))
    out = torch.empty_like(q)
    lse = torch.empty(seqlen, HQ, dtype=torch.float32, device=q.device)
    n_items = plan.num_q_tiles * HQ
    grid = (min(n_items, gf._sm_count(q.device)), )
    args = (gf._descriptor(q, gf.HALF_M), gf._descriptor(k, plan.block_n),
            gf._descriptor(v, plan.block_n), gf._descriptor(out, gf.HALF_M), lse, plan.q_tile_ptr,
            plan.q_tile_kt, plan.q_tile_num_full, plan.q_tile_order, plan.row_lo, plan.row_hi,
            seqlen, HQ, scale * gf.LOG2E, HQ // HKV, n_items, plan.num_q_tiles)
    kwargs = dict(NUM_BUF=gf.NUM_BUF, ROW_INTERVALS=plan.row_lo.shape[1],
                  CONSUMER_REGS=gf.CONSUMER_REGS, PRODUCER_REGS=gf.PRODUCER_REGS, num_warps=4,
                  maxnreg=gf.MAXNREG)
    compiled, values = _bound(gf._fwd_kernel, grid, args, kwargs)
    fplan = flex_attn_plan(slices, seqlen_q=seqlen, seqlen_k=seqlen)
    return {"descriptors": descs,
            "jit_launch": lambda: gf._fwd_kernel[grid](*args, **kwargs),
            "compiled_run": _direct(compiled, grid, values),
            "launch": lambda: gf.launch_fwd(q, k, v, plan, scale),
            "library": lambda: flex_flash_attn_func(q, k, v, fplan)}, fplan


class _Identity(torch.autograd.Function):
    """The autograd engine's own cost: a node whose backward returns its gradients as they are."""

    @staticmethod
    def forward(ctx, q, k, v):
        return q.clone(), k.clone(), v.clone()

    @staticmethod
    def backward(ctx, dq, dk, dv):
        return dq, dk, dv


def bwd_layers(q, k, v, bplan, fplan):
    from magi_attention.kernels import triton as tk
    scale = D ** -0.5
    out, meta = flex_flash_attn_func(q, k, v, fplan)
    lse = meta.lse
    dout = torch.randn_like(q)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    out_g = flex_flash_attn_func(qg, kg, vg, fplan)[0]
    ident = _Identity.apply(qg, kg, vg)
    grads = tuple(torch.ones_like(t) for t in ident)
    return {"launch": lambda: gb.launch_bwd(dout, q, k, v, out, lse, bplan, scale),
            "backend_bwd": lambda: tk.bwd(dout, q, k, v, out, lse, fplan, scale),
            "autograd_identity": lambda: torch.autograd.grad(ident, (qg, kg, vg), grads,
                                                             retain_graph=True),
            "library": lambda: torch.autograd.grad(out_g, (qg, kg, vg), dout,
                                                   retain_graph=True)}


def _profile(fn, calls: int, title: str, out: Path) -> None:
    text = host_profile(fn, calls, top=25, orders=("tottime", "cumulative"))
    with (out / "gluon_launch_probe_profile.txt").open("a") as f:
        f.write(f"==== library bwd {title}, {calls} calls\n{text}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--masks", nargs="+", default=["full", "causal_document"])
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    with (args.out / "gluon_launch_probe.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["mask", "seqlen", "direction", "layer", "cached", "host_us"])
        w.writeheader()
        for seqlen in args.seqlens:
            q = torch.randn(seqlen, HQ, D, device=dev, dtype=torch.bfloat16)
            k, v = (torch.randn(seqlen, HKV, D, device=dev, dtype=torch.bfloat16)
                    for _ in range(2))
            for name in args.masks:
                slices = _slices(name, seqlen)
                plan = plan_block_sparse(slices, seqlen, seqlen, gf.BLOCK_M, gf.BLOCK_N, dev)
                bplan = plan_block_sparse(slices, seqlen, seqlen, gb.BLOCK_M, gb.BLOCK_N, dev)
                fwd, fplan = fwd_layers(q, k, v, plan, slices, seqlen)
                layers = [("fwd", n, fn) for n, fn in fwd.items()]
                layers += [("bwd", n, fn) for n, fn in bwd_layers(q, k, v, bplan, fplan).items()]
                for direction, layer, fn in layers:
                    for cached in ((True, False) if layer in ("launch", "library") else (False,)):
                        _launch.ENABLED = cached
                        try:
                            fn()  # compiles, keeps the cached handle
                            us = f"{host_us_per_call(fn, args.calls):.1f}"
                        except Exception as e:  # a layer that fails: a row, not a lost run
                            us = f"error: {type(e).__name__}: {e}"[:200]
                        w.writerow(dict(mask=name, seqlen=seqlen, direction=direction,
                                        layer=layer, cached=int(cached), host_us=us))
                        f.flush()
                        print(name, seqlen, direction, layer, int(cached), us, flush=True)
                        if args.profile and layer == "library" and direction == "bwd" and cached:
                            _profile(fn, args.calls, f"{name} {seqlen}", args.out)


if __name__ == "__main__":
    main()
