"""GPU: attention sinks on the Triton and FA4 backends (bf16, random overlapping masks with rows
that keep no key, GQA, one and three sinks): out, lse and the gradients of q, k, v and the sink
against dense attention in fp64 (magi_attention.testing.lowp: 2x the error of plain bf16
attention, plus a small atol)."""
import random

import pytest
import torch

from magi_attention.common import slices_to_tensors
from magi_attention.functional import backend_reason, flex_flash_attn_func
from magi_attention.testing import random_slices
from magi_attention.testing.lowp import dense_errors, lowp_inputs

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

BACKENDS = ("triton", "fa4")


def _skip_unless(backend, q):
    reason = backend_reason(backend, q)
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("num_sink", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sink_random_masks_gqa(backend, seed, num_sink):
    rng = random.Random(seed)
    slices = random_slices(rng, 777, 1000, 5)  # overlapping; some rows keep no key
    ranges = tuple(t.cuda() for t in slices_to_tensors(slices))
    q, k, v, dout, sink = lowp_inputs(777, 1000, (8, 2), 128, seed, num_sink)
    _skip_unless(backend, q)

    def attend(q, k, v, sink):
        out, meta = flex_flash_attn_func(q, k, v, *ranges, backend=backend, sink=sink)
        return out, meta.lse

    assert dense_errors(attend, q, k, v, dout, slices, sink) == []
