"""The solved meta, run without processes: every rank's stages, fed the KV its group_cast args
would deliver, must reproduce single-device attention (reference kernel vs dense oracle)."""
import numpy as np
import pytest
import torch

from magi_attention.common import to_dense, union_area
from magi_attention.comm.args import ranges_to_index
from magi_attention.functional import flex_flash_attn_fwd, merge_out_lse
from magi_attention.meta import (DISPATCH_ALGORITHMS, AttnShape, OverlapConfig, SliceArray,
                                 solve_magi_meta)
from magi_attention.testing import dense_attention, random_qkv
from magi_attention.testing.masks import MASK_NAMES, named_mask

SEQLEN = 256
DOC_LENS = [64, 32, 96, 64]
# defaults of the windowed / blocked patterns are sized for 1k-64k tokens; shrink them to S=256
SMALL_PARAMS = {"sliding_window": {"window": 24}, "sliding_window_causal": {"window": 24},
                "global_sliding_window": {"window": 24, "num_global": 8},
                "block_causal_document": {"block_size": 16}, "hash_sparse": {"run_len": 16},
                "block_sparse": {"block": 16},
                "var_block_sparse": {"min_block": 8, "max_block": 48}}


def small_mask(name):
    return named_mask(name, SEQLEN, doc_lens=DOC_LENS, seed=1, **SMALL_PARAMS.get(name, {}))


def simulate(slices, cp_size, chunk_size, algorithm, num_stages, q, k, v):
    """Global out/lse assembled from every rank's host + remote stages."""
    shape = AttnShape(q.shape[1], k.shape[1], q.shape[2])
    metas = [solve_magi_meta(slices, SEQLEN, cp_size, chunk_size, r, shape, algorithm,
                             OverlapConfig(num_stages=num_stages)) for r in range(cp_size)]
    dispatch = metas[0].dispatch
    kv_shards = [torch.cat([k, v], 1)[dispatch.position_ids(r)] for r in range(cp_size)]
    out = torch.zeros_like(q)
    lse = torch.zeros(q.shape[:2])
    for r, m in enumerate(metas):
        pos = torch.from_numpy(dispatch.position_ids(r))
        q_loc, kv_loc = q[pos], kv_shards[r]
        o, l = _stage(q_loc, kv_loc, m.runtime.host)
        for j, stage in enumerate(m.runtime.stages):
            parts = []
            for src, idx in _received(metas, r, j):
                assert len(idx) == stage.cast.recv_split_sizes[src]
                parts.append(kv_shards[src][torch.from_numpy(idx)])
            o2, l2 = _stage(q_loc, torch.cat(parts), stage.attn)
            o, l = merge_out_lse(o, l, o2, l2)
        out[pos], lse[pos] = o.to(out.dtype), l
    return out, lse, metas


def _stage(q, kv, attn):
    hk = kv.shape[1] // 2
    if attn.num_slices == 0:
        return torch.zeros_like(q, dtype=torch.float32), torch.full(q.shape[:2], -float("inf"))
    return flex_flash_attn_fwd(q, kv[:, :hk], kv[:, hk:], *attn.tensors("cpu"),
                               backend="reference")


@pytest.mark.parametrize("algorithm", list(DISPATCH_ALGORITHMS))
@pytest.mark.parametrize("cp_size,chunk_size,num_stages", [(2, 32, 1), (4, 16, 3)],
                         ids=["cp2-c32-s1", "cp4-c16-s3"])
def test_simulated_stages_equal_dense_attention_for_every_mask(algorithm, cp_size, chunk_size,
                                                                num_stages):
    q, k, v = random_qkv(SEQLEN, SEQLEN, 2, 1, 16, requires_grad=False)
    failures = []
    for name in MASK_NAMES:
        mask = small_mask(name)
        out, lse, metas = simulate(mask, cp_size, chunk_size, algorithm, num_stages, q, k, v)
        ref_out, ref_lse = dense_attention(q, k, v, to_dense(mask, SEQLEN))
        if not torch.allclose(out.double(), ref_out, atol=1e-4):
            failures.append(f"{name}: out max diff {(out.double() - ref_out).abs().max():.2e}")
        # received tokens are only what the local rows use: never a whole remote shard if unused
        table = metas[0].table
        assert (table.src != table.dst).all()
    assert not failures, "\n".join(failures)


def _received(metas, r, stage):
    """What every src sends to rank r in a stage, by src's own send args, in src order."""
    parts = []
    for src, ms in enumerate(metas):
        a = ms.runtime.stages[stage].cast
        offs = np.cumsum((0,) + a.send_split_sizes)
        parts.append((src, ranges_to_index(a.send_ranges)[offs[r]:offs[r + 1]]))
    return parts


def _fused_buffer(layout, own_kv, received):
    """The fused buffer from its layout: each own run and each received piece (the cast's
    buffer, sources in rank order) at its planned offset, the pads zero, as the runtime fills
    them; every position written once (a position left NaN would poison P @ V)."""
    buf = torch.full((layout.size, *own_kv.shape[1:]), float("nan"))
    for at, m in layout.pads:
        buf[at:at + m] = 0
    for copies, src in ((layout.own_copies, own_kv), (layout.recv_copies, received)):
        assert sum(m for _, _, m in copies) == len(src)
        for s, d, m in copies:
            assert torch.isnan(buf[d:d + m]).all()
            buf[d:d + m] = src[s:s + m]
    return buf


