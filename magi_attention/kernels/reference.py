"""Pure-torch FFA: the oracle every other backend is tested against. Runs on CPU and GPU.

Online softmax over key chunks, in fp32, with the slice union materialised one key chunk at a
time (never S x S). The backward is the FlashAttention one (recompute P from lse, delta =
rowsum(dO * O)), so it also serves distributed attention, which passes a global lse and out.
"""
from __future__ import annotations

import math

import torch

from ..common.mask_type import AttnMaskType
from .plan import FlexAttnPlan

# Key columns processed per step; bounds the fp32 score buffer to seqlen_q x heads x chunk.
KEY_CHUNK = 512


def _chunk_mask(q_ranges: list, k_ranges: list, types: list, seqlen_q: int,
                k_start: int, k_end: int, device) -> torch.Tensor:
    """Union of all slices restricted to key columns [k_start, k_end): bool [seqlen_q, k_end - k_start]."""
    mask = torch.zeros(seqlen_q, k_end - k_start, dtype=torch.bool, device=device)
    for (qs, qe), (ks, ke), t in zip(q_ranges, k_ranges, types):
        lo, hi = max(ks, k_start), min(ke, k_end)
        if lo >= hi or qs >= qe:
            continue
        q = torch.arange(qs, qe, device=device)[:, None]
        k = torch.arange(lo, hi, device=device)[None, :]
        keep = torch.ones(qe - qs, hi - lo, dtype=torch.bool, device=device)
        mask_type = AttnMaskType(t)
        if mask_type.has_upper_diagonal:
            keep &= k - ke <= q - qe
        if mask_type.has_lower_diagonal:
            keep &= k - ks >= q - qs
        mask[qs:qe, lo - k_start:hi - k_start] |= keep
    return mask


def _scores(qf, kf, softmax_scale, softcap):
    """qf: [Hkv, G, Sq, D], kf: [Hkv, C, D] -> scores [Hkv, G, Sq, C] (and tanh for softcap)."""
    s = torch.einsum("hgqd,hkd->hgqk", qf, kf) * softmax_scale
    if softcap > 0:
        t = torch.tanh(s / softcap)
        return t * softcap, t
    return s, None


def fwd(q, k, v, mask: FlexAttnPlan, softmax_scale: float, softcap: float = 0.0,
        return_max_logits: bool = False, return_lse: bool = True):
    """q: [Sq, Hq, D], k/v: [Sk, Hkv, D] -> (out [Sq, Hq, D] q.dtype, lse [Sq, Hq] fp32,
    max_logits [Hq] fp32 or None). Rows covered by no slice: out 0, lse -inf.
    ``return_lse=False`` lets a backend skip writing lse (then None); this one computes it
    anyway (the online softmax needs it) and returns it."""
    seqlen_q, num_heads_q, head_dim = q.shape
    seqlen_k, num_heads_kv, _ = k.shape
    group = num_heads_q // num_heads_kv
    qr, kr, ty = mask.host_lists()
    qf = q.float().reshape(seqlen_q, num_heads_kv, group, head_dim).permute(1, 2, 0, 3)
    kf, vf = k.float().transpose(0, 1), v.float().transpose(0, 1)
    row_max = torch.full((num_heads_kv, group, seqlen_q), -math.inf, device=q.device)
    row_sum = torch.zeros_like(row_max)
    acc = torch.zeros(num_heads_kv, group, seqlen_q, head_dim, device=q.device)
    max_logits = torch.full((num_heads_kv, group), -math.inf, device=q.device)
    for k_start in range(0, seqlen_k, KEY_CHUNK):
        k_end = min(seqlen_k, k_start + KEY_CHUNK)
        mask = _chunk_mask(qr, kr, ty, seqlen_q, k_start, k_end, q.device)
        if not mask.any():
            continue
        s, _ = _scores(qf, kf[:, k_start:k_end], softmax_scale, softcap)
        s = s.masked_fill(~mask, -math.inf)
        chunk_max = s.amax(dim=-1)
        max_logits = torch.maximum(max_logits, chunk_max.amax(dim=-1))
        new_max = torch.maximum(row_max, chunk_max)
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
        p = torch.exp(s - safe_max[..., None])
        rescale = torch.exp(row_max - safe_max)
        row_sum = row_sum * rescale + p.sum(dim=-1)
        acc = acc * rescale[..., None] + torch.einsum("hgqk,hkd->hgqd", p, vf[:, k_start:k_end])
        row_max = new_max
    has_keys = row_sum > 0
    out = torch.where(has_keys[..., None], acc / row_sum.clamp_min(1e-30)[..., None], 0.0)
    lse = torch.where(has_keys, row_max + torch.log(row_sum.clamp_min(1e-30)), -math.inf)
    out = out.permute(2, 0, 1, 3).reshape(seqlen_q, num_heads_q, head_dim).to(q.dtype)
    lse = lse.permute(2, 0, 1).reshape(seqlen_q, num_heads_q).contiguous()
    return out, lse, (max_logits.reshape(num_heads_q) if return_max_logits else None)


