"""GPU: FFA over a per-KV-head mask with the heads' kernels on side streams, against the
reference backend in fp32 per KV head (tolerance as test_plan_gpu: 2x plain bf16 dense
attention's error against that oracle, plus 1e-3 * max|oracle| + 1e-4); a steady-state call
neither copies to the host nor synchronises."""
import random

import pytest
import torch

from magi_attention.common import to_dense
from magi_attention.functional import (FlexAttnPlan, backend_reason, flex_flash_attn_per_kv_head)
from magi_attention.kernels import reference
from magi_attention.testing import assert_no_sync, dense_attention, random_slices
from magi_attention.testing.masks import random_block_sparse

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)


def _inputs(seqlen, heads, head_dim, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    make = lambda h: torch.randn(seqlen, h, head_dim, device="cuda", generator=g).bfloat16()  # noqa: E731
    return make(heads[0]), make(heads[1]), make(heads[1]), make(heads[0])


@pytest.mark.parametrize("backend", ["triton", "fa4"])
@pytest.mark.parametrize("seed", range(3))
def test_per_kv_head_matches_each_heads_reference(backend, seed):
    rng = random.Random(seed)
    seqlen, heads, head_dim = rng.choice([200, 513, 1024]), (16, 4), rng.choice([64, 128])
    q, k, v, dout = _inputs(seqlen, heads, head_dim, seed)
    reason = backend_reason(backend, q)
    if reason is not None:
        pytest.skip(reason)
    slices = [random_slices(rng, seqlen, seqlen, rng.randint(2, 6)) for _ in range(heads[1])]
    plans = [FlexAttnPlan.from_slices(s, seqlen, seqlen) for s in slices]
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, meta = flex_flash_attn_per_kv_head(*leaves, plans, backend=backend)
    grads = torch.autograd.grad(out, leaves, dout)
    group, scale = heads[0] // heads[1], head_dim ** -0.5
    dense = torch.stack([to_dense(s, seqlen, seqlen, device="cuda") for s in slices])
    low_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    lo, _ = dense_attention(*low_leaves, dense, scale, compute_dtype=torch.bfloat16)
    low = (lo, *torch.autograd.grad(lo, low_leaves, dout))
    for h, plan in enumerate(plans):
        qs, ks = slice(h * group, (h + 1) * group), slice(h, h + 1)
        f = lambda t, s: t[:, s].float().contiguous()  # noqa: E731
        ro, rl, _ = reference.fwd(f(q, qs), f(k, ks), f(v, ks), plan, scale)
        rdq, rdk, rdv = reference.bwd(f(dout, qs), f(q, qs), f(k, ks), f(v, ks), ro, rl, plan, scale)
        for name, got, ref, lw, s in zip(("out", "dq", "dk", "dv"), (out, *grads),
                                         (ro, rdq, rdk, rdv), low, (qs, qs, ks, ks)):
            got, lw = got[:, s].float(), lw[:, s].float()
            err = (got - ref).abs().max().item()
            tol = 2 * (lw - ref).abs().max().item() + 1e-3 * ref.abs().max().item() + 1e-4
            assert err <= tol, f"{backend} head {h} {name}: max err {err:.3e} > {tol:.3e}"
        torch.testing.assert_close(meta.lse[:, qs], rl, atol=1e-2, rtol=0)


def test_per_kv_head_steady_state_call_does_not_synchronise():
    seqlen = 4096
    plans = [FlexAttnPlan.from_slices(random_block_sparse(seqlen, seed=head), seqlen)
             for head in range(2)]  # one block-sparse mask a KV head
    q = torch.randn(seqlen, 8, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(seqlen, 2, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn_like(k, requires_grad=True)

    def step():
        out, _ = flex_flash_attn_per_kv_head(q, k, v, plans, backend="triton")
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))

    step()  # first call: plans, compiles
    assert_no_sync(step)
