"""Test oracles shared by the FFA, MagiAttention and CP-strategy tests."""
from .dense import dense_attention, random_qkv

__all__ = ["dense_attention", "random_qkv"]
