"""The fused backward's two reduces agree bit for bit in bf16 (2 gloo processes, reference
kernel): adding the returned partial dK/dV straight into the kernel's own-part dk, dv (one
partial a row, summed in fp32 and rounded once) against the fp32 accumulator it replaces at
cp 2, on the document masks of the CP benchmark and causal."""
import os
import tempfile
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SEQLEN = 256
HEADS = (4, 2)
HEAD_DIM = 16
MASKS = ("causal", "full_document", "causal_document")


def _grads(key, local, dout_local):
    from magi_attention.api import calc_attn
    leaves = [t.detach().clone().requires_grad_() for t in local]
    out, _ = calc_attn(*leaves, key)
    return torch.autograd.grad(out, leaves, dout_local)


def _worker(rank, init_file, out_file):
    from bench.masks import build_mask
    from magi_attention.api import dispatch, magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    from magi_attention.functional._dist_runtime import DistAttnRuntime
    from magi_attention.meta import OverlapConfig
    from magi_attention.testing import random_qkv

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    errors = []
    try:
        q, k, v = (t.bfloat16() for t in random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0,
                                                     requires_grad=False))
        dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM,
                           generator=torch.Generator().manual_seed(1)).bfloat16()
        for name in MASKS:
            mask = build_mask(name, SEQLEN, doc_lens=[64, 32, 96, 64], seed=1)
            key = magi_attn_flex_key(*slices_to_tensors(mask.slices), SEQLEN, *HEADS, HEAD_DIM,
                                     dist.group.WORLD, chunk_size=32, dispatch_alg="min_heap",
                                     overlap=OverlapConfig(fused=True), backend="reference",
                                     dtype=torch.bfloat16)
            runtime = key.runtime
            if runtime.meta.fused is None or not runtime.reduces_in_place:
                errors.append(f"{name}: the in-place reduce did not run")
                continue
            local = [dispatch(t, key) for t in (q, k, v)]
            dout_local = dispatch(dout, key)
            in_place = _grads(key, local, dout_local)
            original = DistAttnRuntime.reduces_in_place
            DistAttnRuntime.reduces_in_place = property(lambda self: False)  # the fp32 path
            try:
                accumulated = _grads(key, local, dout_local)
            finally:
                DistAttnRuntime.reduces_in_place = original
            for label, a, b in zip(("dq", "dk", "dv"), in_place, accumulated):
                if a.dtype != torch.bfloat16 or not torch.equal(a, b):
                    errors.append(f"{name} {label}: in-place {a.dtype} != fp32 accumulator, max "
                                  f"diff {(a.float() - b.float()).abs().max().item():.3e}")
    except Exception:
        errors.append(traceback.format_exc())
    with open(f"{out_file}.{rank}", "w") as f:
        f.write("\n".join(errors))
    dist.destroy_process_group()


def test_in_place_reduce_equals_fp32_accumulator_bitwise_in_bf16():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_worker, args=(os.path.join(d, "store"), os.path.join(d, "out")), nprocs=2)
        errors = [open(os.path.join(d, f"out.{r}")).read() for r in range(2)]
    assert not any(errors), "\n".join(errors)
