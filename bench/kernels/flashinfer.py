"""flashinfer: FlashInfer's BlockSparseAttentionWrapper (BSR block-sparse prefill, forward only)
for the block_sparse family: every kept (block_q x block_k) tile must be wholly kept, one mask
for all heads, batch 1."""
from __future__ import annotations

import importlib.metadata

import torch

from bench.masks import Mask, UnsupportedMask, convert

from ._autograd import half_dtype, needs_cuda
from ._flash import import_error
from .base import Inputs, KernelAdapter, Prepared, Shapes

WORKSPACE_BYTES = 128 * 1024 * 1024  # FlashInfer's documented example size for the float workspace


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


class FlashInfer(KernelAdapter):
    name = "flashinfer"

    def version(self) -> str:
        try:
            return f"flashinfer {importlib.metadata.version('flashinfer-python')}"
        except importlib.metadata.PackageNotFoundError:
            return "flashinfer (not installed)"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        reason = needs_cuda(device) or half_dtype(shapes.dtype) or import_error("flashinfer")
        if reason:
            return reason
        if shapes.batch != 1:
            return f"one BSR matrix per call: batch must be 1, got {shapes.batch}"
        try:
            _bsr(mask, "cpu")
        except UnsupportedMask as e:
            return str(e)
        return None

    def supports_direction(self, direction: str) -> str | None:
        return None if direction == "fwd" else "BlockSparseAttentionWrapper is forward only"

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        import flashinfer

        indptr, indices, block_q, block_k = _bsr(mask, device)
        workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        wrapper = flashinfer.BlockSparseAttentionWrapper(workspace)
        wrapper.plan(indptr, indices, shapes.seqlen, shapes.seqlen, block_q, block_k,
                     shapes.num_heads_q, shapes.num_heads_kv, shapes.head_dim,
                     sm_scale=shapes.softmax_scale, q_data_type=shapes.torch_dtype)
        q, k, v = (t[0].contiguous() for t in (inputs.q, inputs.k, inputs.v))  # [S, H, D]

        def fwd() -> torch.Tensor:
            return wrapper.run(q, k, v)

        def bwd() -> None:
            raise UnsupportedMask("BlockSparseAttentionWrapper is forward only")

        def grads_bshd():
            raise UnsupportedMask("BlockSparseAttentionWrapper is forward only")

        fwd()
        return Prepared(fwd=fwd, bwd=bwd, out_bshd=lambda out: out[None], grads_bshd=grads_bshd,
                        extra={"tiles": f"{block_q}x{block_k}"})
