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
    # H200, bf16, GQA 64:8, d128, S=16k (sweep v1 in notes/ffa_triton.md), TFLOPs/s full/causal:
    # 128x64 w4 s3: 501/464 (best); s4: 500/456; 128x128 w8 s3: 471/443; 64x64 w4: 436/409;
    # 128x32 w4: 378/396; 128x64 w8: 406/396. head_dim 64 uses the same tiles (not swept).
    return FwdConfig(block_m=128, block_n=64, num_warps=4, num_stages=3)


def bwd_config(head_dim: int) -> BwdConfig:
    # same sweep, TFLOPs/s full/causal: 64/64/64/64 w4 s3: 372/349 (best); 64/128/128/64 w8:
    # 324/333; 32/64/64/32 w4: 296/303; the tutorial's 32/128/128/32 w4: 143/130 (spills).
    return BwdConfig(block_m1=64, block_n1=64, block_m2=64, block_n2=64, num_warps=4, num_stages=3)
