"""``dispatch_alg="timed"`` (magi_attention.api._tune_dispatch): the rule, the candidates' chunks,
and over 2 gloo ranks a key that times both placements, agrees on every rank, keeps the one the
rule names, times once per mask, and stays exact against dense attention whichever it keeps."""
import json
import os
import tempfile
import traceback

import pytest
import torch
import torch.distributed as dist

from magi_attention.testing.processes import spawn
from magi_attention.api._tune_dispatch import (MIN_GAIN, UNEQUAL_CHUNK, candidate_chunks,
                                               choose_dispatch)

SEQLEN = 256
HEADS = (4, 2)
HEAD_DIM = 16
ATOL = 2e-4
# one heavy document of half the sequence: equal shares must split it, unequal ones need not
DOC_LENS = [32, 128, 64, 32]


def test_unequal_shares_only_where_faster_by_more_than_the_margin():
    assert choose_dispatch({"auto": 1.0, "unequal_runs": 1.0 - 2 * MIN_GAIN}) == "unequal_runs"
    assert choose_dispatch({"auto": 1.0, "unequal_runs": 1.0 - MIN_GAIN / 2}) == "auto"
    assert choose_dispatch({"auto": 1.0, "unequal_runs": 1.5}) == "auto"


@pytest.mark.parametrize("chunk,total,want", [(512, 32768, UNEQUAL_CHUNK), (512, 2 * 528, 512),
                                              (16, 256, 16), (UNEQUAL_CHUNK, 256, UNEQUAL_CHUNK)])
def test_unequal_runs_is_solved_on_fine_chunks_where_the_sequence_allows(chunk, total, want):
    assert candidate_chunks(chunk, 2, total) == {"auto": chunk, "unequal_runs": want}


def _worker(rank, init_file, out_dir, forced, world_size=2, mesh_shape=None):
    import magi_attention.api._tune_dispatch as tune
    from magi_attention.api import calc_attn, dispatch, magi_attn_flex_key, undispatch
    from magi_attention.common import slices_to_tensors, to_dense
    from magi_attention.testing import dense_attention, random_qkv
    from magi_attention.testing.masks import causal_document

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size)
    cp = None
    if mesh_shape is not None:  # 2D: the hierarchical cast and reduce
        from torch.distributed.device_mesh import init_device_mesh
        cp = init_device_mesh("cpu", mesh_shape, mesh_dim_names=("inter", "intra"))
    timings = []
    timed = tune.step_seconds
    if forced is not None:  # the timing replaced: the given candidate is the faster by far
        def timed(keys, *args):
            return {alg: 1.0 if alg == forced else 2.0 for alg in keys}

    def counted(keys, *args):
        timings.append(sorted(keys))
        return timed(keys, *args)
    tune.step_seconds = counted
    try:
        slices = causal_document(DOC_LENS)
        q, k, v = random_qkv(SEQLEN, SEQLEN, *HEADS, HEAD_DIM, seed=0, requires_grad=False)
        dout = torch.randn(SEQLEN, HEADS[0], HEAD_DIM, generator=torch.Generator().manual_seed(1))
        ref = [t.clone().requires_grad_() for t in (q, k, v)]
        ref_out, _ = dense_attention(*ref, to_dense(slices, SEQLEN))
        ref_grads = torch.autograd.grad(ref_out, ref, dout.double())
        build = lambda: magi_attn_flex_key(  # noqa: E731
            *slices_to_tensors(slices), SEQLEN, *HEADS, HEAD_DIM, cp, 32 if cp else 64,
            dispatch_alg="timed", backend="reference", dtype=torch.float32)
        key = build()
        again = build()  # the same mask and shapes: the kept choice, no second timing
        local = [dispatch(t, key).requires_grad_() for t in (q, k, v)]
        out_local, _ = calc_attn(*local, key)
        out_local.backward(dispatch(dout, key))
        errs = [(undispatch(out_local.detach(), key).double() - ref_out).abs().max().item()]
        errs += [(undispatch(t.grad, key).double() - r).abs().max().item()
                 for t, r in zip(local, ref_grads)]
        result = {"algorithm": key.meta.algorithm, "again": again.meta.algorithm,
                  "seconds": key.runtime.dispatch_seconds, "timings": timings,
                  "shards": list(key.dispatch_meta.shard_seqlens),
                  "chunk": key.chunk_size, "errs": errs}
    except Exception:  # noqa: BLE001 - reported to the test
        result = {"error": traceback.format_exc()}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


def _run(forced, world_size=2, mesh_shape=None):
    with tempfile.TemporaryDirectory() as d:
        spawn(_worker, args=(os.path.join(d, "store"), d, forced, world_size, mesh_shape),
                 nprocs=world_size)
        return [json.load(open(os.path.join(d, f"rank{r}.json"))) for r in range(world_size)]


