"""Merging partial attention results over disjoint key sets by their log-sum-exp (the CP
runtime's merge; the kernels live in ``kernels.merge``)."""
from ..kernels.merge import merge_out_lse, merge_out_lse_torch

__all__ = ["merge_out_lse", "merge_out_lse_torch"]
