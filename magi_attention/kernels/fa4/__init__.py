"""FFA on FlashAttention-4 (pip ``flash-attn-4``, module ``flash_attn.cute``), Hopper (SM90).

The AttnSlice mask becomes FA4's block-sparse description (per query tile: key tiles fully
inside the mask, key tiles that need a mask; the transpose for the backward), and the partial
tiles are masked by a mask_mod that reads one bit per cell (``_convert``, ``_mask_mod``). FA4's
own forward and backward kernels do the rest. Conversions are cached per mask.

Masks FA4 expresses itself (a staircase of q/key segments x a causal/local/full window: full,
causal, causal_document, full_document, sliding windows, a CP rank's part of a document mask;
``_native``) run on FA4's dense or varlen kernels with their arithmetic masks instead, which are
cheaper than bitmap lookups on the diagonal tiles (measured on H200: sliding_window_causal 64k
fwd 542 vs 360 TFLOPs/s). A mask with no single native form whose rows split into a few blocks
each native on its own key span (a CP rank's two runs of causal: the later run sees the earlier
run's keys on another diagonal) runs one native call per block, the dK/dV of shared keys added
(``_native.native_groups``).
``fwd(..., native=False)`` / ``bwd(..., native=False)`` force the block-sparse path (tests,
benchmarks).

Semantics match the other backends: q [seqlen_q, num_heads_q, head_dim], k/v [seqlen_k,
num_heads_kv, head_dim]; overlapping q_ranges count each cell once; rows with no key get out 0,
lse -inf and zero gradients; ``bwd`` accepts a global (merged) out and lse.

Attention sinks do not come through here: ``flex_flash_attn_func`` applies them to this
backend's (out, lse) as to every backend's (``functional._sink``). FA4's own
``learnable_sink`` would save that one elementwise pass over out, but not simply: a sink must be
counted once per row, so the CP runtime, which merges several calls' partials by lse, can only
add it after the merge; the paths of this backend that run no FA4 kernel (an empty mask, the
deterministic block-sparse backward on Triton) would each need their own; and a sink would be
another compiled variant of every FA4 kernel this backend runs. The post-processing is exact on
every path and costs O(S H D) beside the kernel's O(S^2 H D).

Not supported here (BackendUnavailable / NotImplementedError): fp32 inputs, head_dim not a
multiple of 8 or above 128 other than 256 (``tile_shape``), GPUs other than SM90,
``return_max_logits``. ``deterministic=True`` on a
mask that needs the block-sparse path runs the backward on the Triton backend (FA4 has no
deterministic block-sparse backward on SM90).
"""
from __future__ import annotations

import importlib
import math
from functools import lru_cache

import torch

from .. import BackendUnavailable
from ..plan import FlexAttnPlan
from ..block_sparse import plan_for
from ._convert import Fa4BlockSparse, fa4_block_sparse, path_cost_terms
from ._native import NativeForm, NativeGroup

__all__ = ["INSTALL_HINT", "bwd", "check_supported", "fwd", "is_available", "prepare",
           "tile_shape", "unsupported_reason"]

INSTALL_HINT = ("pip install flash-attn-4 'nvidia-cutlass-dsl[cu13]' (or the cu12 flavour "
                "matching your CUDA); see docs/slurm.md for offline installs")
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
# FA4's SM90 kernels take 8 <= head_dim <= 256 in steps of 8 (4.0.0b36,
# interface._validate_head_dims), but the block-sparse path needs one plan whose tiles both
# directions read (tile_shape): head_dim <= 128, and 256.
MAX_HEAD_DIM = 256
HEAD_DIM_MULTIPLE = 8
# head_dim 256 on SM90, as FA4 4.0.0b36 tiles it with block sparsity: the backward's
# _tile_size_bwd_sm90 keeps 64 x 64 tiles ("Block sparsity derives its KV block size from
# n_block_size; keep it at 64"), reading 128-row sparse blocks as two 64-row tiles
# (q_subtile_factor 2); the forward's 128 x 80 tile shrinks to the sparse block's 64 keys
# (_fit_sm90_fwd_tile_to_block_sparsity). Between 128 and 256 the backward's key tile is 96
# (head_dim <= 192) or its 64 x 64 config is unproven for head_dims not a multiple of 64: refused.
WIDE_HEAD_DIM = 256
WIDE_TILE = (128, 64)


def _import_error() -> str | None:
    try:
        importlib.import_module("flash_attn.cute.interface")
    except ImportError as e:  # the package, cutlass-dsl or one of their dependencies
        return f"{type(e).__name__}: {e}"
    return None


