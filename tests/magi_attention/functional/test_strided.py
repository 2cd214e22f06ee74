"""Strided q, k, v (views of a fused projection, a heads-first tensor transposed, a slice of
the last dim) give flex_flash_attn_func (reference backend, CPU) the outputs and gradients of
contiguous copies, the gradients in the caller's layout; eager and compiled."""
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice
from magi_attention.functional import flex_attn_plan, flex_flash_attn_func
from magi_attention.testing.strided import LAYOUTS, strided_base, strided_views

SEQLEN, HEADS = 40, (4, 2)
SLICES = [AttnSlice.make(0, 24, 0, 24, AttnMaskType.CAUSAL),
          AttnSlice.make(24, 36, 4, 40, AttnMaskType.BICAUSAL)]


def _step(base, layout, contiguous, attend):
    """out and d(base) of attention on ``layout``'s views of base (or contiguous copies)."""
    views = strided_views(layout, base, *HEADS)
    if contiguous:
        views = tuple(t.contiguous() for t in views)
    else:
        assert not any(t.is_contiguous() for t in views)
    out = attend(*views)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    (grad,) = torch.autograd.grad(out, base, dout)
    return out.detach(), grad


def _compare(layout, attend):
    base = strided_base(layout, SEQLEN, *HEADS, 16, seed=1)
    out, grad = _step(base, layout, False, attend)
    ref_out, ref_grad = _step(base.detach().clone().requires_grad_(), layout, True, attend)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(grad, ref_grad, atol=1e-6, rtol=1e-6)
    assert grad.abs().sum() > 0


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("with_sink", [False, True], ids=["plain", "sink"])
def test_strided_views_equal_contiguous_copies(layout, with_sink):
    plan = flex_attn_plan(SLICES, seqlen_q=SEQLEN)
    sink = torch.randn(2, HEADS[0]) if with_sink else None
    _compare(layout, lambda q, k, v: flex_flash_attn_func(q, k, v, plan, sink=sink,
                                                          backend="reference")[0])


def test_strided_views_under_compile():
    torch._dynamo.reset()
    plan = flex_attn_plan(SLICES, seqlen_q=SEQLEN)
    compiled = torch.compile(lambda q, k, v: flex_flash_attn_func(q, k, v, plan)[0],
                             fullgraph=True, backend="aot_eager")
    _compare("heads_first", compiled)