def bwd(dout, q, k, v, out, lse, mask: FlexAttnPlan, softmax_scale: float,
        softcap: float = 0.0, deterministic: bool = False):
    """Gradients (dq, dk, dv) in the input dtypes. ``lse`` and ``out`` may be global (CP): the
    result is then this key set's share of dq and its dk, dv."""
    seqlen_q, num_heads_q, head_dim = q.shape
    seqlen_k, num_heads_kv, _ = k.shape
    group = num_heads_q // num_heads_kv
    qr, kr, ty = mask.host_lists()

    def by_group(x):  # [Sq, Hq, D] -> [Hkv, G, Sq, D]; D explicit: -1 is ambiguous at Sq = 0
        return x.float().reshape(seqlen_q, num_heads_kv, group, x.shape[-1]).permute(1, 2, 0, 3)

    qf, dof = by_group(q), by_group(dout)
    delta = (dof * by_group(out)).sum(dim=-1)
    lse_g = lse.float().reshape(seqlen_q, num_heads_kv, group).permute(1, 2, 0)
    lse_g = torch.where(torch.isinf(lse_g), torch.full_like(lse_g, math.inf), lse_g)  # P = 0 there
    kf, vf = k.float().transpose(0, 1), v.float().transpose(0, 1)
    dq = torch.zeros_like(qf)
    dk = torch.zeros(num_heads_kv, seqlen_k, head_dim, device=q.device)
    dv = torch.zeros_like(dk)
    for k_start in range(0, seqlen_k, KEY_CHUNK):
        k_end = min(seqlen_k, k_start + KEY_CHUNK)
        mask = _chunk_mask(qr, kr, ty, seqlen_q, k_start, k_end, q.device)
        if not mask.any():
            continue
        kc, vc = kf[:, k_start:k_end], vf[:, k_start:k_end]
        s, tanh = _scores(qf, kc, softmax_scale, softcap)
        p = torch.exp(s - lse_g[..., None]).masked_fill(~mask, 0.0)
        dv[:, k_start:k_end] = torch.einsum("hgqk,hgqd->hkd", p, dof)
        dp = torch.einsum("hgqd,hkd->hgqk", dof, vc)
        ds = p * (dp - delta[..., None])
        if tanh is not None:
            ds = ds * (1 - tanh * tanh)
        dq += torch.einsum("hgqk,hkd->hgqd", ds, kc) * softmax_scale
        dk[:, k_start:k_end] = torch.einsum("hgqk,hgqd->hkd", ds, qf) * softmax_scale
    dq = dq.permute(2, 0, 1, 3).reshape(seqlen_q, num_heads_q, head_dim).to(q.dtype)
    return dq, dk.transpose(0, 1).to(k.dtype), dv.transpose(0, 1).to(v.dtype)
