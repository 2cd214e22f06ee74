"""Key building in one process (gloo, world size 1): argument checks and the varlen shortcut."""
import os
import tempfile

import pytest
import torch
import torch.distributed as dist

from magi_attention.api import (calc_attn, dispatch, magi_attn_flex_key, magi_attn_varlen_key,
                                undispatch)
from magi_attention.common import AttnMaskType, AttnSlice, to_dense
from magi_attention.testing import dense_attention, random_qkv


@pytest.fixture(scope="module")
def world1():
    d = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{os.path.join(d, 's')}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def test_varlen_key_equals_dense_causal_documents(world1):
    cu = [0, 40, 64, 128]
    key = magi_attn_varlen_key(cu, 2, 1, 16, causal=True, chunk_size=32, backend="reference",
                               dtype=torch.float32)
    q, k, v = random_qkv(128, 128, 2, 1, 16, requires_grad=False)
    out, meta = calc_attn(*(dispatch(t, key) for t in (q, k, v)), key)
    slices = [AttnSlice.make(a, b, a, b, AttnMaskType.CAUSAL) for a, b in zip(cu, cu[1:])]
    ref, ref_lse = dense_attention(q, k, v, to_dense(slices, 128))
    torch.testing.assert_close(undispatch(out, key).double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(undispatch(meta.lse, key).double(), ref_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kwargs,match", [
    ({"total_seqlen": 130, "chunk_size": 20}, "multiple of cp_size \\* chunk_size"),
    ({"q_ranges": [[0, 200]]}, "q_ranges\\[0\\]"),
    ({"k_ranges": [[0, 8], [8, 16]]}, "must both be \\[num_slices, 2\\]"),
    ({"attn_type_map": ["causal", "full"]}, "attn_type_map has 2 entries"),
    ({"dispatch_alg": "random"}, "unknown dispatch algorithm"),
], ids=["non_divisible", "range_out_of_bounds", "num_slices_mismatch", "type_map_length",
        "unknown_algorithm"])
def test_bad_arguments_raise_value_error_naming_them(world1, kwargs, match):
    args = {"q_ranges": [[0, 128]], "k_ranges": [[0, 128]], "attn_type_map": ["causal"],
            "total_seqlen": 128, "num_heads_q": 2, "num_heads_kv": 1, "head_dim": 16,
            "chunk_size": 32, **kwargs}
    with pytest.raises(ValueError, match=match):
        magi_attn_flex_key(**args)


def test_dispatch_rejects_a_local_tensor(world1):
    key = magi_attn_flex_key([[0, 64]], [[0, 64]], None, 64, 2, 1, 16, chunk_size=16)
    with pytest.raises(ValueError, match="global"):
        dispatch(torch.zeros(32, 2, 16), key)


def test_default_dispatch_is_auto_and_reported(world1):
    """Without FA4 (the reference kernel here) "auto" runs min_heap; an explicit choice stays."""
    cu = [0, 40, 64, 128]
    auto = magi_attn_varlen_key(cu, 2, 1, 16, chunk_size=32, backend="reference",
                                dtype=torch.float32)
    assert auto.meta.algorithm == "min_heap" and auto.meta.choice.predicted_us == {}
    explicit = magi_attn_varlen_key(cu, 2, 1, 16, chunk_size=32, backend="reference",
                                    dtype=torch.float32, dispatch_alg="sequential")
    assert explicit.meta.algorithm == "sequential" and explicit.meta.choice is None


CROSS = {"q_ranges": [[0, 128]], "k_ranges": [[0, 48]], "attn_type_map": ["causal"],
         "total_seqlen_q": 128, "total_seqlen_k": 48, "num_heads_q": 2, "num_heads_kv": 1,
         "head_dim": 16, "chunk_size": 32}


