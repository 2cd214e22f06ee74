"""flex_flash_attn_func under torch.compile (CPU, reference backend): a model step (fused QKV
projection -> attention with a sink -> loss) compiles with fullgraph=True, i.e. no graph break,
into one graph, and its loss and gradients (backward through the compiled graph) equal the
eager step's. The eager path never goes through the custom op."""
import pytest
import torch
import torch._dynamo.testing

from magi_attention.common import AttnMaskType, AttnSlice, slices_to_tensors
from magi_attention.functional import flex_attn_plan, flex_flash_attn_func
from magi_attention.functional import flex_flash_attn as ffa_module

SEQLEN, HEADS_Q, HEADS_KV, HEAD_DIM = 48, 4, 2, 16
SLICES = [AttnSlice.make(0, 32, 0, 32, AttnMaskType.CAUSAL),
          AttnSlice.make(32, 40, 8, 48, AttnMaskType.FULL)]  # rows 40.. keep no key


class Block(torch.nn.Module):
    """Fused q|k|v projection (GQA) -> attention with a learnable sink -> output projection."""

    def __init__(self, mask):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        width = (HEADS_Q + 2 * HEADS_KV) * HEAD_DIM
        self.qkv = torch.nn.Linear(HEADS_Q * HEAD_DIM, width)
        self.out = torch.nn.Linear(HEADS_Q * HEAD_DIM, HEADS_Q * HEAD_DIM)
        self.sink = torch.nn.Parameter(torch.randn(2, HEADS_Q, generator=g))
        self.mask = mask  # a FlexAttnPlan, or (q_ranges, k_ranges, attn_type_map)

    def forward(self, x):
        qkv = self.qkv(x).view(SEQLEN, HEADS_Q + 2 * HEADS_KV, HEAD_DIM)
        q, k, v = qkv.split([HEADS_Q, HEADS_KV, HEADS_KV], dim=1)  # strided views
        mask = self.mask if isinstance(self.mask, tuple) else (self.mask,)
        out, meta = flex_flash_attn_func(q, k, v, *mask, sink=self.sink, backend="reference")
        return self.out(out.reshape(SEQLEN, -1)).square().mean() + meta.lse.mean()


def _mask(form):
    if form == "plan":
        return flex_attn_plan(SLICES, seqlen_q=SEQLEN)
    return slices_to_tensors(SLICES)


def _grads(model, x, step):
    model.zero_grad()
    loss = step(x)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def _assert_same_step(model, compiled, x):
    loss, grads = _grads(model, x, model)
    loss_c, grads_c = _grads(model, x, compiled)
    torch.testing.assert_close(loss_c, loss, atol=1e-6, rtol=1e-5)
    for (name, _), g, gc in zip(model.named_parameters(), grads, grads_c):
        torch.testing.assert_close(gc, g, atol=1e-6, rtol=1e-5, msg=name)
    assert model.sink.grad.abs().sum() > 0  # the sink is learned through the compiled graph


@pytest.mark.parametrize("form", ["plan", "tensors"])
def test_compiled_step_has_one_graph_and_equals_eager(form):
    torch._dynamo.reset()
    model = Block(_mask(form))
    x = torch.randn(SEQLEN, HEADS_Q * HEAD_DIM, generator=torch.Generator().manual_seed(1))
    explained = torch._dynamo.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), \
        explained.break_reasons
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, fullgraph=True, backend=counter)  # raises on a break
    _assert_same_step(model, compiled, x)
    _assert_same_step(model, compiled, x)  # the second step reuses the graph
    assert counter.frame_count == 1


def test_inference_call_compiles_and_a_new_plan_recompiles():
    """No grad and return_lse=False under compile; another plan is another guard (its mask)."""
    torch._dynamo.reset()
    q, k, v = (torch.randn(SEQLEN, h, HEAD_DIM) for h in (HEADS_Q, HEADS_KV, HEADS_KV))

    def attend(plan):
        out, meta = flex_flash_attn_func(q, k, v, plan, return_lse=False)
        assert meta.lse is None
        return out

    compiled = torch.compile(attend, fullgraph=True, backend="aot_eager")
    other = [AttnSlice.make(0, SEQLEN, 0, SEQLEN, AttnMaskType.INVCAUSAL)]
    for slices in (SLICES, other):
        plan = flex_attn_plan(slices, seqlen_q=SEQLEN)
        with torch.no_grad():
            torch.testing.assert_close(compiled(plan), attend(plan))


def test_eager_calls_do_not_use_the_custom_op(monkeypatch):
    monkeypatch.setattr(ffa_module, "compiled_call",
                        lambda *a, **k: pytest.fail("eager call went through the custom op"))
    model = Block(_mask("plan"))
    model(torch.randn(SEQLEN, HEADS_Q * HEAD_DIM)).backward()
    with torch.no_grad():
        model(torch.randn(SEQLEN, HEADS_Q * HEAD_DIM))


def test_the_custom_op_passes_torch_library_opcheck():
    """The fake implementations agree with the real ones (shapes, dtypes, strides) and the
    autograd registration is consistent, on strided inputs with a sink."""
    plan = flex_attn_plan(SLICES, seqlen_q=SEQLEN)
    qkv = torch.randn(SEQLEN, HEADS_Q + 2 * HEADS_KV, HEAD_DIM, requires_grad=True)
    q, k, v = qkv.split([HEADS_Q, HEADS_KV, HEADS_KV], dim=1)
    sink = torch.randn(2, HEADS_Q, requires_grad=True)
    args = (q, k, v, sink, id(plan), None, None, None, None, 0.0, "reference", False, False)
    torch.library.opcheck(torch.ops.magi_attention.flex_flash_attn_fwd.default, args)


@pytest.mark.slow
def test_compiled_step_with_inductor_equals_eager():
    """The default backend (inductor, C++ codegen on CPU: a minute or more on a cold cache)."""
    torch._dynamo.reset()
    model = Block(_mask("plan"))
    x = torch.randn(SEQLEN, HEADS_Q * HEAD_DIM, generator=torch.Generator().manual_seed(2))
    _assert_same_step(model, torch.compile(model, fullgraph=True), x)
