"""calc_attn under torch.compile over gloo (2 CPU ranks, reference kernel): a model step (fused
QKV projection of the local shard -> calc_attn with a sink -> loss) compiles with fullgraph=True
into one graph with no break, and its loss and gradients (the backward through the compiled
graph, dsink reduced over the group) equal the eager step's, for each KV buffer the forward
keeps for the backward: none (staged), the fused buffer, the received KV (backward cut by
keys)."""
import functools

import pytest
import torch

from magi_attention.common import AttnMaskType, AttnSlice

from magi_attention.testing.gloo import run_on_ranks

SEQLEN, HEADS, HEAD_DIM = 128, (4, 2), 16
SLICES = [AttnSlice.make(0, 80, 0, 80, AttnMaskType.CAUSAL),
          AttnSlice.make(80, 128, 40, 128, AttnMaskType.CAUSAL)]


class Block(torch.nn.Module):
    def __init__(self, key):
        super().__init__()
        torch.manual_seed(0)  # the same weights on every rank
        width = (HEADS[0] + 2 * HEADS[1]) * HEAD_DIM
        self.qkv = torch.nn.Linear(HEADS[0] * HEAD_DIM, width)
        self.sink = torch.nn.Parameter(torch.randn(2, HEADS[0]))
        self.key = key

    def forward(self, x):
        from magi_attention.api import calc_attn
        qkv = self.qkv(x).view(x.shape[0], -1, HEAD_DIM)
        q, k, v = qkv.split([HEADS[0], HEADS[1], HEADS[1]], dim=1)
        out, meta = calc_attn(q, k, v, self.key, sink=self.sink)
        return out.square().mean() + meta.lse.mean()


def check_compile(rank, overlap, keeps_kv):
    import torch.distributed as dist
    from magi_attention.api import dispatch, magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    from magi_attention.functional._dist_op import saved_kv_rows
    from magi_attention.meta import OverlapConfig

    key = magi_attn_flex_key(*slices_to_tensors(SLICES), SEQLEN, *HEADS, HEAD_DIM,
                             dist.group.WORLD, 32, overlap=OverlapConfig(**overlap),
                             backend="reference", dtype=torch.float32)
    x = dispatch(torch.randn(SEQLEN, HEADS[0] * HEAD_DIM,
                             generator=torch.Generator().manual_seed(1)), key)
    model = Block(key)
    errors = []
    explained = torch._dynamo.explain(model)(x)
    if (explained.graph_count, explained.graph_break_count) != (1, 0):
        errors.append(f"rank {rank}: {explained.graph_count} graphs, "
                      f"{explained.graph_break_count} breaks: {explained.break_reasons}")
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for step, name in ((model, "eager"), (compiled, "compiled"), (compiled, "compiled again")):
        model.zero_grad()
        loss = step(x)
        loss.backward()
        grads = [loss.detach()] + [p.grad.clone() for p in model.parameters()]
        if name == "eager":
            want = grads
            continue
        for label, got, ref in zip(("loss", "weight", "bias", "sink"), grads, want):
            if not torch.allclose(got, ref, atol=1e-6, rtol=1e-5):
                errors.append(f"rank {rank} {name} {label}: max diff "
                              f"{(got - ref).abs().max().item():.2e}")
    # the fake implementation's KV buffer is the one the forward really keeps
    with torch.no_grad():
        qkv = model.qkv(x).view(x.shape[0], -1, HEAD_DIM).split([HEADS[0], HEADS[1], HEADS[1]], 1)
        _, _, kv = key.runtime.forward_saving(*(t.contiguous() for t in qkv))
    rows = 0 if kv is None else kv.shape[0]
    if rows != saved_kv_rows(key.runtime) or (rows > 0) != keeps_kv:
        errors.append(f"rank {rank}: the forward kept {rows} KV rows, saved_kv_rows says "
                      f"{saved_kv_rows(key.runtime)}")
    return errors


@pytest.mark.parametrize("overlap,keeps_kv", [({"num_stages": 1, "fused": False}, False),
                                              ({"fused": True}, True),
                                              ({"fused": True, "cut": "bwd"}, True)],
                         ids=["staged", "fused", "cut_bwd"])
def test_compiled_calc_attn_step_has_one_graph_and_equals_eager(overlap, keeps_kv):
    assert run_on_ranks(functools.partial(check_compile, overlap=overlap, keeps_kv=keeps_kv),
                        2) == ""
