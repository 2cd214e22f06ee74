"""Issue-4 quick path on one GPU: FFA on FA4 against plain FA4, Triton FFA and FlexAttention.

Implementations: fa4 (plain FA4), ffa_fa4 (the fa4 backend as dispatched: FA4's native
dense/varlen/window kernels where they express the mask, else block sparse), ffa_fa4_bs (the
backend forced onto its block-sparse + mask_mod path), ffa_triton, flex (FlexAttention, compiled).
For each mask (full, causal, causal_document, sliding_window_causal, block_causal_document) and
seqlen (16k, 64k): GQA 64:8, head_dim 128, bf16, forward and backward, median of CUDA-event
timings, TFLOPs/s from the exact mask area (bench.metrics). Plain FA4 runs where FA4 can
express the mask itself: dense full / causal, varlen causal for causal_document, a causal window
for sliding_window_causal; block_causal_document has no plain-FA4 form. Before timing, FFA_FA4's
output is compared with plain FA4's (max abs diff in the CSV), a large-S check the unit tests
cannot afford. Writes <out>/fa4_bench.csv; the correctness suite is tests/magi_attention/kernels/
test_fa4.py (run it with pytest on the same machine).

    python scripts/device/fa4_check.py --out $OUT [--seqlens 16384 65536] [--masks ...]
"""
from __future__ import annotations

import argparse
import csv
import math
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.data import sample_doc_lens  # noqa: E402
from bench.masks import build_mask, convert  # noqa: E402
from bench.metrics import attn_flops, time_cuda_ms, tflops_per_s  # noqa: E402
from magi_attention.functional import FlexAttnPlan  # noqa: E402
from magi_attention.kernels import fa4  # noqa: E402

MASKS = ("full", "causal", "causal_document", "sliding_window_causal", "block_causal_document")
IMPLS = ("fa4", "ffa_fa4", "ffa_fa4_bs", "ffa_triton", "flex")
FIELDS = ("impl", "mask", "seqlen", "direction", "status", "runtime_ms", "tflops", "area",
          "max_abs_diff_vs_fa4", "message")


def _fa4_plain(mask, q, k, v, scale):
    """(fwd, bwd) closures of plain FA4 for masks it expresses itself, else raise UnsupportedMask."""
    from flash_attn.cute import interface as fa
    name = mask.name
    kw = dict(softmax_scale=scale)
    if name in ("full", "causal"):
        kw.update(causal=name == "causal")
    elif name == "sliding_window_causal":
        left, right = convert.to_window(mask)
        kw.update(window_size_left=left, window_size_right=right)
    elif name == "causal_document":
        cu, causal = convert.to_cu_seqlens(mask)
        cu_t = torch.tensor(cu, dtype=torch.int32, device=q.device)
        max_len = max(b - a for a, b in zip(cu[:-1], cu[1:]))
        kw.update(causal=causal, cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, max_seqlen_q=max_len,
                  max_seqlen_k=max_len)
    else:
        raise convert.UnsupportedMask(f"plain FA4 has no form for {name}")
    varlen = "cu_seqlens_q" in kw
    q4, k4, v4 = (t if varlen else t.unsqueeze(0) for t in (q, k, v))
    state = {}

    def fwd():
        state["out"], state["lse"], *_ = fa._flash_attn_fwd(q4, k4, v4, return_lse=True, **kw)
        return state["out"]

    def bwd(dout):
        return fa._flash_attn_bwd(q4, k4, v4, state["out"], dout if varlen else dout.unsqueeze(0),
                                  state["lse"], **kw)

    unbatch = (lambda o: o) if varlen else (lambda o: o[0])
    return (lambda: unbatch(fwd())), bwd


def _ffa(backend, mask, q, k, v, scale, **options):
    plan = FlexAttnPlan.from_slices(list(mask.slices), mask.seqlen, mask.seqlen)
    state = {}

    def fwd():
        state["out"], state["lse"], _ = backend.fwd(q, k, v, plan, scale, **options)
        return state["out"]

    def bwd(dout):
        return backend.bwd(dout, q, k, v, state["out"], state["lse"], plan, scale, **options)

    return fwd, bwd


def _flex(mask, q, k, v, scale):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    mask_mod = convert.to_mask_mod(mask, device=q.device)
    block_mask = create_block_mask(mask_mod, None, None, mask.seqlen, mask.seqlen, device=q.device)
    attn = torch.compile(flex_attention, dynamic=False)
    qh, kh, vh = (t.transpose(0, 1).unsqueeze(0).detach().requires_grad_() for t in (q, k, v))
    state = {}

    def fwd():
        with torch.no_grad():
            return attn(qh, kh, vh, block_mask=block_mask, scale=scale, enable_gqa=True)

    def bwd(dout):
        if "out" not in state:
            state["out"] = attn(qh, kh, vh, block_mask=block_mask, scale=scale, enable_gqa=True)
        return torch.autograd.grad(state["out"], (qh, kh, vh), dout.transpose(0, 1).unsqueeze(0),
                                   retain_graph=True)

    return (lambda: fwd()[0].transpose(0, 1)), bwd


