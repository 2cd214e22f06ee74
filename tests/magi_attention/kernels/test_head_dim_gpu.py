"""GPU: head_dim 64, 128 and 256 on the Triton and FA4 backends (bf16, GQA 8:2) against dense
attention in fp64 (magi_attention.testing.lowp), forward and backward: a causal document mask
(FA4's native varlen kernels), overlapping random slices with rows that keep no key (FA4's
block-sparse path, at head_dim 256 on its 128 x 64 tiles) and a sink."""
import random

import pytest
import torch

from magi_attention.common import AttnMaskType, slices_to_tensors
from magi_attention.functional import backend_reason, flex_attn_plan, flex_flash_attn_func
from magi_attention.kernels import fa4
from magi_attention.testing import document_slices, random_slices
from magi_attention.testing.lowp import dense_errors, lowp_inputs

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

SEQLEN = 1000
MASKS = {
    "causal_document": lambda: document_slices([300, 200, 500], AttnMaskType.CAUSAL),
    "random_overlapping": lambda: random_slices(random.Random(3), SEQLEN, SEQLEN, 6),
}


def _skip_unless(backend, q):
    reason = backend_reason(backend, q)
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("backend", ["triton", "fa4"])
def test_head_dims_against_dense(backend, head_dim, mask):
    slices = MASKS[mask]()
    plan = flex_attn_plan(slices, seqlen_q=SEQLEN)
    q, k, v, dout, sink = lowp_inputs(SEQLEN, SEQLEN, (8, 2), head_dim, 0, num_sink=1)
    _skip_unless(backend, q)

    def attend(q, k, v, sink):
        out, meta = flex_flash_attn_func(q, k, v, plan, backend=backend, sink=sink)
        return out, meta.lse

    assert dense_errors(attend, q, k, v, dout, slices, sink) == []


def test_fa4_refuses_head_dims_it_cannot_plan_with_a_reason():
    q = torch.empty(4, 2, 192, dtype=torch.bfloat16, device="cuda")
    reason = backend_reason("fa4", q)
    assert reason is not None and ("192" in reason or "flash-attn-4" in reason)


@pytest.mark.skipif(not fa4.is_available(), reason="needs flash-attn-4 and an SM90 GPU")
def test_fa4_block_sparse_path_at_head_dim_256():
    """The causal document mask forced through FA4's block-sparse kernels at 128 x 64 tiles."""
    slices = MASKS["causal_document"]()
    plan = flex_attn_plan(slices, seqlen_q=SEQLEN)
    q, k, v, dout, _ = lowp_inputs(SEQLEN, SEQLEN, (8, 2), 256, 1)
    scale = 256 ** -0.5

    class BlockSparse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v):
            out, lse, _ = fa4.fwd(q, k, v, plan, scale, native=False)
            ctx.save_for_backward(q, k, v, out, lse)
            return out, lse

        @staticmethod
        def backward(ctx, dout, _dlse):
            q, k, v, out, lse = ctx.saved_tensors
            return fa4.bwd(dout, q, k, v, out, lse, plan, scale, native=False)

    assert dense_errors(lambda q, k, v, _s: BlockSparse.apply(q, k, v), q, k, v, dout,
                        slices) == []
