"""Triton backend of FFA: block-sparse forward and backward kernels over an AttnSlice union.

Work is scheduled per (q tile, head) from a cached block-sparse plan (kernels.block_sparse), so
cost follows the mask area: key tiles outside the union are never visited, tiles fully inside run
without masking, and partial tiles are masked by the OR of the slices touching them (overlapping
q_ranges merge exactly). On sm90 the forward and the backward run Gluon kernels where they suit
(gluon_forward, gluon_backward; the backward's dq by TMA reduce-adds, so deterministic=True
takes the other path), else Triton kernels (forward.py, and backward.py's ordered two-kernel
backward, atomic-free and bitwise repeatable). GQA/MQA, head_dim 64/128/256 (any
power of two from 16 to 256 is accepted; above 128 with smaller tiles), bf16/fp16 with fp32
accumulation, softcap. Signatures follow kernels.reference.
"""
from __future__ import annotations

import functools
import importlib

import torch

from .. import BackendUnavailable
from ..block_sparse import MAX_TABLE_INTERVALS, cuts_off_grid, mask_intervals, plan_for
from ..merge import merge_out_lse
from ..plan import FlexAttnPlan
from .configs import SUPPORTED_HEAD_DIMS, bwd_config, fwd_config, pack_config

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
MAX_HEAD_DIM = 256  # above 128 with smaller tiles (configs.FWD_WIDE / BWD_WIDE)


@functools.lru_cache(maxsize=None)
def is_available() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def unsupported_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str | None:
    """Why the Triton backend cannot run these inputs, or None when it can."""
    if not is_available():
        return "triton backend needs triton and a CUDA device"
    if not (q.is_cuda and k.is_cuda and v.is_cuda):
        return f"triton backend needs CUDA tensors, got q on {q.device}"
    if q.dtype not in SUPPORTED_DTYPES:
        return f"triton backend supports bf16 and fp16, got {q.dtype}"
    return head_dim_reason(q.shape[-1])


def head_dim_reason(head_dim: int) -> str | None:
    """Why the kernels cannot take ``head_dim``, or None: a power of two from 16 to
    MAX_HEAD_DIM (Triton's tiles are powers of two: head_dim 96 failed to compile)."""
    if head_dim < 16 or head_dim > MAX_HEAD_DIM or head_dim & (head_dim - 1):
        return (f"triton backend supports head_dim a power of two from 16 to {MAX_HEAD_DIM} "
                f"(tuned for {SUPPORTED_HEAD_DIMS}), got {head_dim}")
    return None


def check_supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    reason = unsupported_reason(q, k, v)
    if reason is not None:
        raise BackendUnavailable(reason)


def plan_tiles_per_q_tile(plan) -> float:
    """Listed key tiles per q tile of a forward plan (tensor sizes only: no device sync)."""
    return plan.q_tile_kt.numel() / max(plan.num_q_tiles, 1)


