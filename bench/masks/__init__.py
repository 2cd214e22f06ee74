"""Mask patterns as AttnSlice lists, their reference definitions, and converters to every format.

    mask = build_mask("causal_document", 8192, doc_lens=[4096, 2048, 2048])
    mask.slices, mask.area        # union of slices; exact kept-cell count
    convert.to_cu_seqlens(mask)   # ([0, 4096, 6144, 8192], True)
"""
from . import convert
from .build import build_mask
from .convert import UnsupportedMask
from .mask import Mask
from .reference import reference_dense, reference_predicate
from .registry import KERNEL_MASK_NAMES, MASK_NAMES, PATTERNS, STATIC_MASK_NAMES

__all__ = [
    "KERNEL_MASK_NAMES", "MASK_NAMES", "Mask", "PATTERNS", "STATIC_MASK_NAMES", "UnsupportedMask",
    "build_mask", "convert", "reference_dense", "reference_predicate",
]
