"""flex: torch FlexAttention with a BlockMask built from the mask's AttnSlices (through
``convert.to_mask_mod``). Compiled on CUDA; eager on CPU unless asked (the eager path
materialises the scores: a correctness path, not a measurement). The BlockMask build time is
reported as ``build_ms``, apart from the kernel time."""
from __future__ import annotations

import functools
import time

import torch

from bench.masks import Mask, convert

from ._autograd import autograd_prepared
from .base import Inputs, KernelAdapter, Prepared, Shapes

COMPILE_CHOICES = ("auto", "always", "never")
# Tiles for a second compile when Inductor finds no default FlexAttention config within shared
# memory ("out of resource ... Reducing block sizes or `num_stages` may help"; seen on the H200
# for share_question): smaller forward and backward blocks, no software pipelining.
SMALL_TILES = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64,
               "BLOCK_N2": 32, "num_stages": 1}


def _out_of_shared_memory(error: BaseException) -> bool:
    return "out of resource" in str(error)


# A sweep compiles flex_attention once per (mask, seqlen): each BlockMask and mask_mod table has
# new shapes. Past dynamo's default limit of 8 recompiles it would silently fall back to the eager
# path (which materialises the scores), so the limit is raised for the benchmark process.
RECOMPILE_LIMIT = 1024


@functools.cache
def _compiled_flex():
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention

    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(RECOMPILE_LIMIT, getattr(torch._dynamo.config, name)))
    # The runner times the backward as repeated autograd.grad(retain_graph=True) over one
    # forward graph; compiled backwards with donated buffers refuse that (seen on the H200 with
    # torch 2.11: every flex bwd cell errored), so buffer donation is off for this process.
    import torch._functorch.config
    torch._functorch.config.donated_buffer = False
    return torch.compile(flex_attention, dynamic=False)


def index_block_mask(mask: Mask, shapes: Shapes, device: torch.device, block_size: int,
                     mask_mod):
    """The BlockMask from the mask's exact block-sparse index (slice geometry, never S x S):
    the full and partial key blocks create_block_mask would list, without it. A per-KV-head
    mask's lists repeat for each KV head's group of q heads (create_block_mask at H = 64 q
    heads evaluated H x S x S cells: 128 GiB on an H100 for block_sparse at 16k); a shared
    mask keeps one head. create_block_mask compiled hits Inductor's cold-compile cliff on the
    sparse patterns' mask_mods (torch 2.11, H100: ptxas still running after 100 s on qk_sparse
    at 16k; pytorch/pytorch#182060)."""
    from torch.nn.attention.flex_attention import BlockMask

    index = convert.to_block_sparse(mask, block_size, block_size, padded_full=True)
    repeat = shapes.group if mask.head_slices is not None else 1
    per_q_head = lambda t: t.repeat_interleave(repeat, dim=0)[None].to(device)  # noqa: E731
    return BlockMask.from_kv_blocks(
        per_q_head(index.mask_block_cnt), per_q_head(index.mask_block_idx),
        per_q_head(index.full_block_cnt), per_q_head(index.full_block_idx),
        BLOCK_SIZE=block_size, mask_mod=mask_mod, seq_lengths=(shapes.seqlen, shapes.seqlen))


class Flex(KernelAdapter):
    name = "flex"

    def __init__(self, compile: str = "auto", block_size: int = 128) -> None:
        if compile not in COMPILE_CHOICES:
            raise ValueError(f"flex option compile must be one of {COMPILE_CHOICES}, got {compile!r}")
        if block_size < 1:
            raise ValueError(f"flex option block_size must be >= 1, got {block_size}")
        self.compile = compile
        self.block_size = block_size

    def version(self) -> str:
        return f"torch {torch.__version__} flex_attention"

    def supports(self, mask: Mask, shapes: Shapes, device: torch.device) -> str | None:
        try:
            import torch.nn.attention.flex_attention  # noqa: F401
        except ImportError as e:
            return f"torch.nn.attention.flex_attention not importable: {e}"
        return None

    def _use_compile(self, device: torch.device) -> bool:
        return self.compile == "always" or (self.compile == "auto" and device.type == "cuda")

    def prepare(self, mask: Mask, shapes: Shapes, device: torch.device, inputs: Inputs) -> Prepared:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        compiled = self._use_compile(device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        # block and hash sparsity as a FlexAttention user writes them (a table lookup); the
        # other masks by the row interval tables
        inner = convert.to_pattern_mask_mod(mask, device=device)
        mask_mod_kind = inner.__name__ if inner is not None else "row_intervals"
        inner = inner or convert.to_mask_mod(mask, device=device)
        group = shapes.group
        per_head = mask.head_slices is not None

        def mask_mod(b, h, q_idx, kv_idx):  # h is the query head; per-head masks index KV heads
            return inner(b, h // group if per_head else h, q_idx, kv_idx)

        if per_head or mask_mod_kind != "row_intervals":  # the sparse patterns
            block_mask = index_block_mask(mask, shapes, device, self.block_size, mask_mod)
        else:
            block_mask = create_block_mask(
                mask_mod, B=None, H=None, Q_LEN=shapes.seqlen, KV_LEN=shapes.seqlen,
                device=device, BLOCK_SIZE=self.block_size, _compile=compiled)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        build_ms = (time.perf_counter() - start) * 1e3

        fn = _compiled_flex() if compiled else flex_attention
        scale = shapes.softmax_scale
        options: dict[str, int] = {}  # kernel_options; SMALL_TILES after an out-of-smem compile

        def call(q, k, v):
            return fn(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=group > 1,
                      kernel_options=options or None)

        def attention(q, k, v):
            try:
                return call(q, k, v)
            except Exception as e:
                if options or not _out_of_shared_memory(e):
                    raise
                options.update(SMALL_TILES)  # once; the row's message names them
                prepared.extra["kernel_options"] = " ".join(f"{k}={v}" for k, v in options.items())
                return call(q, k, v)

        prepared = autograd_prepared(attention, inputs, "bhsd", build_ms=build_ms,
                                     extra={"compiled": str(compiled), "mask_mod": mask_mod_kind})
        prepared.fwd()  # compiles (untimed)
        return prepared