def _make(impl, mask, q, k, v, scale):
    # ffa_fa4: as the backend runs (FA4's native kernels where they express the mask, else block
    # sparse); ffa_fa4_bs: always block sparse. One FlexAttnPlan per mask: no per-call host work.
    if impl == "ffa_fa4":
        return _ffa(fa4, mask, q, k, v, scale)
    if impl == "ffa_fa4_bs":
        return _ffa(fa4, mask, q, k, v, scale, native=False)
    if impl == "fa4":
        return _fa4_plain(mask, q, k, v, scale)
    if impl == "ffa_triton":
        from magi_attention.kernels import triton as triton_backend
        return _ffa(triton_backend, mask, q, k, v, scale)
    if impl == "flex":
        return _flex(mask, q, k, v, scale)
    raise ValueError(f"unknown impl {impl!r}")


def run(args, emit) -> list[dict]:
    rows = []
    device = torch.device("cuda")
    for seqlen in args.seqlens:
        g = torch.Generator(device=device).manual_seed(0)
        mk = lambda h: torch.randn(seqlen, h, args.head_dim, device=device, generator=g,  # noqa: E731
                                   dtype=torch.bfloat16)
        q, k, v, dout = mk(args.num_heads_q), mk(args.num_heads_kv), mk(args.num_heads_kv), mk(args.num_heads_q)
        scale = args.head_dim ** -0.5
        doc_lens = sample_doc_lens(seqlen, seed=0)
        for name in args.masks:
            mask = build_mask(name, seqlen, doc_lens=doc_lens)
            reference_out = None
            for impl in args.impls:
                base = dict(impl=impl, mask=name, seqlen=seqlen, area=mask.area)
                try:
                    t0 = time.time()
                    fwd, bwd = _make(impl, mask, q, k, v, scale)
                    out = fwd()
                    bwd(dout)
                    torch.cuda.synchronize()
                    setup_s = time.time() - t0
                    diff = ""
                    if impl == "fa4":
                        reference_out = out.float()
                    elif reference_out is not None:
                        diff = f"{(out.float() - reference_out).abs().max().item():.3e}"
                    for direction, fn in (("fwd", fwd), ("bwd", lambda: bwd(dout))):
                        ms = time_cuda_ms(fn, warmup=args.warmup, repeat=args.repeat)
                        tf = tflops_per_s(attn_flops(mask.area, args.num_heads_q, args.head_dim,
                                                     direction=direction), ms)
                        rows.append(dict(base, direction=direction, status="ok", runtime_ms=f"{ms:.3f}",
                                         tflops=f"{tf:.1f}", max_abs_diff_vs_fa4=diff,
                                         message=f"setup {setup_s:.1f}s"))
                        print(f"{impl:10s} {name:22s} {seqlen:6d} {direction} {ms:9.3f} ms {tf:7.1f} TFLOPs/s "
                              f"diff={diff or '-'} setup={setup_s:.1f}s", flush=True)
                    del fwd, bwd, out
                except convert.UnsupportedMask as e:
                    rows += [dict(base, direction=d, status="unsupported", message=str(e)) for d in ("fwd", "bwd")]
                except torch.cuda.OutOfMemoryError as e:
                    rows += [dict(base, direction=d, status="oom", message=str(e)[:200]) for d in ("fwd", "bwd")]
                except Exception as e:  # one failing cell must not stop the sweep
                    traceback.print_exc()
                    rows += [dict(base, direction=d, status="error", message=f"{type(e).__name__}: {e}"[:300])
                             for d in ("fwd", "bwd")]
                torch.cuda.empty_cache()
                emit(rows)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384, 65536])
    p.add_argument("--masks", nargs="+", default=list(MASKS))
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    p.add_argument("--num-heads-q", type=int, default=64)
    p.add_argument("--num-heads-kv", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    if not fa4.is_available():
        print("flash-attn-4 / SM90 GPU not available", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                heads=f"{args.num_heads_q}:{args.num_heads_kv}", head_dim=args.head_dim,
                warmup=args.warmup, repeat=args.repeat)

    def emit(rows):  # rewrite after every cell, so a run cut short still leaves its rows
        with open(out / "fa4_bench.csv", "w", newline="") as f:
            f.write("# " + " ".join(f"{k}={v}" for k, v in meta.items()) + "\n")
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()
            for r in rows:
                w.writerow({k: r.get(k, "") for k in FIELDS})

    rows = run(args, emit)
    print(f"wrote {out / 'fa4_bench.csv'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
