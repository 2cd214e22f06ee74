"""Test oracles and inputs shared by the FFA, MagiAttention and CP-strategy tests."""
from .dense import dense_attention, random_qkv
from .slices import document_slices, random_slices
from .sync import assert_no_sync

__all__ = ["assert_no_sync", "dense_attention", "document_slices", "random_qkv", "random_slices"]
