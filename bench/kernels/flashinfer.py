"""flashinfer: FlashInfer's prefill kernels, forward only (FlashInfer has no attention backward).

Three routes, the first that fits the mask:

1. ``BatchPrefillWithRaggedKVCacheWrapper`` with ``causal`` / ``window_left``: full, causal and
   causal sliding windows over each batch row, full and causal documents (one ragged request
   per document). ``backend="auto"`` picks FlashInfer's FA3 (sm90a) kernels on Hopper.
2. ``BlockSparseAttentionWrapper`` (BSR): block-sparse masks whose kept tiles are whole
   (block_sparse family), batch 1, one mask for all heads.
3. The ragged wrapper with a ``custom_mask``: any other mask shared by all heads, as a dense
   bitmap of ``batch * seqlen^2`` bits (FlashInfer's FA2 kernels); below 2^31 bits (int32
   mask offsets), i.e. up to 32k at batch 1.

FlashInfer compiles each kernel configuration with nvcc at its first use (minutes); its JIT
cache lives under ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer`` (tools/device/peers_install.sh
sets it to a folder that survives between calls on one machine).
"""
from __future__ import annotations

import importlib.metadata

import torch

from bench.masks import Mask, UnsupportedMask, convert

from ._autograd import half_dtype, needs_cuda
from ._flash import FlashPlan, flash_plan, import_error
from .base import Inputs, KernelAdapter, Prepared, Shapes

WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's documented example size for the float workspace
# FlashInfer indexes the custom mask through an int32 mask_indptr (cumulated qo_len * kv_len,
# computed from the int32 qo/kv indptrs), so batch * seqlen^2 must stay below 2^31: 32k at
# batch 1 (the dense bool mask, built on the GPU before FlashInfer packs it, is then 1 GiB).
CUSTOM_MASK_MAX_CELLS = (1 << 31) - 1
FORWARD_ONLY = "FlashInfer has no attention backward (its prefill and BSR wrappers are inference kernels)"


def _block_size(mask: Mask) -> tuple[int, int]:
    return int(mask.params.get("block_q", 128)), int(mask.params.get("block_k", 128))


def _bsr(mask: Mask, device) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(indptr [MB + 1], indices [nnz], R, C) of the kept tiles; UnsupportedMask on partial tiles."""
    if mask.head_slices is not None:
        raise UnsupportedMask(f"this adapter plans one BSR for all heads; {mask.name} has "
                              f"{mask.num_mask_heads} per-head masks")
    block_q, block_k = _block_size(mask)
    index = convert.to_block_sparse(mask, block_q, block_k, device="cpu")
    if int(index.mask_block_cnt.sum()) > 0:
        raise UnsupportedMask(f"{mask.name} has partly kept {block_q}x{block_k} tiles; BSR "
                              f"keeps whole tiles only")
    counts = index.full_block_cnt[0].long()
    indptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(torch.int32)
    indices = torch.cat([index.full_block_idx[0, i, :c] for i, c in enumerate(counts.tolist())])
    return indptr.to(device), indices.to(torch.int32).to(device), block_q, block_k


def _ragged_plan(mask: Mask, batch: int, device) -> FlashPlan:
    """A plan the ragged wrapper runs natively: documents, or a window with right bound 0
    (causal, causal sliding window) or none at all (full)."""
    plan = flash_plan(mask, batch, device)
    if not plan.varlen and plan.window[1] > 0:
        raise UnsupportedMask(f"FlashInfer has a left window only (window_left); {mask.name} is "
                              f"window {plan.window}")
    if not plan.varlen and plan.window[1] < 0 and plan.window[0] >= 0:
        raise UnsupportedMask(f"window {plan.window} has no right bound but a left one")
    return plan


def _route(mask: Mask, shapes: Shapes) -> str:
    """"ragged", "bsr" or "custom"; UnsupportedMask with every route's reason otherwise."""
    reasons = []
    for route, check in (("ragged", lambda: _ragged_plan(mask, 1, "cpu")),
                         ("bsr", lambda: _bsr_check(mask, shapes)),
                         ("custom", lambda: _custom_check(mask, shapes))):
        try:
            check()
            return route
        except UnsupportedMask as e:
            reasons.append(f"{route}: {e}")
    raise UnsupportedMask("; ".join(reasons))


def _bsr_check(mask: Mask, shapes: Shapes) -> None:
    if shapes.batch != 1:
        raise UnsupportedMask(f"one BSR matrix per call: batch must be 1, got {shapes.batch}")
    _bsr(mask, "cpu")