@pytest.mark.parametrize("early_start", [False, True], ids=["", "early_start"])
@pytest.mark.parametrize("algorithm", list(DISPATCH_ALGORITHMS))
@pytest.mark.parametrize("cp_size,chunk_size", [(2, 32), (4, 16)], ids=["cp2-c32", "cp4-c16"])
def test_fused_stage_over_planned_buffer_equals_dense_attention(algorithm, cp_size, chunk_size,
                                                                early_start):
    """The fused kernel over the buffer its layout plans (global order, or rank order; with
    early_start, rank order wherever that lands the cast in one region: at cp 2 every rank)."""
    q, k, v = random_qkv(SEQLEN, SEQLEN, 2, 1, 16, requires_grad=False)
    shape = AttnShape(2, 1, 16)
    failures = []
    for name in MASK_NAMES:
        mask = small_mask(name)
        metas = [solve_magi_meta(mask, SEQLEN, cp_size, chunk_size, r, shape, algorithm,
                                 OverlapConfig(fused=True, early_start=early_start))
                 for r in range(cp_size)]
        if early_start and cp_size == 2:
            failures += [f"{name}: rank {r}'s cast lands in pieces" for r, m in enumerate(metas)
                         if m.runtime.fused is not None and m.runtime.fused_layout.recv_at is None]
        dispatch = metas[0].dispatch
        kv_shards = [torch.cat([k, v], 1)[dispatch.position_ids(r)] for r in range(cp_size)]
        out = torch.zeros_like(q)
        for r, m in enumerate(metas):
            pos = torch.from_numpy(dispatch.position_ids(r))
            if m.runtime.fused is None:
                assert not m.runtime.stages
                out[pos] = _stage(q[pos], kv_shards[r], m.runtime.host)[0].to(out.dtype)
                continue
            received = torch.cat([kv_shards[s][torch.from_numpy(i)]
                                  for s, i in _received(metas, r, 0)])
            buf = _fused_buffer(m.runtime.fused_layout, kv_shards[r], received)
            out[pos] = _stage(q[pos], buf, m.runtime.fused)[0].to(out.dtype)
        ref_out, _ = dense_attention(q, k, v, to_dense(mask, SEQLEN))
        if not torch.allclose(out.double(), ref_out, atol=1e-4):
            failures.append(f"{name}: out max diff {(out.double() - ref_out).abs().max():.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("cp_size", [2, 4])
@pytest.mark.parametrize("name", ["full_document", "causal_document"])
def test_contiguous_dispatch_keeps_fused_document_masks_native(name, cp_size):
    """Ranks holding increasing runs (sequential dispatch): a document cut between ranks has its
    keys in one piece of the fused buffer, so FA4 runs every rank natively (varlen)."""
    from magi_attention.kernels.fa4._convert import fa4_block_sparse
    mask = small_mask(name)
    for r in range(cp_size):
        m = solve_magi_meta(mask, SEQLEN, cp_size, 16, r, AttnShape(2, 1, 16),
                            "sequential", OverlapConfig(fused=True))
        attn = m.runtime.fused or m.runtime.host
        assert fa4_block_sparse(attn.plan, 128, 128).native is not None, (name, r)


def test_host_and_stage_areas_add_up_to_the_mask_area():
    mask = small_mask("causal_document")
    metas = [solve_magi_meta(mask, SEQLEN, 4, 16, r, AttnShape(2, 1, 16),
                             overlap=OverlapConfig(num_stages=2)) for r in range(4)]
    total = sum(m.runtime.host.area() + sum(s.attn.area() for s in m.runtime.stages) for m in metas)
    assert total == int(SliceArray.from_slices(mask).areas().sum()) == union_area(mask)


def test_non_divisible_seqlen_is_a_clear_value_error():
    with pytest.raises(ValueError, match="multiple of cp_size \\* chunk_size"):
        solve_magi_meta(small_mask("causal"), 250, 2, 16, 0, AttnShape(2, 1, 16))


def test_early_start_keeps_global_order_for_fa4():
    """FA4's native varlen forms want global key order and FA4 has no early path: asking for
    early_start changes no FA4 layout, where it lands the Triton one's cast in one region."""
    shape, moved = AttnShape(2, 1, 16), 0
    for name in MASK_NAMES:
        for r in range(2):
            solve = lambda kernel, early: solve_magi_meta(  # noqa: E731
                small_mask(name), SEQLEN, 2, 32, r, shape, "min_heap",
                OverlapConfig(fused=True, early_start=early), kernel=kernel).runtime
            plain = solve("fa4", False)
            if plain.fused is None or plain.fused_layout.recv_at is not None:
                continue
            early = solve("fa4", True).fused_layout
            assert (early.own_copies, early.recv_copies, early.size) == (
                plain.fused_layout.own_copies, plain.fused_layout.recv_copies,
                plain.fused_layout.size), (name, r)
            assert solve("triton", True).fused_layout.recv_at is not None, (name, r)
            moved += 1
    assert moved > 0  # some layout of these masks splits the cast in global order
