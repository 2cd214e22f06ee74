"""Host-side tensor descriptors (TMA on sm90+) over the [seqlen, heads, head_dim] layout: each
tensor is viewed as 2-D [seqlen, heads * head_dim], and a kernel addresses head h's tile at
column h * head_dim. Rows past seqlen load as zeros and are clipped on stores and reduce-adds."""
from __future__ import annotations

import torch

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # Triton < 3.4: no host-side descriptors
    TensorDescriptor = None


def tma_available() -> bool:
    return TensorDescriptor is not None


def descriptor_2d(t: torch.Tensor, block_rows: int, *, writable: bool = False):
    """Descriptor of [S, H, D] tensor ``t`` as [S, H * D] with [block_rows, D] blocks. A tensor
    whose heads are not packed, or whose base or row stride is not 16-byte aligned (as TMA needs),
    is read through a packed copy; a written one (``writable``) must not need it."""
    if TensorDescriptor is None:
        raise RuntimeError("TMA descriptors need triton.tools.tensor_descriptor (Triton >= 3.4)")
    seqlen, heads, head_dim = t.shape
    if (t.stride(2) != 1 or t.stride(1) != head_dim or t.data_ptr() % 16
            or (t.stride(0) * t.element_size()) % 16):
        if writable:
            raise ValueError("an output written through TMA must be packed and 16-byte aligned")
        t = t.clone(memory_format=torch.contiguous_format)
    flat = t.as_strided((seqlen, heads * head_dim), (t.stride(0), 1))
    return TensorDescriptor(flat, [seqlen, heads * head_dim], [t.stride(0), 1], [block_rows, head_dim])
