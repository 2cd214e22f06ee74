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
