"""Test oracles and inputs shared by the FFA, MagiAttention and CP-strategy tests."""
from .dense import dense_attention, random_qkv
from .slices import random_slices

__all__ = ["dense_attention", "random_qkv", "random_slices"]
