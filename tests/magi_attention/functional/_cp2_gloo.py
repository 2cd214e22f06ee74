"""What the 2-rank gloo tests of the fused backward share: the inputs (bf16, the reference
kernel's sizes), a key per mask, the gradients of one step, and the spawn of the two ranks."""
import torch
import torch.distributed as dist

SEQLEN = 256
HEADS = (4, 2)
HEAD_DIM = 16
DOC_LENS = [64, 32, 96, 64]


def inputs():
    """(q, k, v, dout), global, bf16."""
    from magi_attention.testing import random_qkv
    q, k, v = (t.bfloat16() for t in random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0,
                                                 requires_grad=False))
    dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM,
                       generator=torch.Generator().manual_seed(1)).bfloat16()
    return q, k, v, dout


def key_for(name: str, overlap):
    """The reference-kernel key of the test mask ``name`` at cp 2 (chunks of 32, min_heap)."""
    from magi_attention.api import magi_attn_flex_key
    from magi_attention.common import slices_to_tensors
    from magi_attention.testing.masks import named_mask
    slices = named_mask(name, SEQLEN, doc_lens=DOC_LENS, seed=1)
    return magi_attn_flex_key(*slices_to_tensors(slices), SEQLEN, *HEADS, HEAD_DIM,
                              dist.group.WORLD, chunk_size=32, dispatch_alg="min_heap",
                              overlap=overlap, backend="reference", dtype=torch.bfloat16)


def grads(key, local, dout_local):
    """(dq, dk, dv) of one calc_attn step on this rank's shards."""
    from magi_attention.api import calc_attn
    leaves = [t.detach().clone().requires_grad_() for t in local]
    out, _ = calc_attn(*leaves, key)
    return torch.autograd.grad(out, leaves, dout_local)


def bitwise_diffs(what: str, got, want) -> list[str]:
    """One line per gradient of (dq, dk, dv) ``got`` that is not bf16 and bit for bit ``want``."""
    return [f"{what} {label}: {a.dtype}, max diff {(a.float() - b.float()).abs().max().item():.3e}"
            for label, a, b in zip(("dq", "dk", "dv"), got, want)
            if a.dtype != torch.bfloat16 or not torch.equal(a, b)]


def run_on_two_ranks(check) -> str:
    """``check(rank) -> [error lines]`` on 2 gloo ranks (``testing.gloo.run_on_ranks``)."""
    from magi_attention.testing.gloo import run_on_ranks
    return run_on_ranks(check, 2)
