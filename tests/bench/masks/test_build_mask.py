"""build_mask rejects bad requests with a ValueError naming the problem."""
import pytest
import torch

from bench.masks import build_mask


@pytest.mark.parametrize("call,match", [
    (lambda: build_mask("causual", 64), "unknown mask 'causual'.*causal"),
    (lambda: build_mask("sliding_window", 64, window=-1), "window must be an int >= 0, got -1"),
    (lambda: build_mask("sliding_window", 64, windw=3), r"unknown parameter\(s\) \['windw'\]"),
    (lambda: build_mask("causal", 64, window=3), r"unknown parameter\(s\) \['window'\]"),
    (lambda: build_mask("causal_document", 64, doc_lens=[30, 30]), "sum to 60, but seqlen=64"),
    (lambda: build_mask("causal_document", 64), "needs doc_lens"),
    (lambda: build_mask("causal_document", 64, doc_lens=[64, 0]), "doc_lens must be"),
    (lambda: build_mask("prefix_lm_document", 64, doc_lens=[16, 48], prefix_len=17),
     r"prefix_len must be an int in \[0, 16\].*shortest document.*got 17"),
    (lambda: build_mask("prefix_lm_causal", 64, prefix_len=65), r"prefix_len .*\[0, 64\]"),
    (lambda: build_mask("block_causal_document", 64, doc_lens=[64], block_size=0), "block_size"),
    (lambda: build_mask("block_sparse", 64, block_q=0), "block_q must be an int >= 1, got 0"),
    (lambda: build_mask("block_sparse", 64, sparsity=0.0), r"sparsity must be a number in \(0"),
    (lambda: build_mask("block_sparse", 64, sparsity=1.5), "sparsity .* got 1.5"),
    (lambda: build_mask("qk_sparse", 64, drop_ratio=1.2), "drop_ratio .* got 1.2"),
    (lambda: build_mask("var_block_sparse", 64, min_block=64, max_block=100), "max_block=100"),
    (lambda: build_mask("hash_sparse", 1 << 20, run_len=16), "run_len=16 gives 65536 runs"),
    (lambda: build_mask("block_sparse", 1 << 20), "block_q=64, block_k=64 give"),
    (lambda: build_mask("causal", 0), "seqlen must be an int >= 1, got 0"),
    (lambda: build_mask("causal", 64, seed=-1), "seed must be an int >= 0"),
], ids=["unknown_name", "negative_window", "unknown_param", "param_of_other_mask",
        "doc_lens_sum", "doc_lens_missing", "empty_doc", "prefix_too_long_doc",
        "prefix_too_long", "block_size_zero", "block_q_zero", "sparsity_zero", "sparsity_big",
        "drop_ratio_big", "max_block_not_multiple", "hash_too_many_runs", "block_grid_too_big",
        "seqlen_zero", "seed_negative"])
def test_bad_request_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def _user_slices():
    from magi_attention.common import AttnSlice
    return [AttnSlice.make(0, 40, 0, 40, "causal"), AttnSlice.make(40, 64, 10, 64, "bicausal"),
            AttnSlice.make(50, 64, 0, 8, "full")]


def test_mask_from_slices_is_the_union_of_the_slices():
    from bench.masks import convert, mask_from_slices
    from magi_attention.common import to_dense
    slices = _user_slices()
    mask = mask_from_slices(slices, 64, doc_lens=[40, 24], name="mine")
    dense = to_dense(slices, 64)
    assert mask.name == "mine" and mask.doc_lens == (40, 24) and mask.head_slices is None
    assert mask.area == int(dense.sum())
    assert torch.equal(convert.to_dense(mask), dense)


def test_mask_from_slices_runs_in_a_cp_strategy_and_a_kernel():
    """The user's mask through RingP2P (a gloo world of one) and the naive adapter."""
    import torch.distributed as dist
    from bench.cp import load_strategy
    from bench.kernels import load_adapter
    from bench.masks import mask_from_slices
    from bench.problem import Shapes, make_inputs
    from magi_attention.common import to_dense
    from magi_attention.testing import dense_attention
    mask = mask_from_slices(_user_slices(), 64)
    shapes = Shapes(1, 64, 2, 1, 16, "float32")
    inputs = make_inputs(shapes, "cpu", seed=0)
    expected, _ = dense_attention(inputs.q[0], inputs.k[0], inputs.v[0], to_dense(mask.slices, 64))
    prepared = load_adapter("naive").prepare(mask, shapes, torch.device("cpu"), inputs)
    torch.testing.assert_close(prepared.out_bshd(prepared.fwd())[0].double(), expected,
                               atol=1e-5, rtol=1e-5)
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        strategy = load_strategy("ring_p2p")(mask, None, num_heads_q=2, num_heads_kv=1)
        local = [strategy.shard(t[0]) for t in (inputs.q, inputs.k, inputs.v)]
        out = strategy.unshard(strategy.attention(*local))
    finally:
        if created:
            dist.destroy_process_group()
    torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("slices,error,match", [
    pytest.param("past", ValueError, "ends past seqlen=64", id="past_seqlen"),
    pytest.param("not_a_slice", TypeError, "AttnSlice objects", id="type"),
])
def test_mask_from_slices_refuses_bad_slices(slices, error, match):
    from bench.masks import mask_from_slices
    from magi_attention.common import AttnSlice
    bad = {"past": [AttnSlice.make(0, 65, 0, 64, "full")], "not_a_slice": [(0, 64, 0, 64)]}
    with pytest.raises(error, match=match):
        mask_from_slices(bad[slices], 64)
