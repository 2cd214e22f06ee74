"""On a GPU: every adapter whose library is installed passes the correctness gate on the six
kernel-level masks (bf16, GQA), or declines with a reason. Run: pytest -m gpu tests/bench/kernels"""
import pytest
import torch

from bench.kernels import KERNEL_NAMES, _gate, load_adapter, make_inputs
from bench.kernels.base import Shapes
from bench.masks import KERNEL_MASK_NAMES, build_mask

pytestmark = pytest.mark.gpu
SHAPES = Shapes(batch=1, seqlen=1024, num_heads_q=8, num_heads_kv=2, head_dim=128, dtype="bfloat16")
DOC_LENS = [300, 200, 124, 400]
MASK_PARAMS = {"sliding_window_causal": {"window": 256}, "block_causal_document": {"block_size": 128}}
OPTIONS = {"custom": {"target": "examples.custom_kernel.my_attn:my_attention"}}


@pytest.mark.parametrize("mask_name", KERNEL_MASK_NAMES)
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_gpu_adapter_passes_gate_or_declines(kernel, mask_name):
    device = torch.device("cuda")
    mask = build_mask(mask_name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASK_PARAMS.get(mask_name, {}))
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    reason = adapter.supports(mask, SHAPES, device)
    if reason is not None:
        pytest.skip(f"{kernel} on {mask_name}: {reason}")
    inputs = make_inputs(SHAPES, device, seed=1)
    ref = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=SHAPES.seqlen, rows=256, seed=0)
    prepared = adapter.prepare(mask, SHAPES, device, inputs)
    result = _gate.check_out(prepared, ref, SHAPES.dtype)
    assert result.passed, result.message
    if getattr(adapter, "supports_direction", lambda d: None)("bwd") is None:
        grads = _gate.check_grads(prepared, ref, SHAPES.dtype)
        assert grads.passed, grads.message