def _custom_check(mask: Mask, shapes: Shapes) -> None:
    if mask.head_slices is not None:
        raise UnsupportedMask(f"one custom mask for all heads; {mask.name} has "
                              f"{mask.num_mask_heads} per-head masks")
    cells = shapes.batch * shapes.seqlen ** 2
    if cells > CUSTOM_MASK_MAX_CELLS:
        raise UnsupportedMask(f"the custom mask is a dense bitmap of batch * seqlen^2 = {cells} "
                              f"cells; FlashInfer's int32 mask_indptr holds at most "
                              f"{CUSTOM_MASK_MAX_CELLS}")


class FlashInfer(KernelAdapter):
    name = "flashinfer"

    def __init__(self, backend: str = "auto") -> None:
        self.backend = backend  # of the ragged wrapper: "auto" | "fa2" | "fa3"

    def version(self) -> str:
        try:
            return f"flashinfer-python {importlib.metadata.version('flashinfer-python')}"
        except importlib.metadata.PackageNotFoundError:
            return "flashinfer-python (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or import_error("flashinfer")
        if reason:
            return reason
        try:
            _route(mask, shapes)
        except UnsupportedMask as e:
            return str(e)
        return None

    def supports_direction(self, direction: str) -> str | None:
        return None if direction == "fwd" else FORWARD_ONLY

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        import flashinfer

        route = _route(mask, shapes)
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        flat = lambda t: t.detach().reshape(-1, *t.shape[2:]).contiguous()  # [B * S, H, D]
        q, k, v = (flat(t) for t in (inputs.q, inputs.k, inputs.v))
        if route == "bsr":
            indptr, indices, block_q, block_k = _bsr(mask, device)
            wrapper = flashinfer.BlockSparseAttentionWrapper(workspace)
            wrapper.plan(indptr, indices, shapes.seqlen, shapes.seqlen, block_q, block_k,
                         shapes.num_heads_q, shapes.num_heads_kv, shapes.head_dim,
                         sm_scale=shapes.softmax_scale, q_data_type=shapes.torch_dtype,
                         # BSR's plan defaults the output to float16 whatever q is
                         o_data_type=shapes.torch_dtype)
            extra = {"route": f"BSR {block_q}x{block_k}"}
        else:
            wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD",
                                                                      backend=self.backend)
            kwargs = self._ragged_kwargs(route, mask, shapes, device)
            wrapper.plan(num_qo_heads=shapes.num_heads_q, num_kv_heads=shapes.num_heads_kv,
                         head_dim_qk=shapes.head_dim, sm_scale=shapes.softmax_scale,
                         q_data_type=shapes.torch_dtype, **kwargs)
            # the backend "auto" resolved to, for the row's message (read only)
            extra = {"route": f"ragged prefill {route}",
                     "backend": str(getattr(wrapper, "_backend", self.backend))}
        out = torch.empty_like(q)

        def fwd() -> torch.Tensor:
            return wrapper.run(q, k, v, out=out)

        def no_backward():
            raise NotImplementedError(FORWARD_ONLY)

        fwd()
        return Prepared(fwd=fwd, bwd=no_backward, grads_bshd=no_backward,
                        out_bshd=lambda o: o.view(shapes.batch, shapes.seqlen, *o.shape[1:]),
                        extra=extra)

    @staticmethod
    def _ragged_kwargs(route: str, mask: Mask, shapes: Shapes, device) -> dict:
        """plan() arguments: indptrs in tokens of the packed [batch * seqlen] rows, and the mask."""
        if route == "custom":
            rows = torch.arange(0, shapes.batch + 1, dtype=torch.int32, device=device) * shapes.seqlen
            dense = convert.to_dense(mask, device=device).flatten()
            dense = dense if shapes.batch == 1 else dense.repeat(shapes.batch)
            return dict(qo_indptr=rows, kv_indptr=rows, custom_mask=dense)
        plan = _ragged_plan(mask, shapes.batch, device)
        if plan.varlen:
            return dict(qo_indptr=plan.cu_seqlens, kv_indptr=plan.cu_seqlens, causal=plan.causal)
        rows = torch.arange(0, shapes.batch + 1, dtype=torch.int32, device=device) * shapes.seqlen
        left, right = plan.window
        return dict(qo_indptr=rows, kv_indptr=rows, causal=right == 0, window_left=left)