@lru_cache(maxsize=None)
def _cached_import_error() -> str | None:
    return _import_error()


def is_available() -> bool:
    """flash_attn.cute imports and a CUDA GPU of compute capability 9.x is present."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        return False
    return _cached_import_error() is None


def tile_shape(head_dim: int) -> tuple[int, int]:
    """(block_m, block_n) of the block-sparse plan: FA4's SM90 tiles for this head_dim.

    The forward runs 128 x 128 tiles for head_dim <= 128 (``_tile_size_fwd_sm90`` with a 128-row
    sparse block); the backward runs 64- or 128-row x 128-key tiles and reads the same 128 x 128
    lists (q_subtile_factor 2 or 1). At head_dim 256 both read 128 x 64 lists (WIDE_TILE).
    """
    if head_dim == WIDE_HEAD_DIM:
        return WIDE_TILE
    if head_dim > 128:
        raise BackendUnavailable(f"fa4 backend supports head_dim <= 128 or {WIDE_HEAD_DIM} (one "
                                 f"block-sparse plan for FA4's forward and backward tiles), got "
                                 f"{head_dim}")
    return 128, 128


# Backend "auto" runs the Triton backend instead where FA4 would run a mask through its bitmaps
# with more than this share of its tile pairs partial (every cell of a partial tile reads two
# tables in the mask_mod). One H100, GQA 64:8, d128, 16k, this backend / the Triton one, fwd |
# bwd (partial share at 128 x 128):
# global_sliding_window (10%) 1.04 | 1.03, qk_sparse (12%) 1.09 | 0.97, share_question (28%)
# 0.81 | 0.81, var_block_sparse (47%) 0.54 | 0.60, block_sparse and hash_sparse (99.5%)
# 0.18-0.22. Masks FA4 runs natively (the six kernel masks) keep FA4 (1.1-1.2x Triton).
MAX_PARTIAL_FOR_AUTO = 0.2


def mask_reason(mask: FlexAttnPlan, head_dim: int) -> str | None:
    """Why "auto" should not run this mask on FA4 (many partial tiles: MAX_PARTIAL_FOR_AUTO),
    or None. Plans at FA4's tiles once (kept in ``mask``): call it at plan time."""
    block_m, block_n = tile_shape(head_dim)
    _, native, partial = path_cost_terms(mask, block_m, block_n)
    if native or partial == 0:
        return None
    pairs = plan_for(mask, block_m, block_n).num_tile_pairs
    if partial <= MAX_PARTIAL_FOR_AUTO * pairs:
        return None
    return (f"fa4 would mask {partial} of the mask's {pairs} tile pairs cell by cell "
            f"(more than {MAX_PARTIAL_FOR_AUTO:.0%} partial)")


def unsupported_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str | None:
    """Why the fa4 backend cannot run these inputs, or None when it can."""
    try:
        check_supported(q, k, v)
    except BackendUnavailable as e:
        return str(e)
    return None


