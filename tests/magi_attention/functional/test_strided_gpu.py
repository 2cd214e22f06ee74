"""GPU: strided q, k, v (a fused projection's split, a heads-first tensor transposed, a slice
of the last dim) on the Triton and FA4 backends: outputs and gradients (in the caller's layout,
no NaN) against dense attention in fp64 (magi_attention.testing.lowp), with and without a
sink."""
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice
from magi_attention.functional import backend_reason, flex_attn_plan, flex_flash_attn_func
from magi_attention.testing.lowp import dense_errors
from magi_attention.testing.strided import LAYOUTS, strided_base, strided_views

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

SEQLEN, HEADS, HEAD_DIM = 1000, (8, 2), 128
SLICES = [AttnSlice.make(0, 600, 0, 600, AttnMaskType.CAUSAL),
          AttnSlice.make(600, 900, 200, 1000, AttnMaskType.BICAUSAL)]  # rows 900.. keep none


def _skip_unless(backend, q):
    reason = backend_reason(backend, q)
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("with_sink", [False, True], ids=["plain", "sink"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("backend", ["triton", "fa4"])
def test_strided_views_against_dense(backend, layout, with_sink):
    base = strided_base(layout, SEQLEN, *HEADS, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
    q, k, v = strided_views(layout, base, *HEADS)
    assert not q.is_contiguous()
    _skip_unless(backend, q)
    g = torch.Generator(device="cuda").manual_seed(7)
    dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM, device="cuda", generator=g).bfloat16()
    sink = torch.randn(2, HEADS[0], device="cuda", requires_grad=True) if with_sink else None
    plan = flex_attn_plan(SLICES, seqlen_q=SEQLEN)

    def attend(q, k, v, sink):
        out, meta = flex_flash_attn_func(q, k, v, plan, backend=backend, sink=sink)
        return out, meta.lse

    assert dense_errors(attend, q, k, v, dout, SLICES, sink) == []
    # the gradient reached the caller's tensor, finite
    (grad,) = torch.autograd.grad(attend(q, k, v, sink)[0], base, dout)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
