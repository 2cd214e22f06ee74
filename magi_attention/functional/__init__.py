"""Public functional API."""
from ._backends import BackendUnavailable, load_backend, resolve_backend
from .flex_flash_attn import (AttnForwardMeta, flex_flash_attn_bwd, flex_flash_attn_func,
                              flex_flash_attn_fwd)
from .dist_attn import DistAttnFunc, dist_attn_func
from ._dist_runtime import DistAttnRuntime
from .merge import merge_out_lse

__all__ = ["AttnForwardMeta", "BackendUnavailable", "DistAttnFunc", "DistAttnRuntime", "dist_attn_func", "flex_flash_attn_bwd", "flex_flash_attn_func",
           "flex_flash_attn_fwd", "load_backend", "merge_out_lse", "resolve_backend"]
