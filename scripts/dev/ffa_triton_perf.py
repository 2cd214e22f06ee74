"""Time the Triton FFA backend against SDPA (flash, cuDNN; dense masks only) and compiled
FlexAttention on the same masks. GQA 64:8, head_dim 128, bf16 by default. Prints TFLOPs/s from the
exact mask area (fwd 4 * area * Hq * D, bwd 2.5x) and ratios to each peer.

    PYTHONPATH=. python scripts/dev/ffa_triton_perf.py --seqlens 16384 --masks full causal
    PYTHONPATH=. python scripts/dev/ffa_triton_perf.py --sweep   # tile configs of the Triton kernels
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import triton

from bench.masks import build_mask
from bench.masks.convert import to_mask_mod
from bench.metrics import attn_flops
from magi_attention.functional import FlexAttnPlan
from magi_attention.kernels import triton as ffa
from magi_attention.kernels.triton.configs import BwdConfig, FwdConfig, bwd_config, fwd_config

DOC_MASKS = {"full_document", "causal_document", "block_causal_document", "share_question",
             "causal_blockwise", "prefix_lm_document"}


def doc_lens(seqlen: int, seed: int = 0) -> list[int]:
    from bench.data import sample_doc_lens
    return sample_doc_lens(seqlen, seed=seed)


def bench_ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")


def setup(name, seqlen, hq, hk, d, dtype):
    mask = build_mask(name, seqlen, doc_lens=doc_lens(seqlen) if name in DOC_MASKS else None)
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda h: torch.randn(seqlen, h, d, device="cuda", generator=g, dtype=torch.float32).to(dtype)
    q, k, v, do = mk(hq), mk(hk), mk(hk), mk(hq)
    ranges = (FlexAttnPlan.from_slices(list(mask.slices), seqlen, seqlen),)
    return mask, (q, k, v, do), ranges


def time_ffa(qkv, ranges, fcfg=None, bcfg=None):
    q, k, v, do = qkv
    scale = q.shape[-1] ** -0.5
    out, lse, _ = ffa.fwd(q, k, v, *ranges, scale, config=fcfg)
    t_f = bench_ms(lambda: ffa.fwd(q, k, v, *ranges, scale, config=fcfg))
    t_b = bench_ms(lambda: ffa.bwd(do, q, k, v, out, lse, *ranges, scale, config=bcfg))
    return t_f, t_b


def time_sdpa(qkv, causal, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v, do = qkv
    group = q.shape[1] // k.shape[1]
    tq = q.transpose(0, 1)[None].requires_grad_()
    tk = k.repeat_interleave(group, 1).transpose(0, 1)[None].requires_grad_()
    tv = v.repeat_interleave(group, 1).transpose(0, 1)[None].requires_grad_()
    tdo = do.transpose(0, 1)[None]
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel(be):
        out = sdpa(tq, tk, tv, is_causal=causal)
        t_f = bench_ms(lambda: sdpa(tq, tk, tv, is_causal=causal))
        t_b = bench_ms(lambda: torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True))
    return t_f, t_b


def time_flex(mask, qkv):
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    q, k, v, do = qkv
    s = q.shape[0]
    if mask.name == "full":
        block_mask = None
    elif mask.name == "causal":
        block_mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, s, s)
    else:
        block_mask = create_block_mask(to_mask_mod(mask, "cuda"), None, None, s, s)
    fx = torch.compile(flex_attention, dynamic=False)
    tq, tk, tv = (t.transpose(0, 1)[None].requires_grad_() for t in (q, k, v))
    tdo = do.transpose(0, 1)[None]
    out = fx(tq, tk, tv, block_mask=block_mask, enable_gqa=True)
    t_f = bench_ms(lambda: fx(tq, tk, tv, block_mask=block_mask, enable_gqa=True))
    t_b = bench_ms(lambda: torch.autograd.grad(out, (tq, tk, tv), tdo, retain_graph=True))
    return t_f, t_b


def tflops(area, hq, d, ms, direction):
    return attn_flops(area, hq, d, direction=direction) / (ms * 1e-3) / 1e12


def compare(args):
    rows = []
    for seqlen in args.seqlens:
        for name in args.masks:
            mask, qkv, ranges = setup(name, seqlen, args.hq, args.hk, args.d, torch.bfloat16)
            res = {"ffa": time_ffa(qkv, ranges)}
            if name in ("full", "causal") and not args.no_sdpa:
                for be in ("flash", "cudnn"):
                    try:
                        res["sdpa_" + be] = time_sdpa(qkv, name == "causal", be)
                    except Exception as e:  # noqa: BLE001 - a peer failing must not stop the table
                        print(f"sdpa {be} failed: {type(e).__name__}: {e}", file=sys.stderr)
            if not args.no_flex:
                try:
                    res["flex"] = time_flex(mask, qkv)
                except Exception as e:  # noqa: BLE001
                    print(f"flex failed on {name}: {type(e).__name__}: {e}", file=sys.stderr)
            for kernel, (t_f, t_b) in res.items():
                row = dict(seqlen=seqlen, mask=name, kernel=kernel, fwd_ms=t_f, bwd_ms=t_b,
                           fwd_tflops=tflops(mask.area, args.hq, args.d, t_f, "fwd"),
                           bwd_tflops=tflops(mask.area, args.hq, args.d, t_b, "bwd"))
                rows.append(row)
                print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    print("\n| S | mask | kernel | fwd ms | fwd TFLOPs/s | bwd ms | bwd TFLOPs/s | ffa/peer fwd | ffa/peer bwd |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        base = next(x for x in rows if x["seqlen"] == r["seqlen"] and x["mask"] == r["mask"]
                    and x["kernel"] == "ffa")
        print(f"| {r['seqlen']} | {r['mask']} | {r['kernel']} | {r['fwd_ms']:.2f} | {r['fwd_tflops']:.0f} | "
              f"{r['bwd_ms']:.2f} | {r['bwd_tflops']:.0f} | {r['fwd_ms'] and base['fwd_tflops'] / r['fwd_tflops']:.2f} | "
              f"{base['bwd_tflops'] / r['bwd_tflops']:.2f} |")


def sweep(args):
    seqlen = args.seqlens[0]
    fwd_cfgs = [FwdConfig(*c) for c in
                [(128, 64, 4, 3, 1), (128, 64, 4, 3, 2), (128, 64, 4, 3, 3), (128, 64, 4, 2, 2),
                 (128, 128, 8, 3, 1), (128, 128, 8, 2, 2)]]
    bwd_cfgs = [BwdConfig(*c) for c in
                [(64, 64, 64, 64, 4, 3, 1), (64, 64, 64, 64, 4, 3, 2), (64, 64, 64, 64, 4, 2, 2),
                 (64, 128, 128, 64, 8, 3, 1), (64, 64, 64, 64, 4, 3, 3)]]
    for name in args.masks:
        mask, qkv, ranges = setup(name, seqlen, args.hq, args.hk, args.d, torch.bfloat16)
        q, k, v, do = qkv
        scale = args.d ** -0.5
        for c in fwd_cfgs:
            try:
                t = bench_ms(lambda: ffa.fwd(q, k, v, *ranges, scale, config=c))
                print(f"fwd {name} {c}: {t:.2f} ms {tflops(mask.area, args.hq, args.d, t, 'fwd'):.0f} TFLOPs/s", flush=True)
            except Exception as e:  # noqa: BLE001 - out of resources for some tiles
                print(f"fwd {name} {c}: failed {type(e).__name__}: {str(e)[:100]}")
        out, lse, _ = ffa.fwd(q, k, v, *ranges, scale)
        for c in bwd_cfgs:
            try:
                t = bench_ms(lambda: ffa.bwd(do, q, k, v, out, lse, *ranges, scale, config=c))
                print(f"bwd {name} {c}: {t:.2f} ms {tflops(mask.area, args.hq, args.d, t, 'bwd'):.0f} TFLOPs/s", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"bwd {name} {c}: failed {type(e).__name__}: {str(e)[:100]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqlens", type=int, nargs="+", default=[16384])
    p.add_argument("--masks", nargs="+", default=["full", "causal", "causal_document", "block_causal_document"])
    p.add_argument("--hq", type=int, default=64)
    p.add_argument("--hk", type=int, default=8)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--no-sdpa", action="store_true")
    p.add_argument("--no-flex", action="store_true")
    args = p.parse_args(argv)
    (sweep if args.sweep else compare)(args)


if __name__ == "__main__":
    main()
