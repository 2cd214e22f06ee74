"""On a GPU: every adapter whose library is installed passes the correctness gate on the six
kernel-level masks (bf16, GQA), or declines with a reason. Run: pytest -m gpu tests/bench/kernels"""
import pytest
import torch

from bench.gate import check_prepared, gate_rows, reference, restrict_dout
from bench.kernels import KERNEL_NAMES, load_adapter, make_inputs
from bench.problem import Shapes
from bench.masks import KERNEL_MASK_NAMES, build_mask

pytestmark = pytest.mark.gpu
SHAPES = Shapes(batch=1, seqlen=1024, num_heads_q=8, num_heads_kv=2, head_dim=128, dtype="bfloat16")
DOC_LENS = [300, 200, 124, 400]
MASK_PARAMS = {"sliding_window_causal": {"window": 256}, "block_causal_document": {"block_size": 128}}
OPTIONS = {"custom": {"target": "examples.custom_kernel.my_attn:my_attention"}}


@pytest.mark.parametrize("full_max_seqlen", [SHAPES.seqlen, 0], ids=["all_rows", "sampled_rows"])
@pytest.mark.parametrize("mask_name", KERNEL_MASK_NAMES)
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_gpu_adapter_passes_gate_or_declines(kernel, mask_name, full_max_seqlen):
    device = torch.device("cuda")
    mask = build_mask(mask_name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASK_PARAMS.get(mask_name, {}))
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    reason = adapter.supports(mask, SHAPES, device)
    if reason is not None:
        pytest.skip(f"{kernel} on {mask_name}: {reason}")
    inputs = make_inputs(SHAPES, device, seed=1)
    rows = gate_rows(SHAPES.seqlen, rows=256, full_max_seqlen=full_max_seqlen, seed=0)
    restrict_dout(inputs, rows)
    ref = reference(mask, SHAPES, inputs, rows)
    prepared = adapter.prepare(mask, SHAPES, device, inputs)
    with_grads = getattr(adapter, "supports_direction", lambda d: None)("bwd") is None
    result = check_prepared(prepared, ref, SHAPES.dtype, with_grads)
    assert not result.failed, result.message("bwd" if with_grads else "fwd")


@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_set_dout_swaps_the_dout_the_backward_reads(kernel):
    """As the runner times a backward: prepared on the gate's restricted dout, then given the
    whole one. The gradients match an adapter prepared on the whole dout (the kernels'
    nondeterminism aside: atomics), and an adapter that cannot swap says so (None)."""
    device = torch.device("cuda")
    mask = build_mask("causal_document", SHAPES.seqlen, doc_lens=DOC_LENS)
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    reason = adapter.supports(mask, SHAPES, device) or \
        getattr(adapter, "supports_direction", lambda d: None)("bwd")
    if reason is not None:
        pytest.skip(f"{kernel}: {reason}")
    whole = make_inputs(SHAPES, device, seed=1)
    restricted = make_inputs(SHAPES, device, seed=1)
    restrict_dout(restricted, gate_rows(SHAPES.seqlen, rows=256, full_max_seqlen=0, seed=0))
    swapped = adapter.prepare(mask, SHAPES, device, restricted)
    if swapped.set_dout is None:
        pytest.skip(f"{kernel}: no set_dout (its rows note the restricted dout)")
    swapped.bwd()
    swapped.set_dout(whole.dout)
    swapped.bwd()
    direct = adapter.prepare(mask, SHAPES, device, whole)
    direct.bwd()
    for got, want in zip(swapped.grads_bshd(), direct.grads_bshd()):
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("mask_name", ["causal", "causal_document"])
@pytest.mark.parametrize("kernel, options", [
    ("ffa", {"sink": True}), ("ffa_fa4", {"sink": True}), ("fa4", {"sink": True}),
    ("naive", {"sink": True}), ("ffa", {"compile": True}), ("ffa_fa4", {"compile": True}),
    ("ffa", {"sink": True, "compile": True})],
    ids=lambda x: x if isinstance(x, str) else "+".join(sorted(x)))
def test_gpu_run_options_pass_the_gate_or_decline(kernel, options, mask_name):
    """sink=true (the gate's reference with the cell's sink logits) and compile=true."""
    from dataclasses import replace
    device = torch.device("cuda")
    shapes = replace(SHAPES, num_sink=1 if options.get("sink") else 0)
    mask = build_mask(mask_name, shapes.seqlen, doc_lens=DOC_LENS)
    adapter = load_adapter(kernel, **options)
    reason = adapter.supports(mask, shapes, device)
    if reason is not None:
        pytest.skip(f"{kernel} {options} on {mask_name}: {reason}")
    inputs = make_inputs(shapes, device, seed=1)
    rows = gate_rows(shapes.seqlen, rows=256, full_max_seqlen=shapes.seqlen, seed=0)
    restrict_dout(inputs, rows)
    ref = reference(mask, shapes, inputs, rows)
    result = check_prepared(adapter.prepare(mask, shapes, device, inputs), ref, shapes.dtype, True)
    assert not result.failed, result.message("bwd")