@pytest.mark.parametrize("forced", ["auto", "unequal_runs", None],
                         ids=["equal_faster", "unequal_faster", "really_timed"])
def test_timed_key_keeps_the_faster_placement_exactly(forced):
    per_rank = _run(forced)
    assert not any("error" in r for r in per_rank), per_rank
    first = per_rank[0]
    for r in per_rank:  # every rank took the same choice from the same (slowest rank's) times
        assert (r["algorithm"], r["seconds"], r["shards"]) == (
            first["algorithm"], first["seconds"], first["shards"])
        assert all(e < ATOL for e in r["errs"]), r["errs"]
        # both candidates timed once, the second key reusing the choice
        assert r["timings"] == [["auto", "unequal_runs"]] and r["again"] == r["algorithm"]
    seconds = first["seconds"]
    assert sorted(seconds) == ["auto", "unequal_runs"] and all(s > 0 for s in seconds.values())
    kept = choose_dispatch(seconds)
    if forced is not None:
        assert kept == forced
    if kept == "unequal_runs":
        assert first["algorithm"] == "unequal_runs" and first["chunk"] == UNEQUAL_CHUNK
        # the heavy document stays on one rank: the shares differ
        assert first["shards"][0] != first["shards"][1], first["shards"]
    else:
        assert first["algorithm"] != "unequal_runs" and first["chunk"] == 64
        assert first["shards"] == [SEQLEN // 2] * 2


@pytest.mark.parametrize("forced,mesh_shape", [("unequal_runs", (2, 2)), (None, (2, 2)),
                                              ("unequal_runs", None)],
                         ids=["2x2_unequal_faster", "2x2_really_timed", "cp4_unequal_faster"])
def test_timed_key_on_four_ranks_is_exact(forced, mesh_shape):
    """Four ranks, on a 2x2 mesh (the hierarchical cast) and flat at cp 4 (unequal_runs' linear
    partition, no window): whichever placement is kept, the ranks agree and the result equals
    dense attention."""
    per_rank = _run(forced, world_size=4, mesh_shape=mesh_shape)
    assert not any("error" in r for r in per_rank), per_rank
    assert len({(r["algorithm"], json.dumps(r["seconds"])) for r in per_rank}) == 1, per_rank
    assert all(e < ATOL for r in per_rank for e in r["errs"]), per_rank
    assert per_rank[0]["algorithm"] == "unequal_runs" or (
        forced is None and choose_dispatch(per_rank[0]["seconds"]) == "auto")
    assert sum(per_rank[0]["shards"]) == SEQLEN


def test_one_rank_builds_the_equal_key_untimed(monkeypatch, tmp_path):
    """At cp 1 both candidates hold every token: the "auto" key, nothing timed."""
    import magi_attention.api._tune_dispatch as tune
    from magi_attention.api import magi_attn_flex_key

    def never(*args):
        raise AssertionError("timed at cp 1")
    monkeypatch.setattr(tune, "step_seconds", never)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        key = magi_attn_flex_key([[0, 128]], [[0, 128]], ["causal"], 128, *HEADS, HEAD_DIM,
                                 None, 32, dispatch_alg="timed", backend="reference",
                                 dtype=torch.float32)
    finally:
        dist.destroy_process_group()
    assert key.runtime.dispatch_seconds is None and key.meta.algorithm != "unequal_runs"
    assert list(key.dispatch_meta.shard_seqlens) == [128]



def _shapes_worker(rank, init_file, out_dir):
    import magi_attention.api._tune_dispatch as tune
    from magi_attention.api import magi_attn_flex_key

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    timed = []
    tune.step_seconds = lambda keys, device, shape, dtype: (
        timed.append([shape.num_heads_q, str(dtype)]) or {"auto": 1.0, "unequal_runs": 2.0})
    for heads, dtype in ((HEADS, torch.float32), (HEADS, torch.float32), ((8, 2), torch.float32),
                         (HEADS, torch.float64)):
        magi_attn_flex_key([[0, 128], [128, 256]], [[0, 128], [128, 256]], ["causal"] * 2,
                           SEQLEN, *heads, HEAD_DIM, None, 64, dispatch_alg="timed",
                           backend="reference", dtype=dtype)
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(timed, f)
    dist.destroy_process_group()


def test_the_choice_is_kept_per_mask_and_shapes():
    """A key of the same mask with other head counts or another dtype times again (its kernels
    differ); one of the same mask, shapes and dtype does not."""
    with tempfile.TemporaryDirectory() as d:
        spawn(_shapes_worker, args=(os.path.join(d, "store"), d), nprocs=2)
        per_rank = [json.load(open(os.path.join(d, f"rank{r}.json"))) for r in range(2)]
    assert per_rank[0] == per_rank[1] == [[HEADS[0], "torch.float32"], [8, "torch.float32"],
                                          [HEADS[0], "torch.float64"]]
