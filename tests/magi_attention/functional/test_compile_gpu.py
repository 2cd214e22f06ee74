"""GPU: a model step with flex_flash_attn_func (fused QKV projection -> attention with a sink
-> loss) under torch.compile(fullgraph=True) with the default inductor backend, on the Triton
and FA4 backends: it compiles without a graph break and its loss and gradients (backward
through the compiled graph) match the eager step's."""
import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice
from magi_attention.functional import backend_reason, flex_attn_plan, flex_flash_attn_func

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU; run on the device machine", allow_module_level=True)

SEQLEN, HEADS_Q, HEADS_KV, HEAD_DIM = 1024, 8, 2, 128


class Block(torch.nn.Module):
    def __init__(self, backend):
        super().__init__()
        torch.manual_seed(0)
        width = (HEADS_Q + 2 * HEADS_KV) * HEAD_DIM
        self.qkv = torch.nn.Linear(HEADS_Q * HEAD_DIM, width, device="cuda")
        self.sink = torch.nn.Parameter(torch.randn(1, HEADS_Q, device="cuda"))
        self.plan = flex_attn_plan([AttnSlice.make(0, 512, 0, 512, AttnMaskType.CAUSAL),
                                    AttnSlice.make(512, SEQLEN, 0, SEQLEN, AttnMaskType.CAUSAL)],
                                   seqlen_q=SEQLEN)
        self.backend = backend

    def forward(self, x):
        qkv = self.qkv(x).bfloat16().view(SEQLEN, -1, HEAD_DIM)
        q, k, v = qkv.split([HEADS_Q, HEADS_KV, HEADS_KV], dim=1)
        out, _ = flex_flash_attn_func(q, k, v, self.plan, backend=self.backend, sink=self.sink)
        return out.float().square().mean()


@pytest.mark.parametrize("backend", ["triton", "fa4"])
def test_compiled_step_with_inductor_matches_eager(backend):
    torch._dynamo.reset()
    model = Block(backend)
    x = torch.randn(SEQLEN, HEADS_Q * HEAD_DIM, device="cuda")
    reason = backend_reason(backend, x.bfloat16().view(SEQLEN, HEADS_Q, HEAD_DIM))
    if reason is not None:
        pytest.skip(reason)
    results = []
    for step in (model, torch.compile(model, fullgraph=True)):  # fullgraph: raises on a break
        model.zero_grad()
        loss = step(x)
        loss.backward()
        results.append([loss.detach()] + [p.grad.clone() for p in model.parameters()])
    # the same kernels on the same bf16 q, k, v (an fp32 projection rounded to bf16): apart
    # from a rare rounding flip and the backward's atomics, the numbers are the eager ones
    for name, got, want in zip(("loss", "weight", "bias", "sink"), results[1], results[0]):
        assert torch.isfinite(got).all(), name
        rel = ((got - want).norm() / want.norm().clamp_min(1e-30)).item()
        assert rel < 1e-2, f"{name}: compiled differs from eager by {rel:.2e} (relative L2)"