def check_supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise BackendUnavailable naming what is missing: the package, the GPU, dtype or head_dim."""
    error = _cached_import_error()
    if error is not None:
        raise BackendUnavailable(f"backend 'fa4' needs flash-attn-4, which cannot be imported "
                                 f"({error}); install it with: {INSTALL_HINT}")
    if q.device.type != "cuda":
        raise BackendUnavailable(f"backend 'fa4' runs on CUDA tensors, got device {q.device}")
    major, minor = torch.cuda.get_device_capability(q.device)
    if major != 9:
        raise BackendUnavailable(f"backend 'fa4' supports SM90 (Hopper) GPUs, got sm_{major}{minor}")
    if q.dtype not in SUPPORTED_DTYPES:
        raise BackendUnavailable(f"backend 'fa4' takes bf16 or fp16, got {q.dtype}")
    head_dim = q.shape[-1]
    if head_dim % HEAD_DIM_MULTIPLE or head_dim < HEAD_DIM_MULTIPLE:
        raise BackendUnavailable(f"backend 'fa4' needs head_dim a multiple of {HEAD_DIM_MULTIPLE}, "
                                 f"got {head_dim}")
    tile_shape(head_dim)


@lru_cache(maxsize=None)  # the imports cost microseconds on every call otherwise
def _fa4():
    from flash_attn.cute import interface
    from flash_attn.cute.block_sparsity import BlockSparseTensorsTorch

    from ._mask_mod import tile_bitmap_mask_mod
    return interface, BlockSparseTensorsTorch, tile_bitmap_mask_mod


def _conversion(mask: FlexAttnPlan, head_dim: int, device) -> Fa4BlockSparse:
    block_m, block_n = tile_shape(head_dim)
    return fa4_block_sparse(mask, block_m, block_n, device)


def prepare(mask: FlexAttnPlan, head_dim: int, device, group: int = 1) -> None:
    """Build (and keep in ``mask``) the conversion and FA4 arguments both directions use
    (``group``, the q heads per kv head, changes nothing: FA4 packs GQA inside its kernel)."""
    conv = _conversion(mask, head_dim, device)
    if conv.area and conv.native is None:
        if conv.groups is not None:  # the path calls take; block-sparse only when forced
            _group_args(mask, conv, device)
            return
        _kernel_args(mask, conv, device, native=False, backward=False)
        _kernel_args(mask, conv, device, native=False, backward=True)


def _kernel_args(mask: FlexAttnPlan, conv: Fa4BlockSparse, device, native: bool, backward: bool
                 ) -> tuple[NativeForm | None, dict]:
    """(native form or None, FA4 keyword arguments for the mask), built once per plan."""
    form = conv.native if native else None
    key = ("fa4_args", conv.block_m, conv.block_n, str(device), form is not None,
           backward and form is None)
    return mask.cached(key, lambda: (form, _native_args(form, device) if form is not None
                                     else _mask_args(conv, backward)))


def _mask_args(conv: Fa4BlockSparse, backward: bool):
    _, sparse_cls, mask_mod_for = _fa4()
    prefix = "bwd" if backward else "fwd"
    tensors = sparse_cls(
        mask_block_cnt=getattr(conv, f"{prefix}_mask_cnt"),
        mask_block_idx=getattr(conv, f"{prefix}_mask_idx"),
        full_block_cnt=getattr(conv, f"{prefix}_full_cnt"),
        full_block_idx=getattr(conv, f"{prefix}_full_idx"),
        block_size=(conv.block_m, conv.block_n),
    )
    return dict(mask_mod=mask_mod_for(conv.block_m, conv.block_n),
                aux_tensors=[conv.tile_map, conv.tile_bits], block_sparse_tensors=tensors)


def _group_args(mask: FlexAttnPlan, conv: Fa4BlockSparse, device) -> list[tuple[NativeGroup, dict]]:
    """(group, FA4 keyword arguments) of each native group, built once per plan."""
    key = ("fa4_group_args", conv.block_m, conv.block_n, str(device))
    return mask.cached(key, lambda: [(g, _native_args(g.form, device)) for g in conv.groups])


def _uses_groups(conv: Fa4BlockSparse, native: bool) -> bool:
    return native and conv.native is None and conv.groups is not None


def _native_args(form: NativeForm, device) -> dict:
    args = dict(window_size_left=form.window_left, window_size_right=form.window_right)
    if form.varlen:
        cu = lambda b: torch.tensor(b, dtype=torch.int32, device=device)  # noqa: E731
        args.update(cu_seqlens_q=cu(form.cu_seqlens_q), cu_seqlens_k=cu(form.cu_seqlens_k),
                    max_seqlen_q=form.max_seqlen_q, max_seqlen_k=form.max_seqlen_k)
    return args


def _batched(t, form):  # varlen FA4 takes [total, H, D]; dense takes [batch, S, H, D]
    return t if form is not None and form.varlen else t.unsqueeze(0)


def _unbatched(t, form):  # FA4's outputs follow its inputs: back to [S, ...]
    return t if form is not None and form.varlen else t[0]


def fwd(q, k, v, mask: FlexAttnPlan, softmax_scale: float, softcap: float = 0.0,
        return_max_logits: bool = False, native: bool = True, return_lse: bool = True):
    """(out [Sq, Hq, D] q.dtype, lse [Sq, Hq] fp32 natural log (a transposed view of FA4's
    [Hq, Sq]), None). ``native=False`` runs the block-sparse kernels even where FA4's
    dense/varlen ones express the mask. ``return_lse=False`` (inference) runs FA4's kernel
    variant that writes no lse, and returns lse None."""
    if return_max_logits:
        raise NotImplementedError("return_max_logits on the fa4 backend (FA4 does not expose the "
                                  "row maxima); use backend='triton' or 'reference'")
    conv = _conversion(mask, q.shape[-1], q.device)
    if conv.area == 0:
        return (torch.zeros_like(q),
                torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device), None)
    interface, _, _ = _fa4()
    if _uses_groups(conv, native):
        return _fwd_groups(interface, q, k, v, mask, conv, softmax_scale, softcap, return_lse)
    form, args = _kernel_args(mask, conv, q.device, native, backward=False)
    out, lse, *_ = interface._flash_attn_fwd(
        _batched(q, form), _batched(k, form), _batched(v, form), softmax_scale=softmax_scale,
        softcap=softcap, return_lse=return_lse, **args)
    out = _unbatched(out, form)
    if lse is None:
        return out, None, None
    # FA4: out [1, Sq, Hq, D] / [Sq, Hq, D], lse [1, Hq, Sq] / [Hq, Sq] (natural log, -inf on
    # rows with no key)
    # a transposed view, no copy: the backward transposes it back for FA4 for free
    return out, _unbatched(lse, form).transpose(0, 1), None


def bwd(dout, q, k, v, out, lse, mask: FlexAttnPlan, softmax_scale: float,
        softcap: float = 0.0, deterministic: bool = False, native: bool = True):
    """(dq, dk, dv) in the input dtypes; ``out``/``lse`` may be the global merged ones (CP)."""
    conv = _conversion(mask, q.shape[-1], q.device)
    if conv.area == 0:
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    interface, _, _ = _fa4()
    if _uses_groups(conv, native):
        return _bwd_groups(interface, dout, q, k, v, out, lse, mask, conv, softmax_scale, softcap,
                           deterministic)
    if (conv.native is None or not native) and deterministic:
        # FA4's SM90 block-sparse backward has no deterministic mode (4.0.0b36 asserts
        # "Deterministic not implemented for block-sparse backward"); the Triton backend's
        # deterministic backward uses no atomics and has the same semantics (global out/lse
        # included).
        from .. import triton as triton_backend
        return triton_backend.bwd(dout, q, k, v, out, lse, mask, softmax_scale, softcap,
                                  deterministic=True)
    form, args = _kernel_args(mask, conv, q.device, native, backward=True)
    # FA4 wants out and dout in q's dtype (a merged CP out arrives in fp32), lse [(1,) Hq, Sq]
    lse_fa4 = lse.float().transpose(0, 1).contiguous()
    b = lambda t: _batched(t, form)  # noqa: E731
    dq, dk, dv = interface._flash_attn_bwd(
        b(q), b(k), b(v), b(out.to(q.dtype)), b(dout.to(q.dtype)), b(lse_fa4),
        softmax_scale=softmax_scale, softcap=softcap, deterministic=deterministic, **args)
    return _unbatched(dq, form), _unbatched(dk, form), _unbatched(dv, form)


def _fwd_groups(interface, q, k, v, mask, conv, softmax_scale, softcap, return_lse):
    """One native FA4 call per row group, each writing its rows of ``out`` in place; the lse of
    the groups (FA4: [Hq, rows]) concatenated along the rows."""
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # packed, whatever q's strides
    lses = []
    for g, args in _group_args(mask, conv, q.device):
        rows, keys = slice(g.q_start, g.q_end), slice(g.k_start, g.k_end)
        b = lambda t: _batched(t, g.form)  # noqa: E731
        _, lse, *_ = interface._flash_attn_fwd(
            b(q[rows]), b(k[keys]), b(v[keys]), softmax_scale=softmax_scale, softcap=softcap,
            return_lse=return_lse, out=b(out[rows]), **args)
        if lse is not None:
            lses.append(_unbatched(lse, g.form))
    if not return_lse:
        return out, None, None
    return out, torch.cat(lses, dim=1).transpose(0, 1), None


def _bwd_groups(interface, dout, q, k, v, out, lse, mask, conv, softmax_scale, softcap,
                deterministic):
    """One native FA4 backward per row group: dQ rows written in place, each group's dK/dV on
    its key span added (groups of a rank's two causal runs share keys), in group order."""
    out, dout = out.to(q.dtype), dout.to(q.dtype)
    lse_fa4 = lse.float().transpose(0, 1)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk, dv = (torch.zeros(t.shape, dtype=t.dtype, device=t.device) for t in (k, v))
    for g, args in _group_args(mask, conv, q.device):
        rows, keys = slice(g.q_start, g.q_end), slice(g.k_start, g.k_end)
        b = lambda t: _batched(t, g.form)  # noqa: E731
        _, dk_g, dv_g = interface._flash_attn_bwd(
            b(q[rows]), b(k[keys]), b(v[keys]), b(out[rows]), b(dout[rows]),
            b(lse_fa4[:, rows].contiguous()), softmax_scale=softmax_scale, softcap=softcap,
            deterministic=deterministic, dq=b(dq[rows]), **args)
        dk[keys] += _unbatched(dk_g, g.form)
        dv[keys] += _unbatched(dv_g, g.form)
    return dq, dk, dv