@pytest.mark.parametrize("kwargs,match", [
    ({"total_seqlen": 128}, "not both forms"),
    ({"total_seqlen_q": None, "total_seqlen_k": None}, "pass total_seqlen"),
    ({"total_seqlen_k": None}, "both total_seqlen_q and total_seqlen_k"),
    ({"q_ranges": [[0, 130]]}, "q_ranges\\[0\\] = \\[0, 130\\].*total_seqlen_q=128"),
    ({"k_ranges": [[0, 64]]}, "k_ranges\\[0\\] = \\[0, 64\\].*total_seqlen_k=48"),
    ({"total_seqlen_q": 96, "q_ranges": [[0, 96]], "chunk_size": 64},
     "total_seqlen_q=96 must be a multiple of cp_size \\* chunk_size"),
    ({"total_seqlen_k": 0, "k_ranges": [[0, 0]]}, "total_seqlen_k must be positive"),
    ({"dispatch_alg": "unequal_runs"}, "self-attention only"),
], ids=["both_forms", "neither_form", "total_seqlen_k_missing", "q_range_past_seqlen_q",
        "k_range_past_seqlen_k", "seqlen_q_not_divisible", "empty_k_sequence", "unequal_runs"])
def test_cross_attention_bad_arguments_raise_value_error_naming_them(world1, kwargs, match):
    with pytest.raises(ValueError, match=match):
        magi_attn_flex_key(**{**CROSS, **kwargs})


def test_a_missing_head_count_is_a_type_error(world1):
    with pytest.raises(TypeError, match="num_heads_kv is required"):
        magi_attn_flex_key(**{**CROSS, "num_heads_kv": None})


@pytest.mark.parametrize("kwargs,match", [
    ({"cu_seqlens": [0, 64, 128]}, "not both forms"),
    ({"cu_seqlens_k": [0, 48]}, "pair documents one to one"),
    ({"cu_seqlens_q": [0, 64, 32]}, "cu_seqlens_q must start at 0 and not decrease"),
], ids=["both_forms", "unpaired", "decreasing"])
def test_cross_varlen_bad_arguments_raise_value_error(world1, kwargs, match):
    args = {"cu_seqlens_q": [0, 64, 128], "cu_seqlens_k": [0, 16, 48], **kwargs}
    with pytest.raises(ValueError, match=match):
        magi_attn_varlen_key(num_heads_q=2, num_heads_kv=1, head_dim=16, chunk_size=32, **args)


def test_cross_key_sides_and_their_errors(world1):
    key = magi_attn_flex_key(**CROSS)
    assert key.is_cross and (key.total_seqlen_q, key.total_seqlen_k) == (128, 48)
    assert (key.shard_seqlen_q, key.shard_seqlen_kv) == (128, 48)
    assert torch.equal(key.position_ids(side="kv"), torch.arange(48))
    with pytest.raises(ValueError, match="side='kv'"):  # k passed as q: the hint names side
        dispatch(torch.zeros(48, 1, 16), key)
    with pytest.raises(ValueError, match="side must be one of"):
        dispatch(torch.zeros(48, 1, 16), key, side="k")
    self_key = magi_attn_flex_key([[0, 64]], [[0, 64]], None, 64, 2, 1, 16, chunk_size=16)
    assert not self_key.is_cross and self_key.dispatch_meta_kv is self_key.dispatch_meta


def test_cross_varlen_key_equals_dense_paired_documents(world1):
    """Document i's queries on document i's keys, causal aligned bottom-right; one rank."""
    cu_q, cu_k = [0, 40, 64, 128], [0, 10, 40, 48]
    key = magi_attn_varlen_key(num_heads_q=2, num_heads_kv=1, head_dim=16, causal=True,
                               chunk_size=32, backend="reference", dtype=torch.float32,
                               cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    q, k, v = random_qkv(128, 48, 2, 1, 16, requires_grad=False)
    out, meta = calc_attn(dispatch(q, key), dispatch(k, key, side="kv"),
                          dispatch(v, key, side="kv"), key)
    rows, cols = torch.arange(128)[:, None], torch.arange(48)[None, :]
    mask = torch.zeros(128, 48, dtype=torch.bool)
    for q0, q1, k0, k1 in zip(cu_q, cu_q[1:], cu_k, cu_k[1:]):
        mask |= (rows >= q0) & (rows < q1) & (cols >= k0) & (cols - k1 <= rows - q1)
    ref, ref_lse = dense_attention(q, k, v, mask)
    torch.testing.assert_close(undispatch(out, key).double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(undispatch(meta.lse, key).double(), ref_lse, atol=1e-5, rtol=1e-5)
