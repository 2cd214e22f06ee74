"""Every adapter that runs on CPU passes the correctness gate; the others decline with a reason."""
import pytest
import torch

from bench.gate import check_prepared, gate_rows, reference, restrict_dout
from bench.kernels import KERNEL_NAMES, load_adapter, make_inputs
from bench.masks import KERNEL_MASK_NAMES, build_mask, convert
from bench.problem import Shapes
from magi_attention.testing import dense_attention

CPU = torch.device("cpu")
CPU_KERNELS = ("naive", "sdpa_math", "flex", "ffa", "custom")
GPU_ONLY = tuple(k for k in KERNEL_NAMES if k not in CPU_KERNELS)
OPTIONS = {"custom": {"target": "examples.custom_kernel.my_attn:my_attention"}}
SHAPES = Shapes(batch=1, seqlen=96, num_heads_q=4, num_heads_kv=2, head_dim=16, dtype="float32")
DOC_LENS = [40, 24, 32]
MASK_PARAMS = {"sliding_window_causal": {"window": 20}, "block_causal_document": {"block_size": 16}}


def _mask(name):
    return build_mask(name, SHAPES.seqlen, doc_lens=DOC_LENS, **MASK_PARAMS.get(name, {}))


@pytest.mark.parametrize("full_max_seqlen", [SHAPES.seqlen, 0], ids=["all_rows", "sampled_rows"])
@pytest.mark.parametrize("mask_name", KERNEL_MASK_NAMES)
@pytest.mark.parametrize("kernel", CPU_KERNELS)
def test_cpu_adapter_passes_gate(kernel, mask_name, full_max_seqlen):
    mask = _mask(mask_name)
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    assert adapter.supports(mask, SHAPES, CPU) is None
    inputs = make_inputs(SHAPES, CPU, seed=1)
    rows = gate_rows(SHAPES.seqlen, rows=32, full_max_seqlen=full_max_seqlen, seed=0)
    restrict_dout(inputs, rows)
    prepared = adapter.prepare(mask, SHAPES, CPU, inputs)
    ref = reference(mask, SHAPES, inputs, rows)
    with_grads = kernel != "flex"  # FlexAttention has no CPU backward
    result = check_prepared(prepared, ref, SHAPES.dtype, with_grads)
    assert result.status("fwd") == "ok", result.message("fwd")
    if with_grads:
        assert result.status("bwd") == "ok" and "grads" in result.message("bwd"), result.errors


