"""Every adapter that runs on CPU passes the correctness gate; the others decline with a reason."""
import pytest
import torch

from bench.kernels import KERNEL_NAMES, _gate, load_adapter, make_inputs
from bench.kernels.base import Shapes
from bench.masks import KERNEL_MASK_NAMES, build_mask
from magi_attention.testing import dense_attention
from bench.masks import convert

CPU = torch.device("cpu")
CPU_KERNELS = ("naive", "sdpa_math", "flex", "ffa", "custom")
GPU_ONLY = tuple(k for k in KERNEL_NAMES if k not in CPU_KERNELS)
OPTIONS = {"custom": {"target": "examples.custom_kernel.my_attn:my_attention"}}
SHAPES = Shapes(batch=1, seqlen=96, num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")
DOC_LENS = [40, 24, 32]
MASK_PARAMS = {"sliding_window_causal": {"window": 20}, "block_causal_document": {"block_size": 16}}


def _mask(name):
    return build_mask(name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASK_PARAMS.get(name, {}))


@pytest.mark.parametrize("mask_name", KERNEL_MASK_NAMES)
@pytest.mark.parametrize("kernel", CPU_KERNELS)
def test_cpu_adapter_passes_gate(kernel, mask_name):
    mask = _mask(mask_name)
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    assert adapter.supports(mask, SHAPES, CPU) is None
    inputs = make_inputs(SHAPES, CPU, seed=1)
    prepared = adapter.prepare(mask, SHAPES, CPU, inputs)
    ref = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=SHAPES.seqlen, rows=32, seed=0)
    result = _gate.check_out(prepared, ref, SHAPES.dtype)
    assert result.passed, result.message
    if kernel != "flex":  # FlexAttention has no CPU backward
        grads = _gate.check_grads(prepared, ref, SHAPES.dtype)
        assert grads.passed and "grads" in grads.message, grads.message


@pytest.mark.parametrize("kernel", ["naive", "sdpa_math"])
def test_adapter_matches_dense_oracle_on_per_head_mask(kernel):
    # block_sparse with one mask per KV head: checked against the independent dense oracle
    mask = build_mask("block_sparse", 64, block_q=16, block_k=16, sparsity=0.5, num_heads_kv=2)
    shapes = Shapes(1, 64, 4, 2, 16, "float32")
    inputs = make_inputs(shapes, CPU, seed=2)
    prepared = load_adapter(kernel).prepare(mask, shapes, CPU, inputs)
    out = prepared.out_bshd(prepared.fwd())[0]
    expected, _ = dense_attention(inputs.q[0], inputs.k[0], inputs.v[0], convert.to_dense(mask))
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", GPU_ONLY)
def test_gpu_adapter_declines_cpu_with_reason(kernel):
    reason = load_adapter(kernel).supports(_mask("causal"), SHAPES, CPU)
    assert isinstance(reason, str) and reason


def test_gate_marks_a_kernel_that_ignores_the_mask_wrong():
    mask = _mask("causal_document")
    inputs = make_inputs(SHAPES, CPU, seed=3)
    # the causal (not document) mask: right on the first document, wrong after it
    prepared = load_adapter("naive").prepare(_mask("causal"), SHAPES, CPU, inputs)
    ref = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=0, rows=32, seed=0)
    result = _gate.check_out(prepared, ref, SHAPES.dtype)
    assert not result.passed and "rel_err" in result.message


def test_row_subset_reference_equals_full_reference_rows():
    mask = _mask("sliding_window_causal")
    inputs = make_inputs(SHAPES, CPU, seed=4)
    full = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=SHAPES.seqlen, rows=32, seed=0)
    sub = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=0, rows=32, seed=5)
    assert sub.grads is None and len(sub.rows) == 32 and int(sub.rows.max()) == SHAPES.seqlen - 1
    torch.testing.assert_close(sub.out, full.out[:, sub.rows], atol=1e-6, rtol=1e-6)


def test_unknown_kernel_and_bad_option_are_named():
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        load_adapter("nope")
    with pytest.raises(TypeError):
        load_adapter("naive", window=3)
    with pytest.raises(ValueError, match="compile"):
        load_adapter("flex", compile="sometimes")
    with pytest.raises(ValueError, match="pkg.module:function"):
        load_adapter("custom", target="no_colon")


def test_custom_target_that_does_not_import_is_unsupported_not_fatal():
    adapter = load_adapter("custom", target="no_such_pkg.attn:fn")
    reason = adapter.supports(_mask("causal"), SHAPES, CPU)
    assert "not importable" in reason and "no_such_pkg" in reason