def _dense_last(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _gluon_unavailable(module: str, *args) -> str | None:
    """Why a Gluon kernel (``module``'s) does not run here, or None: a Triton without Gluon,
    else the module's own ``unsupported_reason(*args)`` (sm90, dtype, head_dim, ...)."""
    try:
        kernel = importlib.import_module(f".{module}", __name__)
    except ImportError as e:  # a Triton without Gluon
        return f"no Gluon: {e}"
    return kernel.unsupported_reason(*args)


def _gluon_reason(q, k, softcap: float, return_max_logits: bool) -> str | None:
    """Why the Gluon forward does not run here (then the Triton forward does), or None."""
    return _gluon_unavailable("gluon_forward", q, k, softcap, return_max_logits)


def _grid_or_cut_plan(mask: FlexAttnPlan, kernel, device):
    """A Gluon kernel module's tile plan of ``mask``: on the grid, or cut at the slices where
    some slice bound is off the grid and the module's pick_plan takes the cut plan."""
    plan = plan_for(mask, kernel.BLOCK_M, kernel.BLOCK_N, device, MAX_TABLE_INTERVALS)
    if cuts_off_grid(mask, kernel.BLOCK_M, kernel.BLOCK_N):
        plan = kernel.pick_plan(plan, plan_for(mask, kernel.BLOCK_M, kernel.BLOCK_N, device,
                                               MAX_TABLE_INTERVALS, cut_at_slices=True))
    return plan


def _gluon_plan(mask: FlexAttnPlan, device):
    """The Gluon forward's plan (on the grid, or cut at the slices where that costs less:
    gluon_forward.pick_plan), or None where the Triton forward should run this mask (no row
    interval table, or rows too short: gluon_forward.plan_suits)."""
    from . import gluon_forward
    plan = _grid_or_cut_plan(mask, gluon_forward, device)
    return plan if gluon_forward.plan_suits(plan) else None


def _gluon_bwd_reason(q, k, softcap: float, deterministic: bool) -> str | None:
    """Why the Gluon backward does not run here (then the Triton backward does), or None."""
    return _gluon_unavailable("gluon_backward", q, k, softcap, deterministic)


def _gluon_bwd_plan(mask: FlexAttnPlan, device):
    """(plan, KeyTileBits or None) of the Gluon backward, kept in ``mask``, or None where the
    ordered Triton backward should run this mask (short q-tile lists, or partial tiles it cannot
    mask: gluon_backward.plan_suits). Bitmaps where gluon_backward.bits_suit."""
    from . import gluon_backward
    from .gluon_backward import bits_suit, key_tile_bits, plan_suits
    plan = _grid_or_cut_plan(mask, gluon_backward, device)
    if not (plan.cut_at_slices or plan_suits(plan)):  # (pick_plan cuts only where Gluon runs)
        return None
    if not bits_suit(plan):
        return plan, None
    key = ("gluon_bwd_bits", str(torch.device(device)))
    return plan, mask.cached(key, lambda: key_tile_bits(plan, mask_intervals(mask)))


# PackGQA runs instead of the Gluon forward where rows hold more key intervals than this (the
# Gluon kernel masks a partial tile interval by interval): qk_sparse's 5 a row ran 382 TFLOPs/s
# in Gluon and 466 packed; causal_document's 1 ran 396 and 391 (configs.pack_config's numbers)
PACK_OVER_GLUON_INTERVALS = 2


def _pack_config(gluon_plan, group: int, head_dim: int, return_max_logits: bool = False):
    """The PackGQA config where the forward runs it, else None: a group to pack (pack_config),
    no max logits asked, and no Gluon plan that suits (``gluon_plan`` None) or one whose rows
    hold many key intervals."""
    config = None if return_max_logits else pack_config(head_dim, group)
    if config is None or (gluon_plan is not None
                          and gluon_plan.row_lo.shape[1] <= PACK_OVER_GLUON_INTERVALS):
        return None
    return config


def prepare(mask: FlexAttnPlan, head_dim: int, device, group: int = 1) -> None:
    """Build (and keep in ``mask``) the tile plans the forward and backward will use; ``group``
    (q heads per kv head) decides whether the forward's PackGQA plan is one of them."""
    fcfg, bcfg = fwd_config(head_dim), bwd_config(head_dim)
    device = torch.device(device)
    hopper = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9
    # the forward runs the mask itself, or its key parts where rows walk long (key_parts)
    parts = _key_parts(mask)
    for fwd_mask in [part for _, _, part in parts] if parts else [mask]:
        gluon = None
        if hopper:  # where the Gluon kernels run
            gluon = _gluon_plan(fwd_mask, device)
        packed = _pack_config(gluon, group, head_dim)
        if packed is not None:
            fwd_plan(fwd_mask, packed, group, device)
        else:
            plan_for(fwd_mask, fcfg.block_m, fcfg.block_n, device, fcfg.max_table_intervals)
    if hopper:
        _gluon_bwd_plan(mask, device)
    plan_for(mask, bcfg.block_m1, bcfg.block_n1, device, bcfg.max_table_intervals)
    plan_for(mask, bcfg.block_m2, bcfg.block_n2, device, bcfg.max_table_intervals)


def _key_parts(mask: FlexAttnPlan):
    from .key_parts import key_parts
    return mask.cached("triton_key_parts", lambda: key_parts(mask))


def _fwd_by_key_parts(q, k, v, parts, softmax_scale: float, softcap: float):
    """The forward as one call per key part (key_parts: long key walks), merged by lse: the
    partial outputs stay fp32 until the last merge writes q's dtype."""
    out = lse = None
    for i, (k0, k1, part) in enumerate(parts):
        o, l, _ = fwd(q, k[k0:k1], v[k0:k1], part, softmax_scale, softcap)
        if out is None:
            out, lse = o, l
        else:
            out, lse = merge_out_lse(out, lse, o, l,
                                     q.dtype if i + 1 == len(parts) else torch.float32)
    return out, lse, None


def fwd(q, k, v, mask: FlexAttnPlan, softmax_scale: float, softcap: float = 0.0,
        return_max_logits: bool = False, config=None,
        return_lse: bool = True, arrival=None, dynamic: bool = False):
    """(out [Sq, Hq, D], lse [Sq, Hq] fp32, max_logits [Hq] | None); see kernels.reference.fwd
    (lse is written whatever ``return_lse`` says: the kernel keeps it for the backward).
    ``arrival`` (gluon_forward.Arrival): keys still landing, where the Gluon forward runs these
    inputs (``gluon_fwd_plan``; elsewhere a ValueError). ``dynamic``: the Gluon forward's
    persistent programs fetch items from a counter (forwards beside a collective); the other
    forwards run one program a tile and ignore it."""
    from .forward import launch_fwd

    check_supported(q, k, v)
    if config is None and not return_max_logits and arrival is None:
        parts = _key_parts(mask)  # rows walking > key_parts.SPLIT_ABOVE keys
        if parts is not None:
            return _fwd_by_key_parts(q, k, v, parts, softmax_scale, softcap)
    q, k, v = (_dense_last(t) for t in (q, k, v))
    if config is None:  # decided once per mask and kind of input (a lookup per call)
        gluon, plan, config = _cached_fwd_route(mask, q, k, softcap, return_max_logits)
        if gluon:
            from .gluon_forward import launch_fwd as launch_gluon
            return launch_gluon(q, k, v, plan, float(softmax_scale), dynamic=dynamic,
                                arrival=arrival)
    else:
        plan = fwd_plan(mask, config, q.shape[1] // k.shape[1], q.device)
    if arrival is not None:
        raise ValueError("only the Gluon forward waits for arriving keys; these inputs run "
                         "another forward (gluon_fwd_plan says which run it)")
    return launch_fwd(q, k, v, plan, config, float(softmax_scale), float(softcap), return_max_logits)


def gluon_fwd_plan(q, k, mask: FlexAttnPlan, softcap: float = 0.0):
    """The Gluon forward's tile plan where ``fwd`` (no config, no max logits) runs the Gluon
    kernel on inputs like these, else None (key time: the route is cached with the mask)."""
    if _key_parts(mask) is not None:
        return None
    gluon, plan, _ = _cached_fwd_route(mask, q, k, softcap, False)
    return plan if gluon else None


def _cached_fwd_route(mask: FlexAttnPlan, q, k, softcap: float, return_max_logits: bool):
    """_fwd_route, once per mask and kind of input."""
    key = ("triton_fwd_route", q.device, q.dtype, q.shape[-1], q.shape[1] // k.shape[1],
           softcap > 0, return_max_logits, q.shape[0] == 0 or k.shape[0] == 0)
    return mask.cached(key, lambda: _fwd_route(mask, q, k, softcap, return_max_logits))


def fwd_plan(mask: FlexAttnPlan, config, group: int, device):
    """The forward's tile plan for ``config``: PackGQA's q tiles hold block_m // group positions."""
    block_m = config.block_m // group if config.pack_gqa else config.block_m
    return plan_for(mask, block_m, config.block_n, device, config.max_table_intervals)


def _fwd_route(mask: FlexAttnPlan, q, k, softcap: float, return_max_logits: bool):
    """(gluon, plan, config) of the forward without a config: the Gluon kernel where it runs
    these inputs and its plan suits (config None) unless PackGQA beats it (_pack_config); else
    PackGQA where there is a group to pack; else the Triton forward at the default tiles with
    the short-row variant where rows are short (both share the default's plan)."""
    head_dim, group = q.shape[-1], q.shape[1] // max(k.shape[1], 1)
    gluon = None
    if _gluon_reason(q, k, softcap, return_max_logits) is None:
        gluon = _gluon_plan(mask, q.device)
    config = _pack_config(gluon, group, head_dim, return_max_logits)
    if config is not None:
        return False, fwd_plan(mask, config, group, q.device), config
    if gluon is not None:
        return True, gluon, None
    config = fwd_config(q.shape[-1])
    plan = plan_for(mask, config.block_m, config.block_n, q.device, config.max_table_intervals)
    return False, plan, fwd_config(q.shape[-1], plan_tiles_per_q_tile(plan))


def bwd(dout, q, k, v, out, lse, mask: FlexAttnPlan, softmax_scale: float,
        softcap: float = 0.0, deterministic: bool = False, config=None):
    """(dq, dk, dv). Without a config and with deterministic=False, on sm90 the Gluon one-pass
    kernel (dq by TMA reduce-adds, in no fixed order) where its plan suits; else the ordered
    two-kernel Triton backward (bitwise repeatable). ``out``/``lse`` may be global (CP)."""
    from .backward import launch_bwd

    check_supported(q, k, v)
    dout, q, k, v, out = (_dense_last(t) for t in (dout, q, k, v, out))
    lse = lse.float().contiguous()
    if config is None:  # decided once per mask and kind of input (a lookup per call)
        key = ("triton_bwd_route", q.device, q.dtype, q.shape[-1], softcap > 0, deterministic,
               q.shape[0] == 0 or k.shape[0] == 0)
        route = mask.cached(key, lambda: (_gluon_bwd_reason(q, k, softcap, deterministic) is None
                                          and _gluon_bwd_plan(mask, q.device)) or None)
        if route is not None:
            from .gluon_backward import launch_bwd as launch_gluon
            plan, bits = route
            return launch_gluon(dout, q, k, v, out, lse, plan, float(softmax_scale), bits=bits)
    config = config or bwd_config(q.shape[-1])
    plan_kv = plan_for(mask, config.block_m1, config.block_n1, q.device, config.max_table_intervals)
    plan_q = plan_for(mask, config.block_m2, config.block_n2, q.device, config.max_table_intervals)
    return launch_bwd(dout, q, k, v, out, lse, plan_kv, plan_q, config, float(softmax_scale),
                      float(softcap))
