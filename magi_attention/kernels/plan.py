"""FlexAttnPlan: an FFA mask prepared once, reused by every call.

Everything a kernel needs from the mask that is host work (range validation, the block-sparse
tile plan of the Triton kernels, FA4's block-sparse tensors and bitmaps, the recognition of
masks FA4 runs natively) is done once per plan and cached in it, per device and per backend
configuration. A call then only launches kernels: no device-to-host copy, no synchronisation.

    plan = FlexAttnPlan.from_slices(slices, seqlen_q, seqlen_k)      # or .from_tensors(...)
    out, meta = flex_flash_attn_func(q, k, v, plan)                  # every step of a loop

Ranges are half-open ``[start, end)``; slice i covers ``q_ranges[i] x k_ranges[i]`` shaped by
``attn_type_map[i]`` (AttnMaskType); overlapping slices mean their union.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

import numpy as np
import torch

from ..common import handles
from ..common.mask_type import AttnMaskType
from ..common.slice import AttnSlice
from ..common.slice_array import SliceArray

V = TypeVar("V")

# Offset standing for "no diagonal on this side" in the kernels' int32 slice bounds: far beyond
# any seqlen, and q +- it still fits in int32.
UNBOUNDED_OFFSET = 1 << 30
NUM_MASK_TYPES = len(AttnMaskType)


class FlexAttnPlan:
    """A validated AttnSlice mask over ``seqlen_q x seqlen_k`` plus the kernels' cached state.

    Build it with ``from_slices`` / ``from_tensors`` (or ``flex_attn_plan`` in
    ``magi_attention.functional``); pass it to ``flex_flash_attn_func`` in place of the range
    tensors. It holds no q/k/v, so one plan serves any head count, head_dim and dtype, and any
    device: kernel state is built on first use per (backend, configuration, device) and kept.

    Attributes:
        slices: the mask as numpy columns (host), in the order given.
        seqlen_q, seqlen_k: the sequence lengths the ranges were validated against.
    """

    def __init__(self, slices: SliceArray, seqlen_q: int, seqlen_k: int) -> None:
        _validate(slices, seqlen_q, seqlen_k)
        self.slices = slices
        self.seqlen_q = int(seqlen_q)
        self.seqlen_k = int(seqlen_k)
        self._state: dict[Hashable, object] = {}
        self._bounds: np.ndarray | None = None
        handles.register(self)  # the custom ops (torch.compile) reach it by id(plan)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_slices(cls, slices: Sequence[AttnSlice] | SliceArray, seqlen_q: int,
                    seqlen_k: int | None = None) -> "FlexAttnPlan":
        """From AttnSlices (or a SliceArray); ``seqlen_k`` defaults to ``seqlen_q``."""
        arr = slices if isinstance(slices, SliceArray) else SliceArray.from_slices(list(slices))
        return cls(arr, seqlen_q, seqlen_q if seqlen_k is None else seqlen_k)

    @classmethod
    def from_tensors(cls, q_ranges, k_ranges, attn_type_map, seqlen_q: int,
                     seqlen_k: int | None = None) -> "FlexAttnPlan":
        """From the range tensors of the FFA API (int32 ``[n, 2]``, ``[n, 2]``, ``[n]``; numpy
        arrays and nested lists work too; empty lists are the empty mask). CUDA tensors are
        read back once, here. The plan is a snapshot: it keeps copies of the ranges (a clone of
        int32 tensors as its device copy), so editing the caller's tensors afterwards changes
        neither the mask it computes nor what ``tensors()`` returns."""
        q = _as_array(q_ranges, "q_ranges", (-1, 2))
        k = _as_array(k_ranges, "k_ranges", (-1, 2))
        t = _as_array(attn_type_map, "attn_type_map", (-1,))
        if not (len(q) == len(k) == len(t)):
            raise ValueError(f"num_slices mismatch: q_ranges {len(q)}, k_ranges {len(k)}, "
                             f"attn_type_map {len(t)}")
        plan = cls(SliceArray(q[:, 0].copy(), q[:, 1].copy(), k[:, 0].copy(), k[:, 1].copy(),
                              t.copy()), seqlen_q, seqlen_q if seqlen_k is None else seqlen_k)
        tensors = (q_ranges, k_ranges, attn_type_map)
        if all(isinstance(x, torch.Tensor) and x.dtype == torch.int32 and x.is_contiguous()
               for x in tensors):
            plan._state[("tensors", str(q_ranges.device))] = tuple(x.clone() for x in tensors)
        return plan

    # -- what kernels read -------------------------------------------------------------------
    @property
    def num_slices(self) -> int:
        return len(self.slices)

    def tensors(self, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(q_ranges [n, 2], k_ranges [n, 2], attn_type_map [n]) int32 on ``device`` (cached)."""
        return self.cached(("tensors", str(torch.device(device))),
                           lambda: self.slices.to_tensors(device))

    @property
    def bounds(self) -> np.ndarray:
        """int64 [n, 6]: (q_start, q_end, k_start, k_end, lower, upper) per slice; a cell is kept
        iff it is in the rectangle and ``q + lower <= k <= q + upper`` (unbounded sides are
        +-UNBOUNDED_OFFSET). The one place where AttnMaskType becomes kernel arithmetic."""
        if self._bounds is None:
            self._bounds = self.bounds_of(self.slices)
        return self._bounds

    @staticmethod
    def bounds_of(s: SliceArray) -> np.ndarray:
        """``bounds`` of any SliceArray (no validation)."""
        lower = np.clip(s.lower_offset, -UNBOUNDED_OFFSET, UNBOUNDED_OFFSET)
        upper = np.clip(s.upper_offset, -UNBOUNDED_OFFSET, UNBOUNDED_OFFSET)
        return np.stack([s.q_start, s.q_end, s.k_start, s.k_end, lower, upper],
                        axis=1).astype(np.int64).reshape(-1, 6)

    def host_lists(self) -> tuple[list, list, list]:
        """(q_ranges, k_ranges, types) as Python lists (the reference kernel's loops)."""
        return self.cached(("host_lists",), lambda: (
            np.stack([self.slices.q_start, self.slices.q_end], 1).tolist(),
            np.stack([self.slices.k_start, self.slices.k_end], 1).tolist(),
            self.slices.mask_type.tolist()))

    def cached(self, key: Hashable, build: Callable[[], V]) -> V:
        """The plan's value under ``key``, built once by ``build()`` (kernel state lives here)."""
        if key not in self._state:
            self._state[key] = build()
        return self._state[key]

    def check_shapes(self, seqlen_q: int, seqlen_k: int) -> None:
        if (seqlen_q, seqlen_k) != (self.seqlen_q, self.seqlen_k):
            raise ValueError(f"the plan was made for seqlen_q={self.seqlen_q}, seqlen_k="
                             f"{self.seqlen_k}; got q with {seqlen_q} rows and k with {seqlen_k}")

    def __repr__(self) -> str:
        return (f"FlexAttnPlan(num_slices={self.num_slices}, seqlen_q={self.seqlen_q}, "
                f"seqlen_k={self.seqlen_k})")


