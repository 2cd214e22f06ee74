"""CPU checks of the peer adapters' mask plans (cudnn, fa2_torch, fa3, flashinfer): the pieces
that decide what the kernel is told, tested against the masks' dense definitions."""
import pytest
import torch

from bench.kernels import load_adapter
from bench.kernels import cudnn as cudnn_adapter
from bench.kernels import flashinfer as flashinfer_adapter
from bench.kernels._flash import flash_plan
from bench.kernels.base import Shapes
from bench.masks import KERNEL_MASK_NAMES, UnsupportedMask, build_mask, convert

SEQLEN = 96
DOC_LENS = [40, 24, 32]
MASK_PARAMS = {"sliding_window_causal": {"window": 20}, "block_causal_document": {"block_size": 16}}
SHAPES = Shapes(batch=1, seqlen=SEQLEN, num_heads_q=4, num_heads_kv=2, head_dim=16,
                dtype="bfloat16")
PEERS = ("cudnn", "cudnn_sdpa", "fa2_torch", "fa3", "flashinfer", "cudnn_te", "flashmask")


def _mask(name, seqlen=SEQLEN, **params):
    return build_mask(name, seqlen, doc_lens=DOC_LENS, **{**MASK_PARAMS.get(name, {}), **params})


def _cudnn_band(kwargs: dict, seqlen: int) -> torch.Tensor:
    """cuDNN's documented band (frontend test reference, TOP_LEFT alignment): a key is masked
    when k - q > right_bound (use_causal_mask: right_bound 0) or q - k >= left_bound."""
    q = torch.arange(seqlen)[:, None]
    k = torch.arange(seqlen)[None, :]
    keep = torch.ones(seqlen, seqlen, dtype=torch.bool)
    right = 0 if kwargs.get("use_causal_mask") else kwargs.get("diagonal_band_right_bound")
    if right is not None:
        keep &= k - q <= right
    left = kwargs.get("diagonal_band_left_bound")
    if left is not None:
        keep &= q - k < left
    return keep


@pytest.mark.parametrize("name,params", [("full", {}), ("causal", {}),
                                         ("sliding_window_causal", {"window": 20}),
                                         ("sliding_window_causal", {"window": 0}),
                                         ("sliding_window", {"window": 7})])
def test_cudnn_band_bounds_keep_exactly_the_mask(name, params):
    mask = _mask(name, **params)
    plan = flash_plan(mask, 1, "cpu")
    kwargs = cudnn_adapter._mask_kwargs(None, plan, None, None, {})
    assert torch.equal(_cudnn_band(kwargs, SEQLEN), convert.to_dense(mask))


def test_cudnn_packed_layout_is_one_entry_per_document():
    mask = _mask("causal_document")
    plan = flash_plan(mask, 2, "cpu")
    layout = cudnn_adapter._layout(plan, Shapes(2, SEQLEN, 4, 2, 16, "bfloat16"), torch.device("cpu"))
    assert layout.batch == 2 * len(DOC_LENS) and layout.seqlen == max(DOC_LENS)
    assert layout.cu.dtype == torch.int64 and int(layout.cu[-1]) == 2 * SEQLEN
    assert layout.rows % cudnn_adapter.ROW_ALIGN == 0 and layout.rows >= 2 * SEQLEN
    # q: [tokens, heads, d] rows; a document starts at cu * heads * d elements
    assert layout.strides(4, 16) == [max(DOC_LENS) * 64, 16, 64, 1]


@pytest.mark.parametrize("name", KERNEL_MASK_NAMES)
def test_flashinfer_route_per_kernel_mask(name):
    route = flashinfer_adapter._route(_mask(name), SHAPES)
    assert route == ("custom" if name == "block_causal_document" else "ragged")


def test_flashinfer_window_and_custom_mask_limits():
    kwargs = flashinfer_adapter.FlashInfer._ragged_kwargs("ragged", _mask("sliding_window_causal"),
                                                          SHAPES, "cpu")
    assert kwargs["causal"] and kwargs["window_left"] == 20
    assert kwargs["qo_indptr"].tolist() == [0, SEQLEN]
    docs = flashinfer_adapter.FlashInfer._ragged_kwargs("ragged", _mask("full_document"), SHAPES, "cpu")
    assert not docs["causal"] and docs["qo_indptr"].tolist() == [0, 40, 64, 96]
    with pytest.raises(UnsupportedMask, match="left window only"):
        flashinfer_adapter._ragged_plan(_mask("sliding_window", window=5), 1, "cpu")
    # FlashInfer's mask offsets are int32: 32k x 32k fits, 64k x 64k does not
    shapes = lambda seqlen: Shapes(1, seqlen, 4, 2, 16, "bfloat16")
    flashinfer_adapter._custom_check(_mask("causal"), shapes(32768))
    with pytest.raises(UnsupportedMask, match="int32 mask_indptr"):
        flashinfer_adapter._custom_check(_mask("causal"), shapes(65536))


def test_flashinfer_custom_mask_is_the_dense_mask():
    mask = _mask("block_causal_document")
    kwargs = flashinfer_adapter.FlashInfer._ragged_kwargs("custom", mask, SHAPES, "cpu")
    assert torch.equal(kwargs["custom_mask"].view(SEQLEN, SEQLEN), convert.to_dense(mask))


@pytest.mark.parametrize("kernel", PEERS)
def test_peer_declines_cpu_and_names_its_version(kernel):
    adapter = load_adapter(kernel)
    assert isinstance(adapter.supports(_mask("causal"), SHAPES, torch.device("cpu")), str)
    assert isinstance(adapter.version(), str) and adapter.version()


def test_forward_only_peers_say_why_there_is_no_backward():
    assert "no attention backward" in load_adapter("flashinfer").supports_direction("bwd")
    assert load_adapter("flashinfer").supports_direction("fwd") is None


def test_fa3_reads_the_forward_wheels_build_flags(monkeypatch):
    import sys
    import types
    flags = {"FLASHATTENTION_DISABLE_BACKWARD": True, "FLASHATTENTION_DISABLE_LOCAL": True}
    monkeypatch.setitem(sys.modules, "flash_attn_interface", None)  # import raises ImportError
    monkeypatch.setitem(sys.modules, "fa3_fwd_interface", types.ModuleType("fa3_fwd_interface"))
    config = types.ModuleType("fa3_fwd_config")
    config.CONFIG = {"build_flags": flags}
    monkeypatch.setitem(sys.modules, "fa3_fwd_config", config)
    adapter = load_adapter("fa3")
    assert "FLASHATTENTION_DISABLE_BACKWARD" in adapter.supports_direction("bwd")
    assert adapter.supports_direction("fwd") is None
    flags["FLASHATTENTION_DISABLE_BACKWARD"] = False
    assert adapter.supports_direction("bwd") is None
