"""What one FFA call runs: its FlexAttnPlan, the backend and the softmax scale, after the
per-call checks (tensor metadata only; range values are read once, when a plan is built)."""
from __future__ import annotations

import math

from ..kernels.plan import FlexAttnPlan
from ._backends import backend_for, backend_for_mask
from ._plans import plan_for_tensors
from ._validate import validate_qkv, validate_range_tensors


def resolve_call(q, k, v, q_ranges, k_ranges, attn_type_map, softmax_scale, backend,
                 return_max_logits=False) -> tuple[FlexAttnPlan, str, float]:
    """(plan, resolved backend name, scale) of a call given a plan or range tensors."""
    validate_qkv(q, k, v)
    if isinstance(q_ranges, FlexAttnPlan):
        if k_ranges is not None or attn_type_map is not None:
            raise ValueError("pass either a FlexAttnPlan or (q_ranges, k_ranges, attn_type_map)")
        plan = q_ranges
        plan.check_shapes(q.shape[0], k.shape[0])
    else:
        validate_range_tensors(q, q_ranges, k_ranges, attn_type_map)
        plan = plan_for_tensors(q_ranges, k_ranges, attn_type_map, q.shape[0], k.shape[0])
    # "auto": the fastest backend for these inputs, then for this mask (decided once, kept in plan)
    name = backend_for(backend, q, k, v, return_max_logits)
    name = backend_for_mask(backend, name, plan, q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if softmax_scale is None else float(softmax_scale)
    return plan, name, scale
