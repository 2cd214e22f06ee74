"""The cross-attention cases the gloo tests share: masks over a q sequence and a different kv
sequence (and one self-attention mask), each beside its dense definition, a key per case and
overlap mode, and one calc_attn step on a rank's shards."""
import random

import numpy as np
import torch

from magi_attention.common import AttnMaskType
from magi_attention.testing import document_slices, random_slices

HEADS = (4, 2)
HEAD_DIM = 16
CHUNK = 16
ATOL = 2e-4

FULL, CAUSAL = AttnMaskType.FULL, AttnMaskType.CAUSAL
# name: (seqlen_q, seqlen_k, mask): a mask is slices (q0, q1, k0, k1, type) for
# magi_attn_flex_key, or ("varlen", cu_seqlens_q, cu_seqlens_k, causal) for the shortcut;
# seqlen_k None: a self-attention key (total_seqlen)
CASES = {
    "full": (256, 96, [(0, 256, 0, 96, FULL)]),
    # bottom-right: rows [0, 160) keep no key
    "causal": (256, 96, [(0, 256, 0, 96, CAUSAL)]),
    "causal_long_k": (128, 320, [(0, 128, 0, 320, CAUSAL)]),
    # document 2 has no key (left out); documents shorter and longer on the k side
    "paired_docs_full": (256, 96, ("varlen", [0, 64, 96, 192, 256], [0, 16, 48, 48, 96], False)),
    "paired_docs_causal": (256, 128, ("varlen", [0, 40, 64, 200, 256], [0, 60, 70, 100, 128],
                                      True)),
    "random_slices": (256, 96, [(s.q_range.start, s.q_range.end, s.k_range.start, s.k_range.end,
                                 s.mask_type) for s in random_slices(random.Random(3), 256, 96, 6)]),
    # the cross path with equal lengths (q and kv still dispatched apart)
    "equal_lengths": (256, 256, [(0, 256, 0, 256, CAUSAL)]),
}
SELF_CASES = {"self_causal_docs": (256, None, [
    (s.q_range.start, s.q_range.end, s.k_range.start, s.k_range.end, s.mask_type)
    for s in document_slices([64, 32, 96, 64], CAUSAL)])}
# mode: (OverlapConfig kwargs, dispatch_alg); each mode also names the path it must run
MODES = {"auto": ({}, "auto"),
         "staged2": ({"fused": False, "num_stages": 2}, "sequential"),
         "fused_split": ({"fused": True, "split": True}, "min_heap"),
         "cut_both": ({"fused": True, "cut": "both"}, "balanced_runs")}


def dense_mask(seqlen_q: int, seqlen_k: int, mask) -> torch.Tensor:
    """The mask from its definition: FULL keeps the rectangle; CAUSAL keeps k - k1 <= q - q1
    (aligned bottom-right), INVCAUSAL k - k0 >= q - q0 (top-left), BICAUSAL both; paired
    documents keep document i's queries on document i's keys."""
    if mask[0] == "varlen":
        _, cu_q, cu_k, causal = mask
        mask = [(a, b, c, d, CAUSAL if causal else FULL)
                for a, b, c, d in zip(cu_q, cu_q[1:], cu_k, cu_k[1:])]
    q = torch.arange(seqlen_q)[:, None]
    k = torch.arange(seqlen_k)[None, :]
    out = torch.zeros(seqlen_q, seqlen_k, dtype=torch.bool)
    for q0, q1, k0, k1, t in mask:
        keep = (q >= q0) & (q < q1) & (k >= k0) & (k < k1)
        if AttnMaskType(t) in (CAUSAL, AttnMaskType.BICAUSAL):
            keep &= k - k1 <= q - q1
        if AttnMaskType(t) in (AttnMaskType.INVCAUSAL, AttnMaskType.BICAUSAL):
            keep &= k - k0 >= q - q0
        out |= keep
    return out


def build_key(name: str, mode: str, cp=None, **kwargs):
    """The key of case ``name`` (CASES or SELF_CASES) in overlap ``mode`` (MODES)."""
    from magi_attention.api import magi_attn_flex_key, magi_attn_varlen_key
    from magi_attention.meta import OverlapConfig
    seqlen_q, seqlen_k, mask = {**CASES, **SELF_CASES}[name]
    overlap, alg = MODES[mode]
    args = dict(cp_group_or_mesh=cp, chunk_size=CHUNK, dispatch_alg=alg,
                overlap=OverlapConfig(**overlap), backend="reference", dtype=torch.float32,
                **kwargs)
    if mask[0] == "varlen":
        _, cu_q, cu_k, causal = mask
        return magi_attn_varlen_key(num_heads_q=HEADS[0], num_heads_kv=HEADS[1],
                                    head_dim=HEAD_DIM, causal=causal, cu_seqlens_q=cu_q,
                                    cu_seqlens_k=cu_k, **args)
    rows = np.array([m[:4] for m in mask], dtype=np.int64)
    seqlens = (dict(total_seqlen=seqlen_q) if seqlen_k is None else
               dict(total_seqlen_q=seqlen_q, total_seqlen_k=seqlen_k))
    return magi_attn_flex_key(rows[:, :2], rows[:, 2:], [m[4] for m in mask],
                              num_heads_q=HEADS[0], num_heads_kv=HEADS[1], head_dim=HEAD_DIM,
                              **seqlens, **args)


def inputs(name: str):
    """Global (q, k, v, dout), fp32, the same on every rank."""
    from magi_attention.testing import random_qkv
    seqlen_q, seqlen_k, _ = {**CASES, **SELF_CASES}[name]
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k
    q, k, v = random_qkv(seqlen_q, seqlen_k, *HEADS, HEAD_DIM, seed=0, requires_grad=False)
    dout = torch.randn(seqlen_q, HEADS[0], HEAD_DIM, generator=torch.Generator().manual_seed(1))
    return q, k, v, dout


def step(key, q, k, v, dout):
    """(out, lse, dq, dk, dv) of one calc_attn step on this rank's shards (local)."""
    from magi_attention.api import calc_attn, dispatch
    local = [dispatch(q, key).requires_grad_(), dispatch(k, key, side="kv").requires_grad_(),
             dispatch(v, key, side="kv").requires_grad_()]
    out, meta = calc_attn(*local, key)
    grads = torch.autograd.grad(out, local, dispatch(dout, key))
    return (out.detach(), meta.lse, *grads)


def global_step(key, q, k, v, dout):
    """``step`` undispatched: out, lse, dq [S_q, ...], dk, dv [S_k, ...]."""
    from magi_attention.api import undispatch
    out, lse, dq, dk, dv = step(key, q, k, v, dout)
    return ([undispatch(t, key) for t in (out, lse, dq)]
            + [undispatch(t, key, side="kv") for t in (dk, dv)])


def max_errors(got, want) -> dict[str, float]:
    """Max |got - want| of each tensor; lse's -inf (rows without keys) must match exactly."""
    errs = {}
    for label, a, b in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        a, b = a.double(), b.double()
        finite = torch.isfinite(b)
        if not torch.equal(torch.isfinite(a), finite):
            errs[label] = float("inf")
            continue
        errs[label] = (a[finite] - b[finite]).abs().max().item() if finite.any() else 0.0
    return errs