def _as_array(x, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point or x.dtype == torch.bool:
            raise TypeError(f"{name} must be an integer tensor, got {x.dtype}")
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.size == 0:  # an empty list is float64 to numpy, and still the empty mask
        arr = arr.reshape(0, *shape[1:]).astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got {arr.dtype}")
    if arr.ndim != len(shape) or (len(shape) == 2 and arr.shape[1] != shape[1]):
        want = "[num_slices, 2]" if len(shape) == 2 else "[num_slices]"
        raise ValueError(f"{name} must be {want}, got {tuple(arr.shape)}")
    return arr.astype(np.int64)


def _validate(slices: SliceArray, seqlen_q: int, seqlen_k: int) -> None:
    for name, value in (("seqlen_q", seqlen_q), ("seqlen_k", seqlen_k)):
        if int(value) != value or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    for name, start, end, bound in (("q_ranges", slices.q_start, slices.q_end, seqlen_q),
                                    ("k_ranges", slices.k_start, slices.k_end, seqlen_k)):
        bad = (start < 0) | (start > end) | (end > bound)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name}[{i}] = [{start[i]}, {end[i]}) is invalid: need "
                             f"0 <= start <= end <= {bound} (seqlen of {name[0]})")
    bad_type = (slices.mask_type < 0) | (slices.mask_type >= NUM_MASK_TYPES)
    if bad_type.any():
        raise ValueError(f"attn_type_map values must be in 0..{NUM_MASK_TYPES - 1} "
                         f"(AttnMaskType), got {sorted(set(slices.mask_type[bad_type].tolist()))}")
