"""Tile configurations of the Triton FFA kernels, one frozen dataclass per kernel, each picked by
one function. The plan (kernels.block_sparse) is built per tile shape, so the configs are chosen
on the host rather than by triton.autotune. Measurements behind each choice: notes/ffa_triton.md."""
from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (64, 128)


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@dataclass(frozen=True)
class BwdConfig:
    block_m1: int  # q rows per step of the dk/dv kernel
    block_n1: int  # keys owned by one dk/dv program
    block_m2: int  # q rows owned by one dq program
    block_n2: int  # keys per step of the dq kernel
    num_warps: int
    num_stages: int


def fwd_config(head_dim: int) -> FwdConfig:
    # H200, bf16, GQA 64:8, S=16k full/causal: see notes/ffa_triton.md (fwd sweep)
    if head_dim <= 64:
        return FwdConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)
    return FwdConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)


def bwd_config(head_dim: int) -> BwdConfig:
    # starting point: the Triton fused-attention tutorial's Hopper choice (32, 128, 128, 32)
    return BwdConfig(block_m1=32, block_n1=128, block_m2=128, block_n2=32, num_warps=4, num_stages=3)
