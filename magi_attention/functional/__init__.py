"""Public functional API."""
from ..kernels.plan import FlexAttnPlan
from ._backends import (BackendUnavailable, backend_for, backend_reason, load_backend,
                        resolve_backend)
from ._plans import clear_plan_caches
from .flex_flash_attn import (AttnForwardMeta, flex_attn_plan, flex_flash_attn_bwd,
                              flex_flash_attn_func, flex_flash_attn_fwd)
from .dist_attn import DistAttnFunc, dist_attn_func
from ._dist_runtime import DistAttnRuntime
from .merge import merge_out_lse
from .per_kv_head import flex_flash_attn_per_kv_head

__all__ = ["AttnForwardMeta", "BackendUnavailable", "DistAttnFunc", "DistAttnRuntime",
           "backend_for",
           "FlexAttnPlan", "backend_reason", "clear_plan_caches", "dist_attn_func",
           "flex_attn_plan", "flex_flash_attn_bwd", "flex_flash_attn_func", "flex_flash_attn_fwd",
           "flex_flash_attn_per_kv_head",
           "load_backend", "merge_out_lse", "resolve_backend"]