@pytest.mark.parametrize("kernel", ["naive", "sdpa_math", "ffa", "flex"])
def test_adapter_matches_dense_oracle_on_per_head_mask(kernel):
    # block_sparse with one mask per KV head: checked against the independent dense oracle
    # (ffa: flex_flash_attn_per_kv_head, one plan per KV head, forward and backward)
    mask = build_mask("block_sparse", 64, block_q=16, block_k=16, sparsity=0.5, num_heads_kv=2)
    shapes = Shapes(1, 64, 4, 2, 16, "float32")
    adapter = load_adapter(kernel)
    assert adapter.supports(mask, shapes, CPU) is None
    inputs = make_inputs(shapes, CPU, seed=2)
    prepared = adapter.prepare(mask, shapes, CPU, inputs)
    out = prepared.out_bshd(prepared.fwd())[0]
    q, k, v = (t[0].detach().double().requires_grad_() for t in (inputs.q, inputs.k, inputs.v))
    expected, _ = dense_attention(q, k, v, convert.to_dense(mask))
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    if kernel == "ffa":
        prepared.bwd()
        grads = torch.autograd.grad(expected, (q, k, v), inputs.dout[0].double())
        for got, want in zip(prepared.grads_bshd(), grads):
            torch.testing.assert_close(got[0].double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seqlen", [192, 200])  # 200: short edge blocks (partial to Flex)
@pytest.mark.parametrize("name", ["var_block_sparse", "hash_sparse", "qk_sparse"])
def test_flex_index_block_mask_equals_create_block_mask(seqlen, name):
    """The BlockMask from the block-sparse index (no S x S evaluation) lists the same full and
    partial key blocks per q head as create_block_mask over the mask_mod: per KV head
    (var_block_sparse) and shared (hash_sparse, qk_sparse: one head)."""
    from torch.nn.attention.flex_attention import create_block_mask

    from bench.kernels.flex import index_block_mask
    params = ({"min_block": 16, "max_block": 48, "sparsity": 0.5, "num_heads_kv": 2}
              if name == "var_block_sparse" else {})
    mask = build_mask(name, seqlen, **params)
    per_head = mask.head_slices is not None
    shapes = Shapes(1, seqlen, 6, 2, 16, "float32")
    inner = convert.to_mask_mod(mask)
    mask_mod = lambda b, h, q, k: inner(b, h // shapes.group if per_head else h, q, k)  # noqa: E731
    ours = index_block_mask(mask, shapes, CPU, 32, mask_mod)
    theirs = create_block_mask(mask_mod, B=None, H=6 if per_head else None, Q_LEN=seqlen,
                               KV_LEN=seqlen, device="cpu", BLOCK_SIZE=32)
    for cnt, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices")):
        a_cnt, b_cnt = getattr(ours, cnt), getattr(theirs, cnt)
        assert torch.equal(a_cnt, b_cnt), cnt
        a_idx, b_idx = getattr(ours, idx), getattr(theirs, idx)
        for pos in torch.nonzero(a_cnt >= 0):  # the listed blocks of every (b, h, q block)
            n = int(a_cnt[tuple(pos)])
            assert sorted(a_idx[tuple(pos)][:n].tolist()) == sorted(b_idx[tuple(pos)][:n].tolist())
    assert (ours.kv_num_blocks + ours.full_kv_num_blocks).sum() > 0


def test_ffa_names_per_head_masks_that_do_not_match_the_kv_heads():
    mask = build_mask("block_sparse", 64, block_q=16, block_k=16, sparsity=0.5, num_heads_kv=2)
    reason = load_adapter("ffa").supports(mask, Shapes(1, 64, 4, 4, 16, "float32"), CPU)
    assert "2 per-head masks for 4 KV heads" in reason


@pytest.mark.parametrize("kernel", GPU_ONLY)
def test_gpu_adapter_declines_cpu_with_reason(kernel):
    reason = load_adapter(kernel).supports(_mask("causal"), SHAPES, CPU)
    assert isinstance(reason, str) and reason


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


def test_custom_target_without_the_function_is_an_error_naming_the_module_functions():
    """The module imports, the function name is misspelt: not a missing package, so supports()
    lets the cell run and prepare raises the one-line error the row carries."""
    from bench.sweep import failure_of

    adapter = load_adapter("custom", target="examples.custom_kernel.my_attn:my_atention")
    assert adapter.supports(_mask("causal"), SHAPES, CPU) is None
    with pytest.raises(AttributeError) as error:
        adapter.prepare(_mask("causal"), SHAPES, CPU, None)
    status, message = failure_of(error.value)
    assert status == "error" and message == (
        "AttributeError: custom kernel target 'examples.custom_kernel.my_attn:my_atention': module "
        "'examples.custom_kernel.my_attn' has no 'my_atention'; did you mean "
        "examples.custom_kernel.my_attn:my_attention? its functions: my_attention")


def test_flex_recompiles_with_small_tiles_when_inductor_runs_out_of_shared_memory(monkeypatch):
    """Inductor's 'No valid triton configs ... out of resource' (FlexAttention on share_question,
    H200): the adapter compiles once more with SMALL_TILES, names them in the row's message, and
    computes the same output; any other error still raises."""
    import torch.nn.attention.flex_attention as fa

    from bench.kernels import flex as flex_module

    real = fa.flex_attention
    seen = []

    def smem_limited(q, k, v, kernel_options=None, **kwargs):
        seen.append(kernel_options)
        if kernel_options is None:
            raise RuntimeError("No valid triton configs. OutOfMemoryError: out of resource: "
                               "triton_tem_fused_flex_attention_0 Required: 262144")
        return real(q, k, v, **kwargs)

    mask = _mask("causal_document")
    inputs = make_inputs(SHAPES, CPU, seed=1)
    expected = load_adapter("flex", compile="never").prepare(mask, SHAPES, CPU, inputs).fwd()
    monkeypatch.setattr(fa, "flex_attention", smem_limited)
    prepared = load_adapter("flex", compile="never").prepare(mask, SHAPES, CPU, inputs)
    assert torch.equal(prepared.fwd(), expected)
    assert seen == [None, flex_module.SMALL_TILES, flex_module.SMALL_TILES]
    assert prepared.extra["kernel_options"].startswith("BLOCK_M=64 BLOCK_N=64")

    def broken(q, k, v, kernel_options=None, **kwargs):
        raise RuntimeError("some other failure")

    monkeypatch.setattr(fa, "flex_attention", broken)
    with pytest.raises(RuntimeError, match="some other failure"):
        load_adapter("flex", compile="never").prepare(mask, SHAPES, CPU, inputs)


@pytest.mark.parametrize("kernel", [k for k in CPU_KERNELS if k != "flex"])  # flex: no CPU bwd
def test_set_dout_swaps_the_dout_the_backward_reads(kernel):
    """Gated on a restricted dout, then given the whole one (as the runner times it): the
    gradients equal those of an adapter prepared on the whole dout from the start."""
    mask = _mask("causal_document")
    adapter = load_adapter(kernel, **OPTIONS.get(kernel, {}))
    whole = make_inputs(SHAPES, CPU, seed=1)
    restricted = make_inputs(SHAPES, CPU, seed=1)
    restrict_dout(restricted, gate_rows(SHAPES.seqlen, rows=32, full_max_seqlen=0, seed=0))
    swapped = adapter.prepare(mask, SHAPES, CPU, restricted)
    swapped.bwd()
    before = swapped.grads_bshd()[0].clone()
    swapped.set_dout(whole.dout)
    swapped.bwd()
    direct = adapter.prepare(mask, SHAPES, CPU, whole)
    direct.bwd()
    for got, want in zip(swapped.grads_bshd(), direct.grads_bshd()):
        torch.testing.assert_close(got, want)
    assert not torch.allclose(before, swapped.grads_bshd()[0])  # the swap changed something
