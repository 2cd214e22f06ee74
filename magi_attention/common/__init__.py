"""Core types: half-open ranges, mask types, AttnSlice and the algebra over lists of slices."""
from .mask import (check_slice_bounds, normalize, slices_from_tensors, slices_to_tensors,
                   to_dense, union_area)
from .mask_type import AttnMaskType
from .range import AttnRange, RangeError
from .ranges import AttnRanges
from .slice import AttnSlice, region_to_slices
from .slice_array import SliceArray, regions_to_slices

__all__ = [
    "AttnMaskType", "AttnRange", "AttnRanges", "AttnSlice", "RangeError", "SliceArray",
    "check_slice_bounds", "normalize", "region_to_slices", "regions_to_slices",
    "slices_from_tensors", "slices_to_tensors", "to_dense", "union_area",
]
