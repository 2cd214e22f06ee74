"""On a GPU, with the peers installed (tools/device/peers_install.sh): every mask a peer is
meant to run passes the correctness gate against FFA's reference (bf16, GQA 4:1, batch 2, so
packed documents cross batch rows), and declines nothing it should run. A peer whose package is
missing is skipped with the import error. Run: pytest -m gpu tests/bench/kernels -k peer"""
import importlib

import pytest
import torch

from bench.gate import check_prepared, compare, gate_rows, reference, restrict_dout
from bench.kernels import load_adapter, make_inputs
from bench.masks import KERNEL_MASK_NAMES, build_mask
from bench.problem import Shapes

pytestmark = pytest.mark.gpu
SHAPES = Shapes(batch=2, seqlen=512, num_heads_q=8, num_heads_kv=2, head_dim=128, dtype="bfloat16")
DOC_LENS = [200, 100, 62, 150]
MASK_PARAMS = {"sliding_window_causal": {"window": 128}, "block_causal_document": {"block_size": 64}}
FLASH_MASKS = ("full", "causal", "full_document", "causal_document", "sliding_window_causal")
# peer -> (module whose absence skips, masks it must run)
EXPECTED = {
    "cudnn": ("cudnn", FLASH_MASKS),
    "fa2_torch": ("torch", FLASH_MASKS),
    "fa3": (None, FLASH_MASKS),  # flash_attn_interface or fa3_fwd_interface
    "flashinfer": ("flashinfer", KERNEL_MASK_NAMES),
}
# documented X cells: (peer, mask) -> words its reason must contain
DOCUMENTED_X = {("fa3", "sliding_window_causal"): "FLASHATTENTION_DISABLE_LOCAL"}


def _skip_if_missing(kernel: str) -> None:
    module = EXPECTED[kernel][0]
    modules = [module] if module else ["flash_attn_interface", "fa3_fwd_interface"]
    errors = []
    for name in modules:
        try:
            importlib.import_module(name)
            return
        except ImportError as e:
            errors.append(str(e))
    pytest.skip(f"{kernel} not installed: {'; '.join(errors)}")


@pytest.mark.parametrize("mask_name", KERNEL_MASK_NAMES)
@pytest.mark.parametrize("kernel", list(EXPECTED))
def test_gpu_peer_passes_gate_on_its_masks(kernel, mask_name):
    _skip_if_missing(kernel)
    device = torch.device("cuda")
    mask = build_mask(mask_name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASK_PARAMS.get(mask_name, {}))
    adapter = load_adapter(kernel)
    reason = adapter.supports(mask, SHAPES, device)
    if mask_name not in EXPECTED[kernel][1]:
        assert reason, f"{kernel} now claims {mask_name}: add it to EXPECTED"
        pytest.skip(f"{kernel} on {mask_name}: {reason}")
    documented = DOCUMENTED_X.get((kernel, mask_name))
    if reason is not None and documented and documented in reason:
        pytest.skip(f"{kernel} on {mask_name} (documented X): {reason}")
    assert reason is None, f"{kernel} declined {mask_name}: {reason}"
    _assert_passes_gate(adapter, mask, SHAPES, device)


def _assert_passes_gate(adapter, mask, shapes, device):
    """The adapter's output (and gradients, where it has a backward) pass the gate; returns the
    prepared call."""
    inputs = make_inputs(shapes, device, seed=3)
    rows = gate_rows(shapes.seqlen, rows=256, full_max_seqlen=shapes.seqlen, seed=0)
    restrict_dout(inputs, rows)
    ref = reference(mask, shapes, inputs, rows)
    prepared = adapter.prepare(mask, shapes, device, inputs)
    with_grads = getattr(adapter, "supports_direction", lambda d: None)("bwd") is None
    direction = "bwd" if with_grads else "fwd"
    result = check_prepared(prepared, ref, shapes.dtype, with_grads)
    assert result.status(direction) == "ok", f"{result.message(direction)} ({prepared.extra})"
    if with_grads:
        prepared.bwd()  # a second backward (the timed loop's) gives the same gradients
        out = prepared.out_bshd(prepared.fwd())
        again = compare(ref, out, prepared.grads_bshd(), shapes.dtype)
        assert again.status("bwd") == "ok", again.message("bwd")
    return prepared


@pytest.mark.parametrize("block", [64, 128])
def test_gpu_flashinfer_block_sparse_takes_bsr_and_passes_gate(block):
    """The six kernel masks never reach FlashInfer's BSR wrapper (batch 1, whole tiles): a
    block-sparse mask does (block_sparse_sweep's rows failed there on bf16 output once)."""
    _skip_if_missing("flashinfer")
    device = torch.device("cuda")
    shapes = Shapes(batch=1, seqlen=1024, num_heads_q=8, num_heads_kv=2, head_dim=128,
                    dtype="bfloat16")
    mask = build_mask("block_sparse", shapes.seqlen, block_q=block, block_k=block, sparsity=0.25,
                      num_heads_kv=1, seed=0)
    adapter = load_adapter("flashinfer")
    assert adapter.supports(mask, shapes, device) is None
    prepared = _assert_passes_gate(adapter, mask, shapes, device)
    assert prepared.extra["route"] == f"BSR {block}x{block}"


@pytest.mark.parametrize("kernel", list(EXPECTED))
def test_gpu_peer_version_names_the_library(kernel):
    _skip_if_missing(kernel)
    version = load_adapter(kernel).version()
    assert "not installed" not in version and "?" not in version.split()[0], version


@pytest.mark.parametrize("name", ["block_sparse", "var_block_sparse"])
@pytest.mark.parametrize("kernel", ["flex", "ffa"])
def test_gpu_per_head_block_sparse_passes_gate(kernel, name):
    """Per-KV-head block sparsity on the GPU: Flex with its block-table mask_mod and the
    BlockMask from the block-sparse index, FFA as one call per KV head (PackGQA's route)."""
    device = torch.device("cuda")
    shapes = Shapes(batch=1, seqlen=1024, num_heads_q=8, num_heads_kv=2, head_dim=128,
                    dtype="bfloat16")
    params = ({"block_q": 64, "block_k": 64} if name == "block_sparse"
              else {"min_block": 64, "max_block": 256})
    mask = build_mask(name, shapes.seqlen, sparsity=0.25, num_heads_kv=2, seed=0, **params)
    adapter = load_adapter(kernel)
    assert adapter.supports(mask, shapes, device) is None
    prepared = _assert_passes_gate(adapter, mask, shapes, device)
    if kernel == "flex":
        assert prepared.extra["mask_mod"].endswith("_table")
    else:
        assert prepared.extra["calls"].startswith("2 ")


@pytest.mark.parametrize("name,suffix", [("hash_sparse", "_buckets"), ("qk_sparse", "_flags")])
def test_gpu_flex_pattern_mask_mod_passes_gate(name, suffix):
    """hash_sparse and qk_sparse run Flex with the mask_mod written from the pattern (bucket
    lookups, kept-token flags), compiled: the gate against the dense reference."""
    device = torch.device("cuda")
    shapes = Shapes(batch=1, seqlen=1024, num_heads_q=8, num_heads_kv=2, head_dim=128,
                    dtype="bfloat16")
    mask = build_mask(name, shapes.seqlen, seed=0)
    adapter = load_adapter("flex")
    assert adapter.supports(mask, shapes, device) is None
    prepared = _assert_passes_gate(adapter, mask, shapes, device)
    assert prepared.extra["mask_mod"].endswith(suffix), prepared.extra
