"""MagiAttention's public API: build a key for a mask, dispatch, calc_attn, undispatch."""
from .calc_attn import calc_attn
from .dispatch import dispatch, undispatch
from .key import DistAttnKey, magi_attn_flex_key, magi_attn_varlen_key

__all__ = ["DistAttnKey", "calc_attn", "dispatch", "magi_attn_flex_key", "magi_attn_varlen_key",
           "undispatch"]
