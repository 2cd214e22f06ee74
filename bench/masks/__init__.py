"""Mask patterns as AttnSlice lists, their reference definitions, and converters to every format.

    mask = build_mask("causal_document", 8192, doc_lens=[4096, 2048, 2048])
    mask.slices, mask.area        # union of slices; exact kept-cell count
    convert.to_cu_seqlens(mask)   # ([0, 4096, 6144, 8192], True)
    mask_from_slices([AttnSlice.make(0, 8192, 0, 8192, "causal")], 8192)   # your own slices
"""
from . import convert
from .build import build_mask, check_params, mask_from_slices
from .convert import UnsupportedMask
from .mask import Mask
from .reference import reference_dense, reference_predicate
from .registry import KERNEL_MASK_NAMES, MASK_NAMES, PATTERNS, STATIC_MASK_NAMES

__all__ = [
    "KERNEL_MASK_NAMES", "MASK_NAMES", "Mask", "PATTERNS", "STATIC_MASK_NAMES", "UnsupportedMask",
    "build_mask", "check_params", "convert", "mask_from_slices", "reference_dense", "reference_predicate",
]
