"""The FlexAttnPlan behind a call that passes range tensors instead of a plan.

A training loop passes the same range tensors every step, so plans are found by the tensors'
identity (and version counter, which in-place tensor ops such as ``copy_`` and ``t[i] = x``
bump) without reading them: no device-to-host copy after the first call. Writes that bypass the
version counter (through ``t.data`` or ``t.numpy()``) are not seen: the old plan is served. New tensor objects with a known content (ranges
rebuilt every step) fall back to a content lookup, which reads them to the host (one sync) but
skips the planning.
"""
from __future__ import annotations

import torch

from ..kernels.cache import LRUCache, ranges_key
from ..kernels.plan import FlexAttnPlan

# Plans kept per process; a training loop reuses a handful of masks, a sweep a few dozen.
PLAN_CACHE_SIZE = 64

_BY_IDENTITY = LRUCache(PLAN_CACHE_SIZE)
_BY_CONTENT = LRUCache(PLAN_CACHE_SIZE)


def plan_for_tensors(q_ranges: torch.Tensor, k_ranges: torch.Tensor, attn_type_map: torch.Tensor,
                     seqlen_q: int, seqlen_k: int) -> FlexAttnPlan:
    """The cached FlexAttnPlan of these range tensors (built and validated on first sight)."""
    tensors = (q_ranges, k_ranges, attn_type_map)
    identity = (tuple(id(t) for t in tensors), tuple(t._version for t in tensors),
                seqlen_q, seqlen_k)
    # the entry holds the tensors themselves, so their ids cannot be reused by other tensors
    # while it exists
    _, plan = _BY_IDENTITY.get_or_build(
        identity, lambda: (tensors, _by_content(*tensors, seqlen_q, seqlen_k)))
    return plan


def _by_content(q_ranges, k_ranges, attn_type_map, seqlen_q: int, seqlen_k: int) -> FlexAttnPlan:
    host = tuple(t.detach().cpu() for t in (q_ranges, k_ranges, attn_type_map))  # one read
    key = (ranges_key(*host), seqlen_q, seqlen_k, str(q_ranges.device))

    def build() -> FlexAttnPlan:
        plan = FlexAttnPlan.from_tensors(*host, seqlen_q, seqlen_k)
        # the plan's device copy is its own (a plan is a snapshot of the ranges it was built
        # from); cloned on the device, so no second copy to the host
        plan.cached(("tensors", str(q_ranges.device)),
                    lambda: tuple(t.clone(memory_format=torch.contiguous_format)
                                  for t in (q_ranges, k_ranges, attn_type_map)))
        return plan

    return _BY_CONTENT.get_or_build(key, build)


def clear_plan_caches() -> None:
    _BY_IDENTITY.clear()
    _BY_CONTENT.clear()
