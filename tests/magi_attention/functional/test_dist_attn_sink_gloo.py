"""calc_attn with attention sinks over gloo (2 and 4 CPU ranks, reference kernel): the
undispatched out and dq, dk, dv, the local lse and the sink's gradient (summed over the cp group,
the same on every rank) equal fp64 dense attention with the sink columns, on a mask whose last
rows keep no key. q, k, v are strided views of one fused local tensor, as a model projects them."""
import functools

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice

from magi_attention.testing.gloo import run_on_ranks

SEQLEN, HEADS, HEAD_DIM, NUM_SINK = 256, (4, 2), 16, 3
# three causal documents, then 32 rows that keep no key
SLICES = [AttnSlice.make(a, b, a, b, AttnMaskType.CAUSAL) for a, b in ((0, 96), (96, 160),
                                                                       (160, 224))]
ATOL = 2e-4


def _global_inputs():
    from magi_attention.testing import random_qkv
    q, k, v = random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0, requires_grad=False)
    g = torch.Generator().manual_seed(1)
    dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM, generator=g)
    sink = torch.randn(NUM_SINK, HEADS[0], generator=g) * 2
    return q, k, v, dout, sink


def _dense(q, k, v, dout, sink):
    from magi_attention.common import to_dense
    from magi_attention.testing import dense_attention
    leaves = [t.clone().requires_grad_() for t in (q, k, v, sink)]
    out, lse = dense_attention(*leaves[:3], to_dense(SLICES, SEQLEN), sink=leaves[3])
    return out, lse, torch.autograd.grad(out, leaves, dout.double())


def check_sink(rank, chunk_size, overlap):
    import torch.distributed as dist
    from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch
    from magi_attention.common import slices_to_tensors
    from magi_attention.meta import OverlapConfig

    q, k, v, dout, sink = _global_inputs()
    ref_out, ref_lse, ref_grads = _dense(q, k, v, dout, sink)
    key = magi_attn_flex_key(*slices_to_tensors(SLICES), SEQLEN, *HEADS, HEAD_DIM,
                             dist.group.WORLD, chunk_size, overlap=OverlapConfig(**overlap),
                             backend="reference", dtype=torch.float32)
    fused = torch.cat([dispatch(t, key) for t in (q, k, v)], dim=1).requires_grad_()
    local = fused.split([HEADS[0], HEADS[1], HEADS[1]], dim=1)  # strided views
    sink_leaf = sink.clone().requires_grad_()
    out, meta = calc_attn(*local, key, sink=sink_leaf)
    out.backward(dispatch(dout, key))
    grads = [undispatch(g, key) for g in fused.grad.split([HEADS[0], HEADS[1], HEADS[1]], 1)]
    errors = []
    for name, got, want in [("out", undispatch(out.detach(), key), ref_out),
                            ("lse", meta.lse, dispatch(ref_lse, key)),
                            *zip(("dq", "dk", "dv"), grads, ref_grads[:3]),
                            ("dsink", sink_leaf.grad, ref_grads[3])]:
        err = (got.double() - want).abs().max().item()
        if not err < ATOL:
            errors.append(f"rank {rank} {name}: max err {err:.2e}")
    return errors


@pytest.mark.parametrize("cp_size,chunk_size,overlap", [
    (2, 32, {}), (2, 32, {"fused": True}), (4, 16, {"num_stages": 2}), (4, 16, {"fused": True})],
    ids=["cp2", "cp2-fused", "cp4-2_stages", "cp4-fused"])
def test_calc_attn_with_sink_equals_dense_attention(cp_size, chunk_size, overlap):
    assert run_on_ranks(functools.partial(check_sink, chunk_size=chunk_size, overlap=overlap),
                        cp_size) == ""
