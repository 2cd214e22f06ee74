"""Public functional API."""
from ._backends import BackendUnavailable, load_backend, resolve_backend
from .flex_flash_attn import AttnForwardMeta, flex_flash_attn_func

__all__ = ["AttnForwardMeta", "BackendUnavailable", "flex_flash_attn_func", "load_backend",
           "resolve_backend"]
