"""Dense-mask attention by plain torch autograd: the independent oracle at small sizes."""
from __future__ import annotations

import torch


def dense_attention(q, k, v, mask: torch.Tensor, softmax_scale: float | None = None,
                    softcap: float = 0.0, compute_dtype=torch.float64, sink=None):
    """softmax(q k^T * scale, masked) v with autograd. q: [Sq, Hq, D], k/v: [Sk, Hkv, D],
    mask: bool [Sq, Sk] or [Hkv, Sq, Sk]. Returns (out [Sq, Hq, D] compute_dtype, lse [Sq, Hq]).
    Rows without keys give out 0 and lse -inf (and no NaN gradients). ``sink`` [num_sink, Hq]:
    one more score column per sink logit, as it is (not scaled, not softcapped), whose
    probability multiplies no value (attention sinks)."""
    seqlen_q, num_heads_q, head_dim = q.shape
    num_heads_kv = k.shape[1]
    group = num_heads_q // num_heads_kv
    scale = head_dim ** -0.5 if softmax_scale is None else softmax_scale
    qc, kc, vc = (t.to(compute_dtype) for t in (q, k, v))
    kc = kc.repeat_interleave(group, dim=1)
    vc = vc.repeat_interleave(group, dim=1)
    s = torch.einsum("qhd,khd->hqk", qc, kc) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    m = mask if mask.dim() == 3 else mask[None]
    m = m.repeat_interleave(group, dim=0) if m.shape[0] > 1 else m
    s = s.masked_fill(~m, float("-inf"))
    if sink is not None:  # the sink columns, kept by every row
        num_sink = sink.shape[0]
        columns = sink.to(compute_dtype).t()[:, None, :].expand(num_heads_q, seqlen_q, num_sink)
        s = torch.cat([s, columns], dim=-1)
        m = torch.cat([m.expand(num_heads_q, -1, -1),
                       torch.ones(num_heads_q, seqlen_q, num_sink, dtype=torch.bool,
                                  device=m.device)], dim=-1)
        vc = torch.cat([vc, vc.new_zeros(num_sink, *vc.shape[1:])])
    lse = torch.logsumexp(s, dim=-1)
    has_keys = m.any(dim=-1).expand_as(lse)
    p = torch.exp(s - torch.where(has_keys, lse, torch.zeros_like(lse))[..., None])
    p = p.masked_fill(~m, 0.0)
    out = torch.einsum("hqk,khd->qhd", p, vc)
    return out, lse.transpose(0, 1)


def random_qkv(seqlen_q: int, seqlen_k: int, num_heads_q: int, num_heads_kv: int, head_dim: int,
               dtype=torch.float32, device="cpu", seed: int = 0, requires_grad: bool = True):
    g = torch.Generator(device="cpu").manual_seed(seed)
    make = lambda s, h: torch.randn(s, h, head_dim, generator=g).to(device=device, dtype=dtype)
    q, k, v = make(seqlen_q, num_heads_q), make(seqlen_k, num_heads_kv), make(seqlen_k, num_heads_kv)
    return tuple(t.requires_grad_(requires_grad) for t in (q, k, v))
