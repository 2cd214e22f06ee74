"""Attention sinks: learnable logits that join every query row's softmax denominator and add
nothing to its output (the learnable sink of gpt-oss; FA4's ``learnable_sink``).

A sink is applied to a kernel's (out, lse) over the keys, after the fact, so every backend and
the distributed runtime take sinks without kernel changes. With ``c[h] = logsumexp_s
sink[s, h]`` (sink logits are not multiplied by softmax_scale nor softcapped):

    lse' = logaddexp(lse, c),   out' = out * exp(lse - lse')

(a row with no key: out' 0, lse' = c). The backward is the kernels' own: given (out', lse')
the FlashAttention backward (P = exp(S - lse'), D = rowsum(dout * out')) yields exact dq, dk,
dv; the sink's gradient is ``dsink[s, h] = -sum_i exp(sink[s, h] - lse'[i, h]) * D[i, h]``.
"""
from __future__ import annotations

import torch


def check_sink(sink, num_heads_q: int, device: torch.device) -> None:
    """The one boundary check of a ``sink`` argument: fp32 [num_sink, num_heads_q] on q's
    device."""
    if not isinstance(sink, torch.Tensor):
        raise TypeError(f"sink must be a tensor [num_sink, num_heads_q] or None, got "
                        f"{type(sink).__name__}")
    if sink.dim() != 2 or sink.shape[1] != num_heads_q or sink.shape[0] < 1:
        raise ValueError(f"sink must be [num_sink >= 1, num_heads_q={num_heads_q}], got "
                         f"{tuple(sink.shape)}")
    if sink.dtype != torch.float32:
        raise TypeError(f"sink must be float32 (learnable logits), got {sink.dtype}")
    if sink.device != device:
        raise ValueError(f"sink is on {sink.device}, q on {device}")


def apply_sink(out: torch.Tensor, lse: torch.Tensor, sink: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(out', lse') of a kernel's out [Sq, Hq, D] and lse [Sq, Hq] fp32 with the sink logits
    [num_sink, Hq] in every row's denominator; out' in out's dtype."""
    lse_new = torch.logaddexp(lse, torch.logsumexp(sink, dim=0))
    # -inf - -inf (no key and every sink -inf) is NaN: such a row keeps out 0
    scale = torch.exp(lse - lse_new).nan_to_num_(0.0)
    return (out * scale[..., None]).to(out.dtype), lse_new


def sink_grad(sink: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, dout: torch.Tensor
              ) -> torch.Tensor:
    """dsink [num_sink, Hq] fp32 of this call's rows, from the sinked out' and lse'.

    Computed as softmax_s(sink) * sum_i exp(c - lse'_i) * D_i (c = logsumexp_s sink): both
    factors lie in [0, 1] (lse' >= c), and the per-sink weight needs no [num_sink, Sq, Hq]
    buffer."""
    delta = (dout.float() * out.float()).sum(dim=-1)          # D: [Sq, Hq]
    share = torch.exp(torch.logsumexp(sink, dim=0) - lse).nan_to_num_(0.0)  # the sinks' P
    weight = torch.softmax(sink, dim=0).nan_to_num_(0.0)      # each sink's part of c
    return -(weight * (share * delta).sum(dim=0))
