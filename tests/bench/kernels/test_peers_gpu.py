"""On a GPU, with the peers installed (scripts/device/peers_install.sh): every mask a peer is
meant to run passes the correctness gate against FFA's reference (bf16, GQA 4:1, batch 2, so
packed documents cross batch rows), and declines nothing it should run. A peer whose package is
missing is skipped with the import error. Run: pytest -m gpu tests/bench/kernels -k peer"""
import importlib

import pytest
import torch

from bench.kernels import _gate, load_adapter, make_inputs
from bench.kernels.base import Shapes
from bench.masks import KERNEL_MASK_NAMES, build_mask

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
    inputs = make_inputs(SHAPES, device, seed=3)
    ref = _gate.reference(mask, SHAPES, inputs, full_max_seqlen=SHAPES.seqlen, rows=256, seed=0)
    prepared = adapter.prepare(mask, SHAPES, device, inputs)
    result = _gate.check_out(prepared, ref, SHAPES.dtype)
    assert result.passed, f"{result.message} ({prepared.extra})"
    if getattr(adapter, "supports_direction", lambda d: None)("bwd") is None:
        grads = _gate.check_grads(prepared, ref, SHAPES.dtype)
        assert grads.passed, f"{grads.message} ({prepared.extra})"
        prepared.bwd()  # a second backward (the timed loop's) gives the same gradients
        again = _gate.check_grads(prepared, ref, SHAPES.dtype)
        assert again.passed, again.message


@pytest.mark.parametrize("kernel", list(EXPECTED))
def test_gpu_peer_version_names_the_library(kernel):
    _skip_if_missing(kernel)
    version = load_adapter(kernel).version()
    assert "not installed" not in version and "?" not in version.split()[0], version
