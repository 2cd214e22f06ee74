"""Sections on 4 H100s: MagiAttention against the CP baselines at cp 4 (issue 15)."""
from __future__ import annotations

from ._common import _cp2_below, cp_only_table, cp_only_wins

# -- session 34: 4 H100s (asked for 4 H200s) at e5be184: 16k a GPU with the runner's interleaved
# timing (hardware.rounds=3), both kernels; FA4 64k a GPU on full (rounds 1, repeat 3), the cell
# whose baselines session 33's 4 H200s did not reach
CP4_S34 = {"fa4, 16k/GPU": "h100x4/cp_s34/cp_h100x4__fa4_16k_cp4_rounds3.csv",
           "triton, 16k/GPU": "h100x4/cp_s34/cp_h100x4__triton_16k_cp4_rounds3.csv",
           "fa4, 64k/GPU": "h100x4/cp_s34/cp_h100x4__fa4_64k_full.csv"}


def cp4_s34_table() -> str:
    return cp_only_table(CP4_S34, 4)


def cp4_s34_summary() -> str:
    return cp_only_wins(CP4_S34, 4)


def cp4_s34_below() -> str:
    return _cp2_below(CP4_S34, cp_n=4)
